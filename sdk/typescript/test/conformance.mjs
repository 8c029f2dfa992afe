#!/usr/bin/env node
// The TypeScript SDK's conformance runner (sdk/conformance/README.md): run
// from the repository root with INTENTD_ADDRS, INTENTD_API_KEY,
// INTENTD_APPROVER_KEY, INTENTD_CONTROL, INTENTD_RUN, INTENTD_SCENARIOS and
// INTENTD_KEY_VECTORS set; prints one JSON line per scenario of
// scenarios.json, in order, on stdout ({"scenario", "ok", "detail"}), and
// exits 0 only if every scenario passed. Anything else goes to stderr.

import { readFileSync } from "node:fs";
import { hostname } from "node:os";

import {
  BadRequestError,
  Client,
  DivergentError,
  EffectUnknown,
  IntentdError,
  NotFoundError,
  OutcomeUnknownError,
  ReportError,
  UnavailableError,
  key,
  keyOf,
} from "../dist/index.js";

const env = (name, fallback) => {
  const v = process.env[name];
  if (v === undefined || v === "") {
    if (fallback !== undefined) return fallback;
    throw new Error(`conformance: ${name} is not set`);
  }
  return v;
};

const log = (...args) => console.error("[ts-conformance]", ...args);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const json = (v) => JSON.stringify(v);

class Fail extends Error {}
function check(cond, msg) {
  if (!cond) throw new Fail(msg);
}

// The reason of a coalesced refusal note (fsm/refusalnote.go): its N is the
// claims it stands for.
const REFUSAL_NOTE = /^(\d+) (in_flight|in_doubt) refusals of fencing token \d+ by owners /;

/** The claims a key's audit trail records: an op claim event counts 1, a refusal note its N. */
function countClaims(trail) {
  const c = { total: 0, granted: 0, duplicate: 0, refusedEvents: 0, refusedNoted: 0, notes: 0 };
  for (const e of trail.events) {
    if (e.op !== "claim") continue;
    const m = REFUSAL_NOTE.exec(e.reason ?? "");
    if (m) {
      const n = Number(m[1]);
      c.notes++;
      c.refusedNoted += n;
      c.total += n;
      continue;
    }
    if (e.status === "granted") c.granted++;
    else if (e.status === "duplicate") c.duplicate++;
    else if (e.status === "in_flight") c.refusedEvents++;
    c.total++;
  }
  return c;
}

const describeClaims = (c) =>
  `${c.total} claims (${c.granted} granted, ${c.duplicate} duplicate, ${c.refusedEvents} refused as events, ${c.refusedNoted} refused in ${c.notes} notes)`;

const SCENARIO_TIMEOUT_MS = Number(process.env.INTENTD_SCENARIO_TIMEOUT_MS || 180_000);

async function main() {
  const addrs = env("INTENTD_ADDRS").split(",").map((s) => s.trim()).filter(Boolean);
  const apiKey = env("INTENTD_API_KEY");
  const approverKey = env("INTENTD_APPROVER_KEY");
  const control = env("INTENTD_CONTROL").replace(/\/+$/, "");
  const run = env("INTENTD_RUN");
  const scenarios = JSON.parse(readFileSync(env("INTENTD_SCENARIOS"), "utf8")).scenarios;
  const vectorsPath = env("INTENTD_KEY_VECTORS");

  const ownerPrefix = `conformance-ts/${hostname()}/${process.pid}`;
  const newClient = (opts = {}) => new Client({ addrs, apiKey, ownerPrefix, ...opts });
  const agent = newClient();
  const approver = new Client({ addrs, apiKey: approverKey, ownerPrefix });
  // Keys: INTENTD_RUN, then "ts", the scenario's position in the file (so a
  // file may repeat a scenario), then the scenario's own parts.
  let position = 0;
  const k = (...parts) => run + keyOf("ts", String(position), ...parts);

  async function controlCall(method, path) {
    const res = await fetch(control + path, { method, signal: AbortSignal.timeout(120_000) });
    const text = await res.text();
    if (!res.ok) throw new Error(`control ${method} ${path}: ${res.status} ${text}`);
    return text ? JSON.parse(text) : {};
  }

  /** get that answers undefined for a key that does not exist. */
  async function getOrNone(client, key) {
    try {
      return await client.get(key);
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  }

  const impl = {
    async "key-vectors"() {
      const vectors = JSON.parse(readFileSync(vectorsPath, "utf8"));
      const bad = [];
      for (const v of vectors) {
        const got = key(...v.parts);
        if (got !== v.key) bad.push(`${json(v.parts)} -> ${json(got)}, want ${json(v.key)}`);
      }
      check(vectors.length > 0, "no vectors");
      check(bad.length === 0, bad.join("; "));
      return `${vectors.length} vectors equal`;
    },

    async "bad-input-local"(s) {
      let fetched = 0;
      const counting = newClient({
        fetch: (input, init) => {
          fetched++;
          return fetch(input, init);
        },
      });
      const tool = s.tool ?? "conformance.charge";
      const cyclic = { a: 1 };
      cyclic.self = cyclic;
      const cases = [
        ["payload BigInt", { key: k("bad-input", "payload-bigint"), tool, payload: { amount: 10n } }],
        ["payload cyclic", { key: k("bad-input", "payload-cyclic"), tool, payload: cyclic }],
        ["payload undefined", { key: k("bad-input", "payload-undefined"), tool, payload: undefined }],
        ["key over 256 bytes", { key: run + "x".repeat(257), tool, payload: { amount: 1 } }],
        ["empty key", { key: "", tool, payload: { amount: 1 } }],
        ["empty tool", { key: k("bad-input", "empty-tool"), tool: "", payload: { amount: 1 } }],
      ];
      let runs = 0;
      for (const [what, e] of cases) {
        const err = await counting.do(e, () => ++runs).then(
          () => undefined,
          (x) => x,
        );
        check(err instanceof BadRequestError, `${what}: got ${err}, want BadRequestError`);
        check(fetched === 0, `${what}: ${fetched} requests were sent`);
      }
      check(runs === 0, `fn ran ${runs} times`);
      // The keys that could exist do not.
      for (const [what, e] of cases) {
        if (!e.key || new TextEncoder().encode(e.key).length > 256) continue;
        const it = await getOrNone(agent, e.key);
        check(it === undefined, `${what}: key ${json(e.key)} exists (state ${it?.state})`);
      }
      return `${cases.length} inputs refused locally with BadRequestError; 0 requests; fn ran 0 times; keys not found`;
    },

    async "granted-executed"(s) {
      const key = k("granted-executed");
      let runs = 0;
      const res = await agent.do({ key, tool: s.tool, payload: { amount: 1299, currency: "usd" } }, async (g) => {
        runs++;
        check(g.fencingToken > 0, "no fencing token");
        return { charge: "ch_1" };
      });
      check(runs === 1, `fn ran ${runs} times`);
      check(res.status === "executed" && res.ran, `status ${res.status}`);
      check(json(res.value) === json({ charge: "ch_1" }), `returned ${json(res.value)}`);
      const it = await agent.get(key);
      check(it.state === "executed" || it.state === "committed", `state ${it.state}`);
      check(json(it.result) === json({ charge: "ch_1" }), `recorded ${json(it.result)}`);
      return `fn ran 1 time; state ${it.state}; result ${json(it.result)}`;
    },

    async duplicate(s) {
      const key = k("duplicate");
      const payload = { amount: 500, currency: "usd" };
      await agent.do({ key, tool: s.tool, payload }, () => ({ charge: "ch_1" }));
      let runs = 0;
      const res = await agent.do({ key, tool: s.tool, payload: { currency: "usd", amount: 500 } }, () => {
        runs++;
        return { charge: "ch_2" };
      });
      check(runs === 0, `fn ran ${runs} times`);
      check(res.status === "duplicate", `status ${res.status}`);
      check(json(res.result) === json({ charge: "ch_1" }), `result ${json(res.result)}`);
      return `fn ran 0 times; result ${json(res.result)}`;
    },

    async divergent(s) {
      const key = k("divergent");
      await agent.do({ key, tool: s.tool, payload: { amount: 100 } }, () => ({ charge: "ch_d" }));
      let runs = 0;
      const err = await agent.do({ key, tool: s.tool, payload: { amount: 9999 } }, () => ++runs).then(
        (r) => new Error(`returned ${r.status}`),
        (e) => e,
      );
      check(err instanceof DivergentError, `got ${err}, want DivergentError`);
      check(runs === 0, `fn ran ${runs} times`);
      return `DivergentError (${err.code}, fingerprint ${err.fingerprint.slice(0, 8)} vs ${err.requestFingerprint.slice(0, 8)}); fn ran 0 times`;
    },

    async "concurrent-one-effect"(s) {
      const key = k("concurrent-one-effect");
      const callers = s.callers ?? 10;
      const fnMs = s.fn_ms ?? 300;
      let runs = 0;
      const results = await Promise.allSettled(
        Array.from({ length: callers }, () =>
          agent.do({ key, tool: s.tool, payload: { amount: 42 } }, async () => {
            runs++;
            await sleep(fnMs);
            return { charge: "ch_once" };
          }),
        ),
      );
      const failed = results.filter((r) => r.status === "rejected").map((r) => String(r.reason));
      check(failed.length === 0, `${failed.length} calls failed: ${failed.slice(0, 3).join("; ")}`);
      check(runs === 1, `fn ran ${runs} times`);
      const values = results.map((r) => json(r.value.ran ? r.value.value : r.value.result));
      const wrong = values.filter((v) => v !== json({ charge: "ch_once" }));
      check(wrong.length === 0, `calls returned ${wrong.slice(0, 3).join(", ")}`);
      const executed = results.filter((r) => r.value.status === "executed").length;
      return `${callers} callers: fn ran once; ${executed} executed, ${callers - executed} duplicate; all returned ${values[0]}`;
    },

    async "waiters-claim-once-per-change"(s) {
      const key = k("waiters");
      const waiters = s.waiters ?? 4;
      const waitMs = s.wait_ms ?? 20_000;
      const settleMs = s.settle_ms ?? 1500;
      // A client of its own whose claim answers the runner watches, through
      // the fetch it is given.
      let answered = 0;
      const refused = new Map(); // owner -> in_flight answers
      let allRefused;
      const waitersRefused = new Promise((resolve) => (allRefused = resolve));
      const watched = newClient({
        fetch: async (input, init) => {
          const res = await fetch(input, init);
          const url = String(input);
          if ((init?.method ?? "GET") !== "POST" || !new URL(url).pathname.endsWith("/v1/intents")) return res;
          let owner = "";
          try {
            owner = JSON.parse(String(init.body)).owner ?? "";
          } catch {}
          if (res.ok) {
            answered++;
          } else if (res.status === 409) {
            let code = "";
            try {
              code = JSON.parse(await res.clone().text()).code;
            } catch {}
            if (code === "in_flight") {
              answered++;
              refused.set(owner, (refused.get(owner) ?? 0) + 1);
              if (refused.size >= waiters) allRefused();
            }
          }
          return res;
        },
      });
      const result = { charge: "ch_waited" };
      const payload = { amount: 700 };
      let runs = 0;
      let granted;
      const holderGranted = new Promise((resolve) => (granted = resolve));
      let release;
      const released = new Promise((resolve) => (release = resolve));
      const fn = async () => {
        if (++runs === 1) granted();
        await released;
        return result;
      };
      const timeout = (what) => {
        let timer;
        const p = new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Fail(`${what()} within ${waitMs} ms`)), waitMs);
        });
        return { p, clear: () => clearTimeout(timer) };
      };
      const holder = watched.do({ key, tool: s.tool, payload }, fn);
      holder.catch(() => {});
      let calls = [];
      try {
        const t1 = timeout(() => "the holder was not granted");
        try {
          await Promise.race([holderGranted, holder.then((r) => { throw new Fail(`the holder's do ended before fn ran: ${r.status}`); }), t1.p]);
        } finally {
          t1.clear();
        }
        calls = Array.from({ length: waiters }, () => watched.do({ key, tool: s.tool, payload }, fn));
        calls.forEach((c) => c.catch(() => {}));
        // Release once every waiter's first claim was answered in_flight.
        const t2 = timeout(() => `only ${refused.size} of ${waiters} waiters were refused in_flight`);
        try {
          await Promise.race([waitersRefused, t2.p]);
        } finally {
          t2.clear();
        }
      } finally {
        release();
      }
      const h = await holder;
      check(h.status === "executed" && h.ran && json(h.value) === json(result), `the holder's do: ${h.status}, ${json(h.value)}`);
      const outs = await Promise.allSettled(calls);
      const failed = outs.filter((o) => o.status === "rejected").map((o) => String(o.reason));
      check(failed.length === 0, `${failed.length} waiters failed: ${failed.slice(0, 3).join("; ")}`);
      for (const o of outs) {
        check(o.value.status === "duplicate" && !o.value.ran && json(o.value.result) === json(result),
          `a waiter's do: ${o.value.status}, ${json(o.value.result)}, want the duplicate with ${json(result)}`);
      }
      check(runs === 1, `fn ran ${runs} times`);
      // Count the trail once it holds every answer the client saw and has
      // not changed for settle_ms (the leader notes refusals every second).
      const seen = answered;
      let counted;
      let stable = Date.now();
      const end = Date.now() + waitMs;
      for (;;) {
        const got = countClaims(await agent.audit(key));
        if (!counted || json(got) !== json(counted)) {
          counted = got;
          stable = Date.now();
        }
        if (counted.total >= seen && Date.now() - stable >= settleMs) break;
        check(Date.now() < end, `the trail did not settle within ${waitMs} ms: ${describeClaims(counted)}; the client saw ${seen} claim answers`);
        await sleep(100);
      }
      const bound = 1 + 2 * waiters;
      check(counted.total <= bound, `the trail counts ${describeClaims(counted)}, more than 1 + 2 x ${waiters} = ${bound}`);
      return `${waiters} waiters returned the duplicate, fn ran once; the client saw ${seen} claim answers; the trail counts ${describeClaims(counted)} (bound ${bound})`;
    },

    async "effect-unknown-in-doubt"(s) {
      const key = k("effect-unknown-in-doubt");
      const waitMs = s.wait_ms ?? 20_000;
      let runs = 0;
      const err = await agent.do({ key, tool: s.tool, payload: { amount: 7 }, leaseMs: s.lease_ms ?? 1000 }, () => {
        runs++;
        throw new EffectUnknown("the provider timed out mid-call");
      }).then(
        (r) => new Error(`returned ${r.status}`),
        (e) => e,
      );
      check(err instanceof EffectUnknown, `got ${err}, want EffectUnknown`);
      check(runs === 1, `fn ran ${runs} times`);
      const first = await agent.get(key);
      check(first.state === "declared" || first.state === "in_doubt", `right after: state ${first.state} (something was reported)`);
      const deadline = Date.now() + waitMs;
      let it = first;
      while (it.state !== "in_doubt" && Date.now() < deadline) {
        it = await agent.get(key, { waitMs: Math.min(5000, Math.max(1, deadline - Date.now())), afterVersion: it.version });
      }
      check(it.state === "in_doubt", `state ${it.state} after ${waitMs} ms`);
      check(it.result === undefined, `a result was recorded: ${json(it.result)}`);
      return `EffectUnknown rethrown; nothing reported; state in_doubt after ${Date.now() - (deadline - waitMs)} ms`;
    },

    async "lease-renewal"(s) {
      const key = k("lease-renewal");
      const fnMs = s.fn_ms ?? 3000;
      let runs = 0;
      let aborted = false;
      const res = await agent.do({ key, tool: s.tool, payload: { amount: 3 }, leaseMs: s.lease_ms ?? 1000 }, async (g, signal) => {
        runs++;
        await sleep(fnMs);
        aborted = signal.aborted;
        return { charge: "ch_long" };
      });
      check(!aborted, "the grant was lost while fn ran");
      check(runs === 1, `fn ran ${runs} times`);
      check(res.status === "executed" && json(res.value) === json({ charge: "ch_long" }), `status ${res.status}, value ${json(res.value)}`);
      const it = await agent.get(key);
      check(it.state === "executed" || it.state === "committed", `state ${it.state}`);
      const trail = await agent.audit(key);
      const renews = trail.events.filter((e) => e.op === "renew").length;
      return `fn (${fnMs} ms) ran once under a ${s.lease_ms ?? 1000} ms lease; ${renews} renewals; state ${it.state}`;
    },

    async approval(s) {
      const key = k("approval");
      const waitMs = s.wait_ms ?? 30_000;
      let runs = 0;
      let approvedAt = 0;
      let ranBeforeApproval = false;
      const approving = (async () => {
        await sleep(s.approve_after_ms ?? 500);
        const deadline = Date.now() + waitMs;
        for (;;) {
          const it = await getOrNone(approver, key);
          if (it && it.state === "pending_approval") {
            ranBeforeApproval = runs > 0;
            approvedAt = Date.now();
            await approver.approve({ key, reason: "conformance", fingerprint: it.fingerprint });
            return it;
          }
          check(Date.now() < deadline, `never saw the intent pending (state ${it?.state})`);
          await sleep(100);
        }
      })();
      const start = Date.now();
      const [res, pending] = await Promise.all([
        agent.do(
          { key, tool: s.tool, payload: { order: "ord_1", amount: 4200 } },
          () => {
            runs++;
            return { refund: "re_1" };
          },
          { approvalWaitMs: waitMs },
        ),
        approving,
      ]);
      check(!ranBeforeApproval, "fn ran before the approval");
      check(runs === 1, `fn ran ${runs} times`);
      check(res.status === "executed" && json(res.value) === json({ refund: "re_1" }), `status ${res.status}`);
      return `pending (fingerprint ${pending.fingerprint.slice(0, 8)}), approved after ${approvedAt - start} ms; fn ran once; result ${json(res.value)}`;
    },

    async "rate-limited-waited-out"(s) {
      const key = k("rate-limited");
      const callers = s.callers ?? 400;
      await agent.do({ key, tool: s.tool, payload: { amount: 1 } }, () => ({ charge: "ch_rl" }));
      const before = (await controlCall("GET", "/rate-limited")).count;
      const reader = newClient();
      const start = Date.now();
      const results = await Promise.allSettled(Array.from({ length: callers }, () => reader.get(key)));
      const failed = results.filter((r) => r.status === "rejected").map((r) => String(r.reason));
      const after = (await controlCall("GET", "/rate-limited")).count;
      check(failed.length === 0, `${failed.length} of ${callers} gets failed: ${failed.slice(0, 3).join("; ")}`);
      check(after > before, `the cluster answered no 429 (count ${before} -> ${after})`);
      return `${callers} concurrent gets all succeeded in ${Date.now() - start} ms; the cluster answered ${after - before} 429s`;
    },

    async "leader-kill"(s) {
      const calls = s.calls ?? 20;
      const fnMs = s.fn_ms ?? 500;
      const client = newClient();
      await client.discover().catch(() => {});
      const counts = new Map();
      const keys = Array.from({ length: calls }, (_, i) => k("leader-kill", String(i)));
      let killed;
      const killing = (async () => {
        await sleep(s.kill_after_ms ?? 200);
        killed = (await controlCall("POST", "/kill-leader")).killed;
        log("killed the leader", killed);
      })();
      let outcomes;
      try {
        outcomes = await Promise.allSettled(
          keys.map((key, i) =>
            client.do({ key, tool: s.tool, payload: { call: i } }, async () => {
              counts.set(key, (counts.get(key) ?? 0) + 1);
              await sleep(fnMs);
              return { call: i };
            }),
          ),
        );
        await killing;
      } finally {
        await killing.catch((e) => log("kill-leader failed:", String(e)));
        const t0 = Date.now();
        await controlCall("POST", "/restart");
        log(`restart: ${Date.now() - t0} ms`);
      }
      const problems = [];
      let results = 0;
      const errors = {};
      outcomes.forEach((o, i) => {
        const key = keys[i];
        const n = counts.get(key) ?? 0;
        if (n > 1) problems.push(`${key}: fn ran ${n} times`);
        if (o.status === "fulfilled") {
          results++;
          if (!o.value.ran || n !== 1) problems.push(`${key}: returned ${o.value.status} but fn ran ${n} times`);
          else if (json(o.value.value) !== json({ call: i })) problems.push(`${key}: returned ${json(o.value.value)}`);
        } else {
          const e = o.reason;
          const name = e?.name ?? typeof e;
          errors[name] = (errors[name] ?? 0) + 1;
          const definite = e instanceof IntentdError && !(e instanceof OutcomeUnknownError) && !(e instanceof UnavailableError) && !(e instanceof ReportError);
          if (!definite) problems.push(`${key}: not a definite error: ${e}`);
        }
      });
      check(killed !== undefined, "the leader was not killed");
      check(problems.length === 0, problems.slice(0, 5).join("; "));
      const errText = Object.keys(errors).length ? `; errors ${json(errors)}` : "";
      return `killed ${killed}; ${calls} calls: ${results} results, each fn once${errText}; no fn ran twice; restarted`;
    },
  };

  let allOk = true;
  for (const [i, s] of scenarios.entries()) {
    position = i;
    const started = Date.now();
    let ok = false;
    let detail;
    const f = impl[s.id];
    if (!f) {
      detail = "the TypeScript runner does not know this scenario";
    } else {
      let timer;
      try {
        detail = await Promise.race([
          f(s),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Fail(`timed out after ${SCENARIO_TIMEOUT_MS} ms`)), SCENARIO_TIMEOUT_MS);
          }),
        ]);
        ok = true;
      } catch (e) {
        detail = e instanceof Fail ? e.message : `${e?.name ?? "error"}: ${e?.message ?? String(e)}`;
        if (!(e instanceof Fail)) log(s.id, e);
      } finally {
        clearTimeout(timer);
      }
    }
    allOk &&= ok;
    log(`${s.id}: ${ok ? "ok" : "FAIL"} (${Date.now() - started} ms)`);
    process.stdout.write(JSON.stringify({ scenario: s.id, ok, detail }) + "\n");
  }
  return allOk;
}

main().then(
  (ok) => process.exit(ok ? 0 : 1),
  (err) => {
    log(err);
    process.exit(2);
  },
);
