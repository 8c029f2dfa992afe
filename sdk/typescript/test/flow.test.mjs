// The core without I/O (dist/core.js, dist/flow.js): the flows run here
// step by step against scripted outcomes, with no server, socket or timer;
// and neither module may do I/O of its own.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { Core, answered, requestPath } from "../dist/core.js";
import { call, settle } from "../dist/flow.js";
import { InFlightError, OutcomeUnknownError, RateLimitedError } from "../dist/index.js";

const A = "http://a:1";
const B = "http://b:1";

/** run steps flow synchronously: answer(step) returns { value } or { throw }. */
function run(flow, answer) {
  const steps = [];
  let r;
  try {
    r = flow.next();
    while (!r.done) {
      steps.push(r.value);
      const a = answer(r.value, steps.length - 1);
      r = "throw" in a ? flow.throw(a.throw) : flow.next(a.value);
    }
  } catch (error) {
    return { steps, error };
  }
  return { steps, value: r.value };
}

/** The AttemptResult of an HTTP answer to step's request (core.answered: the problem mapping). */
const reply = (step, status, doc, retryAfter = null) => ({
  value: answered(step.req, step.base, requestPath(step.req), { status, text: doc === undefined ? "" : JSON.stringify(doc), retryAfter }, false),
});

const core = (opts = {}) => new Core([A, B], { discovery: false, backoffBaseMs: 10, backoffMaxMs: 80, random: () => 0, ...opts });

test("call: a 503 moves on to the next node after a pause; the node that answered is preferred", () => {
  const c = core();
  const { steps, value, error } = run(call(c, { method: "GET", path: "/v1/intents" }, undefined), (s) => {
    if (s.kind === "pause") return { value: undefined };
    return s.base === A ? reply(s, 503, { code: "not_leader", title: "Not leader" }) : reply(s, 200, { intents: [] });
  });
  assert.equal(error, undefined);
  assert.deepEqual(steps.map((s) => s.kind + (s.base ? " " + s.base : "")), ["attempt " + A, "pause", "attempt " + B]);
  assert.equal(steps[1].ms, 5); // backoff(0): 10 ms with jitter 0 -> 5
  assert.deepEqual(value, { ok: true, status: 200, data: { intents: [] } });
  assert.deepEqual(c.endpoints(), [B, A]);
});

test("call: a write that may have been applied ends as OutcomeUnknownError, not as the last clean failure", () => {
  const c = core({ retries: 1 });
  const { steps, error } = run(call(c, { method: "POST", path: "/v1/intents", body: "{}" }, undefined), (s, i) => {
    if (s.kind === "pause") return { value: undefined };
    return i === 0 ? reply(s, 502, undefined) : reply(s, 503, { code: "unavailable", title: "Unavailable" });
  });
  assert.equal(steps.filter((s) => s.kind === "attempt").length, 2);
  assert.ok(error instanceof OutcomeUnknownError, String(error));
  assert.match(error.message, /an earlier attempt may have been applied/);
});

test("call: 429 is waited out on the same node, without counting as a retry", () => {
  const c = core({ retries: 0 });
  let n = 0;
  const { steps, value } = run(call(c, { method: "GET", path: "/v1/settings" }, undefined), (s) => {
    if (s.kind === "pause") return { value: undefined };
    return n++ < 2 ? reply(s, 429, { code: "rate_limited", title: "Too many" }) : reply(s, 200, { audit_retention: 1 });
  });
  assert.deepEqual(steps.filter((s) => s.kind === "attempt").map((s) => s.base), [A, A, A]);
  assert.ok(value.ok);
});

test("call: a 429 past rateLimitWaitMs is thrown", () => {
  const c = core({ rateLimitWaitMs: 0 });
  const { error } = run(call(c, { method: "GET", path: "/v1/settings", rateLimitWaitMs: 0 }, undefined), (s) =>
    reply(s, 429, { code: "rate_limited", title: "Too many" }),
  );
  assert.ok(error instanceof RateLimitedError, String(error));
});

test("call: a stopped caller sends nothing; a pause it ends stops the call with its reason", () => {
  const reason = new Error("stop");
  const stopped = run(call(core(), { method: "GET", path: "/v1/cluster" }, { aborted: true, reason }), () => assert.fail("no step"));
  assert.equal(stopped.error, reason);
  assert.deepEqual(stopped.steps, []);

  const stop = { aborted: false, reason: undefined };
  const { error } = run(call(core(), { method: "GET", path: "/v1/cluster" }, stop), (s) => {
    if (s.kind === "pause") {
      stop.aborted = true;
      stop.reason = reason;
      return { throw: reason };
    }
    return reply(s, 503, { code: "no_leader", title: "No leader" });
  });
  assert.equal(error, reason);
});

test("call: with discovery, a stale route is refreshed before the first attempt", () => {
  const c = core({ discovery: true });
  const fresh = { version: 1, addrs: [B, A], leader: B, at: Date.now(), preferred: 0 };
  const { steps, value } = run(call(c, { method: "GET", path: "/v1/cluster" }, undefined), (s) => {
    if (s.kind === "refresh") return { value: fresh };
    if (s.kind === "pause") return { value: undefined };
    return s.base === B ? reply(s, 200, {}) : assert.fail("the refreshed route names B first");
  });
  assert.deepEqual(steps.map((s) => s.kind), ["refresh", "attempt"]);
  assert.equal(steps[0].seen, c.route);
  assert.ok(value.ok);
});

test("settle: an owner in flight is long-polled (poll step), then the claim is sent again with the same body", () => {
  const c = core();
  const intent = { key: "k", state: "executing", version: 3, owner: "other" };
  let claims = 0;
  const { steps, value, error } = run(
    settle(c, { key: "k", body: '{"key":"k"}', owner: "me", fresh: true, maxWaitMs: 10_000, approvalWaitMs: 0 }, undefined),
    (s) => {
      if (s.kind === "poll") return { value: { ok: true, intent: { ...intent, version: 4, state: "executed" } } };
      if (s.kind === "pause") return { value: undefined };
      assert.equal(s.req.body, '{"key":"k"}');
      return claims++ === 0
        ? reply(s, 409, { code: "in_flight", title: "In flight", intent, retry_after_ms: 2000 })
        : reply(s, 200, { status: "duplicate", intent: { ...intent, version: 4, state: "executed", result: { ok: 1 } } });
    },
  );
  assert.equal(error, undefined);
  assert.deepEqual(steps.map((s) => s.kind), ["attempt", "poll", "attempt"]);
  assert.equal(steps[1].afterVersion, 3);
  assert.equal(steps[1].waitMs, 2250); // the holder's Retry-After + 250 ms
  assert.equal(value.status, "duplicate");
});

test("settle: still in flight at maxWaitMs throws the InFlightError", () => {
  const c = core();
  const { error } = run(
    settle(c, { key: "k", body: "{}", owner: "me", fresh: true, maxWaitMs: 1, approvalWaitMs: 0 }, undefined),
    (s) => {
      if (s.kind !== "attempt") return { value: { ok: false, err: new Error("x"), timedOut: true } };
      const start = Date.now();
      while (Date.now() - start < 3); // let maxWaitMs pass
      return reply(s, 409, { code: "in_flight", title: "In flight", intent: { key: "k", version: 1 } });
    },
  );
  assert.ok(error instanceof InFlightError, String(error));
});

test("core.js and flow.js do no I/O: no fetch, timer, listener or socket", () => {
  for (const f of ["core.js", "flow.js"]) {
    const src = readFileSync(new URL(`../dist/${f}`, import.meta.url), "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/^\s*\/\/.*$/gm, "");
    assert.doesNotMatch(src, /\b(fetch|setTimeout|setInterval|clearTimeout|AbortController|addEventListener|queueMicrotask)\b/, f);
    assert.doesNotMatch(src, /from\s+["']\.\/(client|node|transport)\.js["']/, `${f} imports a transport`);
  }
});
