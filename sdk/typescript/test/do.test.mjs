// do() and once(): the at-most-once contract of client/do.go.

import { test } from "node:test";
import assert from "node:assert/strict";

import * as sdk from "../dist/index.js";
import { FakeLedger, Problem, sendProblem, startCluster } from "./fake.mjs";

const { Client, EffectUnknown } = sdk;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// test.sh runs these tests over each transport (default: "auto", node:net on Node).
const transport = process.env.INTENTD_TEST_TRANSPORT || undefined;

function fastClient(addrs, opts = {}) {
  return new Client({ addrs, transport, backoffBaseMs: 5, backoffMaxMs: 40, timeoutMs: 5000, ...opts });
}

async function setup(t, opts = {}) {
  const fc = await startCluster({ ids: ["a"], ledger: new FakeLedger(opts.ledger) });
  t.after(() => fc.close());
  return { fc, c: fastClient([fc.url("a")], opts.client) };
}

const charge = (key = "charge:order-91", payload = { amount: 1299, currency: "usd" }) => ({ key, tool: "stripe.charge", payload });

test("granted: fn runs once, its result is recorded and committed", async (t) => {
  const { fc, c } = await setup(t);
  let runs = 0;
  const res = await c.do(charge(), async (g, signal) => {
    runs++;
    assert.ok(g.fencingToken > 0);
    assert.match(g.executionToken, /^gex_/);
    assert.equal(g.key, "charge:order-91");
    assert.ok(signal instanceof AbortSignal && !signal.aborted);
    return { charge: "ch_1" };
  });
  assert.equal(runs, 1);
  assert.equal(res.status, "executed");
  assert.equal(res.ran, true);
  assert.deepEqual(res.value, { charge: "ch_1" });
  assert.deepEqual(res.result, { charge: "ch_1" });
  assert.equal(res.intent.state, "committed");
  assert.ok(res.owner.startsWith("intentd-ts/"));
  const it = await c.get("charge:order-91");
  assert.equal(it.state, "committed");
  assert.deepEqual(it.result, { charge: "ch_1" });
  assert.deepEqual(fc.ledger.ops.map((o) => o.op), ["claim", "complete", "commit"]);
});

test("autoCommit false leaves executed", async (t) => {
  const { c } = await setup(t, { client: { autoCommit: false } });
  const res = await c.do(charge(), () => 1);
  assert.equal(res.intent.state, "executed");
});

test("duplicate: the recorded result, fn does not run", async (t) => {
  const { c } = await setup(t);
  await c.do(charge(), () => ({ charge: "ch_1" }));
  let runs = 0;
  const res = await c.do(charge("charge:order-91", { currency: "usd", amount: 1299 }), () => {
    runs++;
    return { charge: "ch_2" };
  });
  assert.equal(runs, 0);
  assert.equal(res.status, "duplicate");
  assert.equal(res.ran, false);
  assert.deepEqual(res.result, { charge: "ch_1" });
});

test("divergent: another payload under the key is refused, fn does not run", async (t) => {
  const { c } = await setup(t);
  await c.do(charge(), () => ({ charge: "ch_1" }));
  let runs = 0;
  const err = await c.do(charge("charge:order-91", { amount: 9999, currency: "usd" }), () => runs++).catch((e) => e);
  assert.ok(err instanceof sdk.DivergentError, String(err));
  assert.ok(err.intent && err.fingerprint && err.requestFingerprint);
  assert.equal(runs, 0);
});

test("concurrent callers on one key: fn runs once, everyone gets its result (long-poll, no busy loop)", async (t) => {
  const { fc, c } = await setup(t);
  let runs = 0;
  const calls = Array.from({ length: 10 }, () =>
    c.do(charge("k-conc"), async () => {
      runs++;
      await sleep(300);
      return { charge: "ch_c" };
    }),
  );
  const results = await Promise.all(calls);
  assert.equal(runs, 1);
  assert.equal(results.filter((r) => r.status === "executed").length, 1);
  assert.equal(results.filter((r) => r.status === "duplicate").length, 9);
  for (const r of results) assert.deepEqual(r.result, { charge: "ch_c" });
  assert.ok(fc.count(undefined, "wait") >= 9, "waiters long-poll");
  assert.ok(fc.count(undefined, "claim") <= 30, `claims: ${fc.count(undefined, "claim")}`);
  // every caller has its own owner, used for all of its claims
  const owners = new Map();
  for (const op of fc.ledger.ops.filter((o) => o.op === "claim")) owners.set(op.owner, (owners.get(op.owner) ?? 0) + 1);
  assert.equal(owners.size, 10);
});

test("fn throws: failed is recorded, the error rethrown; a later call runs a new generation", async (t) => {
  const { fc, c } = await setup(t);
  const boom = new Error("card declined");
  const err = await c.do(charge("k-fail"), () => {
    throw boom;
  }).catch((e) => e);
  assert.equal(err, boom);
  const it = await c.get("k-fail");
  assert.equal(it.state, "failed");
  assert.deepEqual(it.result, { error: "card declined" });
  const res = await c.do(charge("k-fail"), () => "ok");
  assert.equal(res.status, "executed");
  assert.equal(res.intent.generation, 2);
  const long = "é".repeat(2000);
  await c.do(charge("k-fail-long"), () => {
    throw new Error(long);
  }).catch(() => {});
  const rec = fc.ledger.ops.find((o) => o.op === "complete" && o.key === "k-fail-long").result.error;
  assert.ok(new TextEncoder().encode(rec).length <= 1027 && rec.endsWith("..."));
});

test("fn throws EffectUnknown: nothing is reported, the key turns in_doubt", async (t) => {
  const { fc, c } = await setup(t);
  const err = await c.do({ ...charge("k-unknown"), leaseMs: 150 }, () => {
    throw new EffectUnknown("provider timed out");
  }).catch((e) => e);
  assert.ok(err instanceof EffectUnknown);
  assert.equal(fc.ledger.ops.filter((o) => o.op === "complete").length, 0);
  await sleep(250);
  assert.equal((await c.get("k-unknown")).state, "in_doubt");
  // wrapped in a cause chain counts too
  const err2 = await c.do(charge("k-unknown-2"), () => {
    throw new Error("outer", { cause: new EffectUnknown() });
  }).catch((e) => e);
  assert.equal(err2.message, "outer");
  assert.equal(fc.ledger.ops.filter((o) => o.op === "complete").length, 0);
  assert.ok(sdk.isEffectUnknown(err2));
});

test("the lease is renewed every lease/3 while fn runs", async (t) => {
  const { fc, c } = await setup(t);
  const res = await c.do({ ...charge("k-renew"), leaseMs: 150 }, async () => {
    await sleep(500);
    return "done";
  });
  assert.equal(res.status, "executed");
  const renews = fc.ledger.ops.filter((o) => o.op === "renew").length;
  assert.ok(renews >= 4 && renews <= 12, `renews: ${renews}`); // every 50 ms for 500 ms; slack for a loaded machine
  await sleep(120);
  assert.equal(fc.ledger.ops.filter((o) => o.op === "renew").length, renews, "no renewal after fn returned");
});

test("a refused renewal aborts fn's signal with the FencedError", async (t) => {
  const { fc, c } = await setup(t);
  fc.hook = async (ctx) => {
    if (ctx.op === "renew") {
      sendProblem(ctx.res, new Problem(409, "fenced", "moved on"));
      return true;
    }
    return false;
  };
  let reason;
  const res = await c.do({ ...charge("k-lost"), leaseMs: 150 }, async (g, signal) => {
    await new Promise((resolve) => signal.addEventListener("abort", resolve));
    reason = signal.reason;
    throw new EffectUnknown("stopped", { cause: signal.reason });
  }).catch((e) => e);
  assert.ok(reason instanceof sdk.FencedError, String(reason));
  assert.ok(res instanceof EffectUnknown);
});

test("a renewal the cluster cannot answer is tried again; fn keeps running", async (t) => {
  const { fc, c } = await setup(t);
  let n = 0;
  fc.hook = async (ctx) => {
    if (ctx.op === "renew" && n++ < 2) {
      sendProblem(ctx.res, new Problem(503, "no_leader", "election", { retry_after_ms: 1 }));
      return true;
    }
    return false;
  };
  const res = await c.do({ ...charge("k-renew-503"), leaseMs: 300 }, async (g, signal) => {
    await sleep(450);
    assert.equal(signal.aborted, false);
    return 1;
  }, {});
  assert.equal(res.status, "executed");
});

test("an unknown claim outcome is retried with the same owner and gets the same grant; fn runs once", async (t) => {
  const { fc, c } = await setup(t);
  let lost = 0;
  fc.hook = async (ctx) => {
    if (ctx.op === "claim" && lost < 3) {
      lost++;
      await fc.apply(ctx);
      sendProblem(ctx.res, new Problem(503, "outcome_unknown", "lost", { retry_after_ms: 1 }));
      return true;
    }
    return false;
  };
  let runs = 0;
  const res = await c.do(charge("k-lost-answer"), () => ++runs, {});
  assert.equal(runs, 1);
  assert.equal(res.status, "executed");
  const owners = new Set(fc.ledger.ops.filter((o) => o.op === "claim").map((o) => o.owner));
  assert.equal(owners.size, 1);
});

test("a claim whose outcome stays unknown: fn does not run, OutcomeUnknownError; resuming with the owner gets the grant", async (t) => {
  const { fc, c } = await setup(t, { client: { maxWaitMs: 300, retries: 0 } });
  let block = true;
  fc.hook = async (ctx) => {
    if (ctx.op === "claim" && block) {
      await fc.apply(ctx);
      sendProblem(ctx.res, new Problem(503, "outcome_unknown", "lost", { retry_after_ms: 1 }));
      return true;
    }
    return false;
  };
  const owner = c.newOwner();
  let runs = 0;
  const err = await c.do({ ...charge("k-unknown-claim"), owner }, () => ++runs).catch((e) => e);
  assert.ok(err instanceof sdk.OutcomeUnknownError, String(err));
  assert.equal(runs, 0);
  block = false;
  const res = await c.do({ ...charge("k-unknown-claim"), owner }, () => ++runs);
  assert.equal(runs, 1);
  assert.equal(res.status, "executed");
});

test("this call's own grant that passed unused is reported failed and claimed again", async (t) => {
  const { fc, c } = await setup(t);
  let first = true;
  fc.hook = async (ctx) => {
    if (ctx.op === "claim" && first) {
      first = false;
      await fc.apply(ctx); // granted to this call's owner; the answer is lost ...
      await sleep(150); // ... and its lease (100 ms) passes before the retry
      sendProblem(ctx.res, new Problem(503, "outcome_unknown", "lost", { retry_after_ms: 1 }));
      return true;
    }
    return false;
  };
  let runs = 0;
  const res = await c.do({ ...charge("k-released"), leaseMs: 100 }, () => ++runs);
  assert.equal(runs, 1);
  assert.equal(res.status, "executed");
  const completes = fc.ledger.ops.filter((o) => o.op === "complete").map((o) => o.outcome);
  assert.deepEqual(completes, ["failed", "executed"]);
  assert.equal(res.intent.generation, 2);
});

test("in_flight past maxWaitMs: InFlightError, fn does not run", async (t) => {
  const { c } = await setup(t, { client: { maxWaitMs: 300 } });
  const holder = await c.claim({ ...charge("k-held"), leaseMs: 10_000 });
  assert.equal(holder.status, "granted");
  let runs = 0;
  const start = Date.now();
  const err = await c.do(charge("k-held"), () => ++runs).catch((e) => e);
  assert.ok(err instanceof sdk.InFlightError, String(err));
  assert.equal(runs, 0);
  assert.ok(Date.now() - start < 2000);
});

test("in_flight holder fails: this call is granted a new generation and runs", async (t) => {
  const { c } = await setup(t);
  const holder = await c.claim({ ...charge("k-holder-fails"), leaseMs: 10_000 });
  setTimeout(() => c.complete({ key: "k-holder-fails", owner: holder.owner, fencingToken: holder.fencingToken, outcome: "failed" }), 150);
  let runs = 0;
  const res = await c.do(charge("k-holder-fails"), () => ++runs);
  assert.equal(runs, 1);
  assert.equal(res.status, "executed");
  assert.equal(res.intent.generation, 2);
});

test("refusals are typed and nothing runs: in_doubt, rejected", async (t) => {
  const { c } = await setup(t, { ledger: { approvalTools: ["payments.refund"] }, client: { approvalWaitMs: 0 } });
  await c.do({ ...charge("k-doubt"), leaseMs: 100 }, () => {
    throw new EffectUnknown();
  }).catch(() => {});
  await sleep(150);
  let runs = 0;
  const e1 = await c.do(charge("k-doubt"), () => ++runs).catch((e) => e);
  assert.ok(e1 instanceof sdk.InDoubtError, String(e1));
  const refund = { key: "refund:1", tool: "payments.refund", payload: { amount: 1 } };
  const e2 = await c.do(refund, () => ++runs).catch((e) => e);
  assert.ok(e2 instanceof sdk.PendingApprovalError, String(e2)); // approvalWaitMs 0: at once, like Go
  assert.equal(e2.intent.state, "pending_approval");
  await c.reject({ key: "refund:1", actor: "bob" });
  const e3 = await c.do(refund, () => ++runs).catch((e) => e);
  assert.ok(e3 instanceof sdk.RejectedError, String(e3));
  assert.equal(runs, 0);
});

test("pending_approval: do() waits for the decision, then runs fn once", async (t) => {
  const { fc, c } = await setup(t, { ledger: { approvalTools: ["payments.refund"] } });
  const refund = { key: "refund:2", tool: "payments.refund", payload: { amount: 4200 } };
  let runs = 0;
  setTimeout(async () => {
    assert.equal(runs, 0);
    const page = await c.approvals();
    assert.equal(page.intents.length, 1);
    await c.approve({ key: "refund:2", actor: "alice", fingerprint: page.intents[0].fingerprint });
  }, 200);
  const res = await c.do(refund, () => {
    runs++;
    return { refund: "re_1" };
  });
  assert.equal(runs, 1);
  assert.equal(res.status, "executed");
  assert.deepEqual(res.result, { refund: "re_1" });
  assert.ok(fc.count(undefined, "wait") >= 1);
  assert.ok(fc.count(undefined, "claim") <= 3, "no claim polling while pending");
});

test("pending_approval past approvalWaitMs: PendingApprovalError", async (t) => {
  const { c } = await setup(t, { ledger: { approvalTools: ["payments.refund"] } });
  const start = Date.now();
  const err = await c.do({ key: "refund:3", tool: "payments.refund", payload: 1 }, () => 1, { approvalWaitMs: 200 }).catch((e) => e);
  assert.ok(err instanceof sdk.PendingApprovalError, String(err));
  assert.ok(Date.now() - start >= 190 && Date.now() - start < 2000);
});

test("bad input is refused locally: nothing is sent, fn never runs", async (t) => {
  const { fc, c } = await setup(t);
  let runs = 0;
  const fn = () => ++runs;
  const cyclic = {};
  cyclic.me = cyclic;
  for (const [what, e] of [
    ["bigint", { key: "k", tool: "t", payload: { n: 1n } }],
    ["cycle", { key: "k", tool: "t", payload: cyclic }],
    ["undefined", { key: "k", tool: "t", payload: undefined }],
    ["function", { key: "k", tool: "t", payload: () => 1 }],
    ["long key", { key: "x".repeat(257), tool: "t", payload: 1 }],
    ["empty key", { key: "", tool: "t", payload: 1 }],
    ["unprintable key", { key: "a\nb", tool: "t", payload: 1 }],
    ["empty tool", { key: "k", tool: "", payload: 1 }],
    ["bad lease", { key: "k", tool: "t", payload: 1, leaseMs: -1 }],
  ]) {
    const err = await c.do(e, fn).catch((x) => x);
    assert.ok(err instanceof sdk.BadRequestError, `${what}: ${err}`);
  }
  assert.ok((await c.do({ key: "k", tool: "t", payload: 1 }, null).catch((x) => x)) instanceof sdk.BadRequestError);
  assert.equal(runs, 0);
  assert.equal(fc.requests.length, 0);
});

test("a lost report is retried with the same request; it is reported after the caller's signal aborted", async (t) => {
  const { fc, c } = await setup(t);
  let n = 0;
  fc.hook = async (ctx) => {
    if (ctx.op === "complete" && n++ < 2) {
      await fc.apply(ctx);
      sendProblem(ctx.res, new Problem(503, "outcome_unknown", "lost", { retry_after_ms: 1 }));
      return true;
    }
    return false;
  };
  const ac = new AbortController();
  const res = await c.do(charge("k-report"), async () => {
    ac.abort();
    return { ok: true };
  }, { signal: ac.signal });
  assert.equal(res.status, "executed");
  const completes = fc.ledger.ops.filter((o) => o.op === "complete");
  assert.equal(completes.length, 3);
  assert.equal(new Set(completes.map((o) => JSON.stringify(o))).size, 1);
});

test("a result the ledger refuses: the effect is recorded without it (ReportError, status executed)", async (t) => {
  const { fc, c } = await setup(t);
  fc.hook = async (ctx) => {
    if (ctx.op === "complete" && ctx.body.result !== undefined) {
      sendProblem(ctx.res, new Problem(413, "too_large", "result over 64 KiB"));
      return true;
    }
    return false;
  };
  const err = await c.do(charge("k-big"), () => ({ big: "x" })).catch((e) => e);
  assert.ok(err instanceof sdk.ReportError, String(err));
  assert.equal(err.effect.status, "executed");
  assert.equal(err.effect.ran, true);
  assert.ok(err.cause instanceof sdk.BadRequestError);
  assert.equal((await c.get("k-big")).state, "committed");
  const err2 = await c.do(charge("k-bigint"), () => ({ n: 1n })).catch((e) => e);
  assert.ok(err2 instanceof sdk.ReportError && err2.effect.status === "executed");
});

test("a report that cannot land: ReportError with ran true and no status", async (t) => {
  const { fc, c } = await setup(t, { client: { reportTimeoutMs: 200 } });
  fc.hook = async (ctx) => {
    if (ctx.op === "complete") {
      sendProblem(ctx.res, new Problem(503, "no_leader", "x", { retry_after_ms: 1 }));
      return true;
    }
    return false;
  };
  const err = await c.do(charge("k-noreport"), () => 7).catch((e) => e);
  assert.ok(err instanceof sdk.ReportError, String(err));
  assert.equal(err.effect.ran, true);
  assert.equal(err.effect.status, undefined);
  assert.equal(err.effect.value, 7);
});

test("aborting the caller's signal while waiting on an in-flight holder ends do() with the reason", async (t) => {
  const { c } = await setup(t);
  await c.claim({ ...charge("k-abort"), leaseMs: 10_000 });
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error("user gave up")), 100);
  const err = await c.do(charge("k-abort"), () => 1, { signal: ac.signal }).catch((e) => e);
  assert.equal(err.message, "user gave up");
});

test("the caller's abort reaches fn's signal", async (t) => {
  const { c } = await setup(t);
  const ac = new AbortController();
  const err = await c.do(charge("k-abort-fn"), async (g, signal) => {
    setTimeout(() => ac.abort(new Error("bye")), 20);
    await new Promise((r) => signal.addEventListener("abort", r));
    throw new EffectUnknown("aborted mid-effect", { cause: signal.reason });
  }, { signal: ac.signal }).catch((e) => e);
  assert.ok(err instanceof EffectUnknown);
  assert.equal(err.cause.message, "bye");
});

test("once(): a plain async function in, a plain async function out", async (t) => {
  const { fc, c } = await setup(t);
  let runs = 0;
  const sendEmail = c.once(
    { tool: "email.send", key: (a) => [a.ticket, "welcome"] },
    async (args, { grant, signal }) => {
      runs++;
      assert.ok(grant.fencingToken > 0 && signal instanceof AbortSignal);
      return { messageId: "m-" + args.ticket };
    },
  );
  const r1 = await sendEmail({ ticket: "T:1", to: "a@b" });
  const r2 = await sendEmail({ ticket: "T:1", to: "a@b" });
  assert.deepEqual(r1, { messageId: "m-T:1" });
  assert.deepEqual(r2, r1);
  assert.equal(runs, 1);
  assert.equal(fc.ledger.intents.has("email.send:T%3A1:welcome"), true);
  await assert.rejects(sendEmail({ ticket: "T:1", to: "other@b" }), sdk.DivergentError);
  // the standalone form, a custom payload and a full key
  const refund = sdk.once(c, { tool: "payments.refund", key: (a) => `refund:${a.order}`, payload: (a) => ({ amount: a.amount }) }, (a) => ({ refunded: a.amount }));
  assert.deepEqual(await refund({ order: "o1", amount: 5, note: "x" }), { refunded: 5 });
  assert.deepEqual(await refund({ order: "o1", amount: 5, note: "y" }), { refunded: 5 });
  assert.deepEqual(fc.ledger.intents.get("refund:o1").payload, { amount: 5 });
  // the framework's abort signal (Vercel AI SDK's name) reaches fn
  const ac = new AbortController();
  ac.abort(new Error("cancelled"));
  await assert.rejects(refund({ order: "o2", amount: 1 }, { abortSignal: ac.signal }), /cancelled/);
  assert.equal(fc.ledger.intents.has("refund:o2"), false);
});

test("long-polls refused (429 too_many_waiters): do() falls back to claiming again", async (t) => {
  const { fc, c } = await setup(t);
  fc.hook = async (ctx) => {
    if (ctx.op === "wait") {
      sendProblem(ctx.res, new Problem(429, "too_many_waiters", "64 long-polls already wait", { retry_after_ms: 20 }));
      return true;
    }
    return false;
  };
  const holder = await c.claim({ ...charge("k-waiters"), leaseMs: 10_000 });
  setTimeout(() => c.complete({ key: "k-waiters", owner: holder.owner, fencingToken: holder.fencingToken, outcome: "executed", result: { r: 1 } }), 200);
  const start = Date.now();
  let runs = 0;
  const res = await c.do(charge("k-waiters"), () => ++runs);
  assert.equal(res.status, "duplicate");
  assert.deepEqual(res.result, { r: 1 });
  assert.equal(runs, 0);
  assert.ok(Date.now() - start < 3000, `took ${Date.now() - start} ms`);
  // and while waiting for an approval
  const fc2 = await startCluster({ ids: ["a"], ledger: new FakeLedger({ approvalTools: ["payments.refund"] }) });
  t.after(() => fc2.close());
  fc2.hook = fc.hook;
  const c2 = fastClient([fc2.url("a")]);
  setTimeout(() => c2.approve({ key: "refund:w", actor: "bob" }), 200);
  const r2 = await c2.do({ key: "refund:w", tool: "payments.refund", payload: 1 }, () => "refunded", { approvalWaitMs: 5000 });
  assert.equal(r2.value, "refunded");
});

// Namespace quotas (docs/operations.md#namespace-quotas-and-usage): what do() does with each quota answer to its
// first claim. The pauses are read from the client's flow steps, not timed.
test("namespace quotas: 429 namespace_rate_limited waits the hint once; 507 namespace_full refuses, fn does not run", async (t) => {
  const cases = [
    { name: "namespace_rate_limited", status: 429, code: "namespace_rate_limited", retryAfterMs: 200, claims: 2, pauses: [200] },
    { name: "rate_limited (control)", status: 429, code: "rate_limited", retryAfterMs: 200, claims: 2, pauses: [200] },
    { name: "namespace_full", status: 507, code: "namespace_full", want: sdk.NamespaceFullError, claims: 1, pauses: [] },
    { name: "ledger_full", status: 507, code: "ledger_full", want: sdk.LedgerFullError, claims: 1, pauses: [] },
  ];
  for (const [i, tc] of cases.entries()) {
    await t.test(tc.name, async (t) => {
      // backoffMaxMs above the hint, so the pause is the hint itself.
      const { fc, c } = await setup(t, { client: { backoffMaxMs: 1000 } });
      const key = `k-quota-${i}`;
      let claims = 0;
      fc.hook = async (ctx) => {
        if (ctx.op !== "claim") return false;
        if (claims++ > 0) return false;
        const extra = tc.retryAfterMs ? { retry_after_ms: tc.retryAfterMs } : {};
        sendProblem(ctx.res, new Problem(tc.status, tc.code, "namespace quota", extra));
        return true;
      };
      const pauses = [];
      const perform = c.perform.bind(c);
      c.perform = (step, signal) => {
        if (step.kind === "pause") pauses.push(step.ms);
        return perform(step, signal);
      };
      let runs = 0;
      const out = await c.do(charge(key), () => ++runs).catch((e) => e);
      if (tc.want) {
        assert.ok(out instanceof tc.want, String(out));
        assert.equal(out.status, tc.status);
        assert.equal(out.code, tc.code);
        assert.equal(runs, 0);
        assert.equal(fc.ledger.intents.has(key), false); // nothing was written
      } else {
        assert.equal(out.status, "executed", String(out));
        assert.equal(runs, 1);
      }
      assert.equal(claims, tc.claims);
      assert.deepEqual(pauses, tc.pauses);
    });
  }
});

test("namespace_rate_limited past rateLimitWaitMs and maxWaitMs: RateLimitedError, fn does not run", async (t) => {
  const { fc, c } = await setup(t, { client: { rateLimitWaitMs: 100, maxWaitMs: 200 } });
  fc.hook = async (ctx) => {
    if (ctx.op !== "claim") return false;
    sendProblem(ctx.res, new Problem(429, "namespace_rate_limited", "namespace quota", { retry_after_ms: 30 }));
    return true;
  };
  let runs = 0;
  const err = await c.do(charge("k-ns-limited"), () => ++runs).catch((e) => e);
  assert.ok(err instanceof sdk.RateLimitedError, String(err));
  assert.equal(err.code, "namespace_rate_limited");
  assert.equal(runs, 0);
});

test("once(): 507 namespace_full is a NamespaceFullError and the function does not run", async (t) => {
  const { fc, c } = await setup(t);
  let full = true; // the first claim only: a retry would be granted, and would run the function
  fc.hook = async (ctx) => {
    if (ctx.op !== "claim" || !full) return false;
    full = false;
    sendProblem(ctx.res, new Problem(507, "namespace_full", "namespace quota"));
    return true;
  };
  const calls = [];
  const send = c.once({ tool: "email.send", key: (to) => `email:${to}` }, async (to) => {
    calls.push(to);
    return "sent";
  });
  await assert.rejects(send("a@x"), sdk.NamespaceFullError);
  assert.deepEqual(calls, []);
  assert.equal(await send("a@x"), "sent"); // served once the namespace has room
  assert.deepEqual(calls, ["a@x"]);
});
