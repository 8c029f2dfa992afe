// Transport: discovery, failover, retries with the same request, Retry-After,
// problem mapping, abort signals, local refusals.

import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import * as sdk from "../dist/index.js";
import { Problem, sendProblem, startCluster } from "./fake.mjs";

const { Client } = sdk;

// test.sh runs these tests over each transport (default: "auto", node:net on Node).
const transport = process.env.INTENTD_TEST_TRANSPORT || undefined;

function fastClient(addrs, opts = {}) {
  return new Client({ addrs, transport, backoffBaseMs: 5, backoffMaxMs: 40, timeoutMs: 3000, ...opts });
}

/** A server answering every request with handler(req, res, n). */
async function serve(handler) {
  let n = 0;
  const sockets = new Set();
  const server = http.createServer(async (req, res) => {
    let raw = "";
    for await (const c of req) raw += c;
    req.rawBody = raw;
    handler(req, res, ++n);
  });
  server.on("connection", (s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    count: () => n,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** An address nobody listens on. */
async function deadAddr() {
  const s = await serve(() => {});
  const url = s.url;
  await s.close();
  return url;
}

test("discovery puts the leader first: writes go straight to it", async (t) => {
  const fc = await startCluster({ ids: ["a", "b", "c"], leader: "a" });
  t.after(() => fc.close());
  // Configured with one follower only: the client learns the rest.
  const c = fastClient([fc.url("b")]);
  const r = await c.claim({ key: "k1", tool: "t", payload: { x: 1 } });
  assert.equal(r.status, "granted");
  assert.equal(r.created, true);
  assert.equal(fc.count("a", "claim"), 1);
  assert.equal(fc.count("b", "claim"), 0);
  assert.equal(fc.count("c", "claim"), 0);
  assert.equal(c.leader(), fc.url("a"));
  assert.equal(c.endpoints()[0], fc.url("a"));
});

test("discovery follows the leader after not_leader", async (t) => {
  const fc = await startCluster({ ids: ["a", "b", "c"], leader: "a" });
  t.after(() => fc.close());
  const c = fastClient(fc.urls());
  await c.claim({ key: "k1", tool: "t", payload: 1 });
  fc.leader = "c";
  const r = await c.claim({ key: "k2", tool: "t", payload: 1 });
  assert.equal(r.status, "granted");
  assert.equal(fc.count("c", "claim"), 1);
  assert.equal(c.leader(), fc.url("c"));
  assert.equal(await c.discover(), fc.url("c"));
});

test("discovery failure falls back to the configured order", async (t) => {
  const fc = await startCluster({ ids: ["a"], leader: "a" });
  t.after(() => fc.close());
  fc.hook = async ({ op, res }) => {
    if (op === "cluster") {
      sendProblem(res, new Problem(500, "internal", "boom"));
      return true;
    }
    return false;
  };
  const c = fastClient([fc.url("a")]);
  assert.equal((await c.claim({ key: "k", tool: "t", payload: null })).status, "granted");
  assert.equal(c.leader(), "");
  await assert.rejects(c.discover(), sdk.NoLeaderError);
});

test("concurrent first calls share one discovery", async (t) => {
  const fc = await startCluster({ ids: ["a", "b"], leader: "b" });
  t.after(() => fc.close());
  const c = fastClient(fc.urls());
  await Promise.all(Array.from({ length: 10 }, (_, i) => c.claim({ key: "k" + i, tool: "t", payload: i })));
  assert.equal(fc.count(undefined, "cluster"), 1); // one discovery, one probe: a names the leader
  assert.equal(fc.count("b", "claim"), 10);
});

test("retries rotate past an unreachable node, with the same owner and payload", async (t) => {
  const fc = await startCluster({ ids: ["a"], leader: "a" });
  t.after(() => fc.close());
  const dead = await deadAddr();
  const c = fastClient([dead, fc.url("a")], { discovery: false });
  const r = await c.claim({ key: "k", tool: "t", payload: { p: 1 }, owner: "o-1" });
  assert.equal(r.owner, "o-1");
  assert.equal(r.status, "granted");
});

test("503 outcome_unknown is retried with the identical request and returns the same grant", async (t) => {
  const fc = await startCluster({ ids: ["a"], leader: "a" });
  t.after(() => fc.close());
  let lost = 0;
  fc.hook = async (ctx) => {
    if (ctx.op === "claim" && lost < 2) {
      lost++;
      await fc.apply(ctx); // applied, but the answer is lost
      sendProblem(ctx.res, new Problem(503, "outcome_unknown", "lost", { retry_after_ms: 10 }));
      return true;
    }
    return false;
  };
  const c = fastClient([fc.url("a")]);
  const r = await c.claim({ key: "k", tool: "t", payload: { amount: 1 } });
  assert.equal(r.status, "granted");
  assert.equal(r.created, false); // the same grant, answered again (200)
  const bodies = fc.requests.filter((q) => q.op === "claim").map((q) => JSON.stringify(q.body));
  assert.equal(bodies.length, 3);
  assert.equal(new Set(bodies).size, 1, "every retry is the same request");
});

test("retries give up after `retries`; an earlier maybe-applied write stays outcome_unknown", async (t) => {
  let calls = 0;
  const s = await serve((req, res, n) => {
    calls = n;
    if (n === 1) return sendProblem(res, new Problem(503, "outcome_unknown", "lost"));
    sendProblem(res, new Problem(503, "no_leader", "election"));
  });
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false, retries: 2 });
  const err = await c.claim({ key: "k", tool: "t", payload: 1 }).catch((e) => e);
  assert.ok(err instanceof sdk.OutcomeUnknownError, String(err));
  assert.ok(err.cause instanceof sdk.NoLeaderError);
  assert.equal(calls, 3);
  const err2 = await c.get("k").catch((e) => e);
  assert.ok(err2 instanceof sdk.NoLeaderError);
  assert.ok(err2 instanceof sdk.UnavailableError);
});

test("no retry on a definite answer (409, 422, 404)", async (t) => {
  const s = await serve((req, res) => sendProblem(res, new Problem(409, "in_flight", "held", { retry_after_ms: 5000 })));
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false });
  const err = await c.claim({ key: "k", tool: "t", payload: 1 }).catch((e) => e);
  assert.ok(err instanceof sdk.InFlightError);
  assert.equal(err.retryAfterMs, 5000);
  assert.equal(s.count(), 1);
});

test("429 Retry-After is waited out, past the retry count, on the same node", async (t) => {
  const times = [];
  const s = await serve((req, res, n) => {
    times.push(Date.now());
    if (n <= 6) {
      res.writeHead(429, { "content-type": "application/problem+json", "retry-after": "1" });
      return res.end(JSON.stringify({ title: "Too many", status: 429, code: "rate_limited", retry_after_ms: 30 }));
    }
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ key: "k", state: "executed", version: 3 }));
  });
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false, retries: 1 });
  const it = await c.get("k");
  assert.equal(it.state, "executed");
  assert.equal(s.count(), 7);
  for (let i = 1; i < times.length; i++) assert.ok(times[i] - times[i - 1] >= 25, `gap ${i}: ${times[i] - times[i - 1]} ms`);
  // bounded by rateLimitWaitMs
  const s2 = await serve((req, res) => sendProblem(res, new Problem(429, "rate_limited", "slow", { retry_after_ms: 20 })));
  t.after(() => s2.close());
  const c2 = fastClient([s2.url], { discovery: false, rateLimitWaitMs: 200 });
  const start = Date.now();
  await assert.rejects(c2.get("k"), sdk.RateLimitedError);
  assert.ok(Date.now() - start < 1000);
});

test("Retry-After of a 503 raises the backoff (capped at backoffMaxMs)", async (t) => {
  const times = [];
  const s = await serve((req, res, n) => {
    times.push(Date.now());
    if (n === 1) return sendProblem(res, new Problem(503, "no_leader", "e", { retry_after_ms: 150 }));
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ audit_retention: 5 }));
  });
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false, backoffMaxMs: 1000 });
  assert.deepEqual(await c.settings(), { auditRetention: 5 });
  assert.ok(times[1] - times[0] >= 140, `waited ${times[1] - times[0]} ms`);
});

test("network errors: unreachable node is UnavailableError; a write whose answer is lost is OutcomeUnknownError", async (t) => {
  const dead = await deadAddr();
  const c = fastClient([dead], { discovery: false, retries: 1 });
  const e1 = await c.claim({ key: "k", tool: "t", payload: 1 }).catch((e) => e);
  assert.ok(e1 instanceof sdk.UnavailableError, String(e1)); // connection refused: never sent
  assert.equal(e1.status, 0);
  const s = await serve((req) => req.socket.destroy()); // received, then dropped
  t.after(() => s.close());
  const c2 = fastClient([s.url], { discovery: false, retries: 1 });
  const e2 = await c2.claim({ key: "k", tool: "t", payload: 1 }).catch((e) => e);
  assert.ok(e2 instanceof sdk.OutcomeUnknownError, String(e2));
  assert.equal(s.count(), 2);
  const e3 = await c2.get("k").catch((e) => e);
  assert.ok(e3 instanceof sdk.UnavailableError && !(e3 instanceof sdk.OutcomeUnknownError), String(e3));
});

test("timeoutMs bounds each attempt", async (t) => {
  const s = await serve(() => {}); // never answers
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false, retries: 1, timeoutMs: 100 });
  const start = Date.now();
  const err = await c.commit({ key: "k", owner: "o" }).catch((e) => e);
  assert.ok(err instanceof sdk.OutcomeUnknownError, String(err));
  assert.match(err.message, /no answer within 100 ms/);
  assert.ok(Date.now() - start < 1500);
});

test("an aborted signal ends the call with its reason; a sent write ends OutcomeUnknownError", async (t) => {
  const s = await serve(() => {}); // never answers
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false });
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error("stop")), 50);
  const err = await c.get("k", { signal: ac.signal }).catch((e) => e);
  assert.equal(err.message, "stop");
  const ac2 = new AbortController();
  setTimeout(() => ac2.abort(), 50);
  const err2 = await c.claim({ key: "k", tool: "t", payload: 1 }, { signal: ac2.signal }).catch((e) => e);
  assert.ok(err2 instanceof sdk.OutcomeUnknownError, String(err2));
  assert.equal(err2.cause?.name, "AbortError");
  const ac3 = new AbortController();
  ac3.abort();
  const err3 = await c.claim({ key: "k", tool: "t", payload: 1 }, { signal: ac3.signal }).catch((e) => e);
  assert.equal(err3.name, "AbortError"); // nothing was sent
});

test("problem mapping: every code of client/errors.go to its class", async () => {
  const table = {
    in_flight: [sdk.InFlightError], in_doubt: [sdk.InDoubtError], divergent: [sdk.DivergentError], fenced: [sdk.FencedError],
    rejected: [sdk.RejectedError], pending_approval: [sdk.PendingApprovalError], not_found: [sdk.NotFoundError],
    policy_not_found: [sdk.NotFoundError], invalid_state: [sdk.InvalidStateError], not_pending_approval: [sdk.InvalidStateError],
    already_approved: [sdk.InvalidStateError], version_mismatch: [sdk.InvalidStateError], bad_request: [sdk.BadRequestError],
    too_large: [sdk.BadRequestError], unprocessable: [sdk.BadRequestError], unknown_policy: [sdk.BadRequestError],
    blocked: [sdk.BlockedError], token_used: [sdk.TokenUsedError], token_expired: [sdk.TokenExpiredError],
    token_invalid: [sdk.TokenInvalidError], token_mismatch: [sdk.TokenInvalidError], unauthenticated: [sdk.UnauthorizedError],
    // As client.VerifyToken's errors match them: ErrTokenWrongTool is also ErrTokenInvalid, ErrTokenToolForbidden
    // also ErrUnauthorized.
    token_wrong_tool: [sdk.TokenWrongToolError, sdk.TokenInvalidError],
    token_tool_forbidden: [sdk.TokenToolForbiddenError, sdk.ForbiddenError, sdk.UnauthorizedError],
    forbidden: [sdk.ForbiddenError, sdk.UnauthorizedError], not_an_approver: [sdk.ForbiddenError, sdk.UnauthorizedError],
    not_grant_holder: [sdk.NotGrantHolderError, sdk.ForbiddenError, sdk.UnauthorizedError],
    self_approval: [sdk.SelfApprovalError, sdk.ForbiddenError, sdk.UnauthorizedError],
    outcome_unknown: [sdk.OutcomeUnknownError], no_leader: [sdk.NoLeaderError, sdk.UnavailableError],
    not_leader: [sdk.NoLeaderError, sdk.UnavailableError], unavailable: [sdk.UnavailableError],
    shutting_down: [sdk.UnavailableError], not_ready: [sdk.UnavailableError], rate_limited: [sdk.RateLimitedError],
    namespace_rate_limited: [sdk.RateLimitedError], namespace_full: [sdk.NamespaceFullError], ledger_full: [sdk.LedgerFullError],
    bad_snapshot: [sdk.BadSnapshotError], not_empty: [sdk.NotEmptyError],
  };
  for (const [code, classes] of Object.entries(table)) {
    const e = sdk.problemFor({ status: 400, code });
    for (const cls of classes) assert.ok(e instanceof cls, `${code} is ${cls.name}`);
    assert.ok(e instanceof sdk.ProblemError && e instanceof sdk.IntentdError && e instanceof Error);
    assert.equal(e.name, classes[0].name);
  }
  const other = sdk.problemFor({ status: 429, code: "too_many_waiters" });
  assert.equal(other.constructor, sdk.ProblemError);
  assert.ok(!(sdk.problemFor({ status: 409, code: "in_doubt" }) instanceof sdk.InFlightError));
});

test("problem decoding as client/problem.go: documents, proxies, Retry-After", async (t) => {
  const cases = [
    { status: 403, ct: "application/problem+json", body: `{"type":"https://x/forbidden","title":"Forbidden","status":403,"code":"forbidden","detail":"role admin needed"}`,
      want: { status: 403, code: "forbidden", type: "https://x/forbidden", title: "Forbidden", detail: "role admin needed", retryAfterMs: 0 }, cls: sdk.UnauthorizedError },
    { status: 503, ct: "application/problem+json", body: `{"title":"No leader","status":503,"code":"no_leader","retry_after_ms":1500}`, ra: "7",
      want: { status: 503, code: "no_leader", title: "No leader", retryAfterMs: 1500 }, cls: sdk.NoLeaderError },
    { status: 401, ct: "application/problem+json", body: `{"type":"https://proxy/auth","title":"Login required","status":401,"detail":"no session"}`,
      want: { status: 401, code: "unauthenticated", type: "https://proxy/auth", title: "Login required", detail: "no session" }, cls: sdk.UnauthorizedError },
    { status: 502, ct: "text/plain", body: "upstream went away\n", ra: "3",
      want: { status: 502, code: "unavailable", title: "Bad Gateway", detail: "upstream went away", retryAfterMs: 3000 }, cls: sdk.UnavailableError },
    { status: 403, ct: "", body: "", want: { status: 403, code: "forbidden", title: "Forbidden" }, cls: sdk.UnauthorizedError },
  ];
  for (const tc of cases) {
    const s = await serve((req, res) => {
      const h = {};
      if (tc.ct) h["content-type"] = tc.ct;
      if (tc.ra) h["retry-after"] = tc.ra;
      res.writeHead(tc.status, h);
      res.end(tc.body);
    });
    const c = fastClient([s.url], { discovery: false, retries: 0 });
    const err = await c.settings().catch((e) => e);
    await s.close();
    assert.ok(err instanceof tc.cls, `${tc.body}: ${err}`);
    for (const [k, v] of Object.entries(tc.want)) assert.equal(err[k], v, `${tc.body}: ${k}`);
  }
});

test("a 502 to a write is outcome unknown; the intent of a problem is converted", async (t) => {
  const s = await serve((req, res, n) => {
    if (n === 1) {
      res.writeHead(502, { "content-type": "text/plain" });
      return res.end("bad gateway");
    }
    sendProblem(res, new Problem(409, "fenced", "stale", { intent: { key: "k", state: "executed", fencing_token: 9, lease_ms: 100, version: 12 } }));
  });
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false, retries: 0 });
  const e1 = await c.complete({ key: "k", owner: "o", fencingToken: 1, outcome: "executed" }).catch((e) => e);
  assert.ok(e1 instanceof sdk.OutcomeUnknownError);
  assert.equal(e1.status, 502);
  const e2 = await c.complete({ key: "k", owner: "o", fencingToken: 1, outcome: "executed" }).catch((e) => e);
  assert.ok(e2 instanceof sdk.FencedError);
  assert.equal(e2.intent.fencingToken, 9);
  assert.equal(e2.intent.leaseMs, 100);
  assert.equal(e2.intent.version, 12);
  assert.equal(JSON.parse(JSON.stringify(e2)).code, "fenced");
});

test("every request carries the API key; keys travel escaped as one path segment", async (t) => {
  const fc = await startCluster({ ids: ["a"] });
  t.after(() => fc.close());
  const c = fastClient([fc.url("a")], { apiKey: "ik_secret" });
  const k = "refund:ord/1 %é";
  await c.claim({ key: k, tool: "t", payload: 1 });
  const it = await c.get(k);
  assert.equal(it.key, k);
  assert.ok(fc.requests.length >= 3);
  for (const r of fc.requests) assert.equal(r.headers.authorization, "Bearer ik_secret");
  const get = fc.requests.find((r) => r.op === "get");
  assert.equal(get.key, k);
});

test("bad input is refused locally, before any request", async () => {
  let fetched = 0;
  const c = new Client({ addrs: "127.0.0.1:1", fetch: async () => (fetched++, new Response("{}")) });
  const cyclic = {};
  cyclic.self = cyclic;
  for (const [what, p] of [
    ["BigInt", () => c.claim({ key: "k", tool: "t", payload: { n: 10n } })],
    ["cycle", () => c.claim({ key: "k", tool: "t", payload: cyclic })],
    ["undefined", () => c.claim({ key: "k", tool: "t", payload: undefined })],
    ["NaN", () => c.claim({ key: "k", tool: "t", payload: { x: NaN } })],
    ["2^53", () => c.claim({ key: "k", tool: "t", payload: { id: 2 ** 53 } })],
    ["empty key", () => c.claim({ key: "", tool: "t", payload: 1 })],
    ["lone surrogate", () => c.get("\ud800")],
    ["long wait", () => c.get("k", { waitMs: 61_000 })],
    ["result", () => c.complete({ key: "k", owner: "o", fencingToken: 1, outcome: "executed", result: 1n })],
    ["policy", () => c.putPolicy({ name: "" })],
  ]) {
    const err = await p().catch((e) => e);
    assert.ok(err instanceof sdk.BadRequestError, `${what}: ${err}`);
    assert.equal(err.status, 0);
  }
  assert.equal(fetched, 0);
});

test("addresses: host:port, URLs, comma lists; bad ones refused", () => {
  const c = new Client({ addrs: ["127.0.0.1:1, http://h:2/", "https://h:3"] });
  assert.deepEqual(c.addrs(), ["http://127.0.0.1:1", "http://h:2", "https://h:3"]);
  assert.throws(() => new Client({ addrs: [] }), sdk.IntentdError);
  assert.throws(() => new Client({ addrs: "ftp://h:1" }), sdk.IntentdError);
  assert.throws(() => new Client({ addrs: "http://h:1/?q" }), sdk.IntentdError);
});

test("API calls map the wire to camelCase: list, audit, policies, verifyToken, cluster", async (t) => {
  const s = await serve((req, res) => {
    const u = new URL(req.url, "http://x");
    const json = (v) => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(v));
    };
    if (u.pathname === "/v1/intents") {
      assert.equal(u.searchParams.get("state"), "pending_approval");
      return json({ intents: [{ key: "a", state: "pending_approval", approvals_required: 2, policy_version: 4 }], next_cursor: "c1" });
    }
    if (u.pathname === "/v1/intents/a/audit") {
      return json({ key: "a", namespace: "n", dropped: 1, events: [{ index: 3, op: "claim", status: "granted", state: "declared", fencing_token: 3 }] });
    }
    if (u.pathname === "/v1/policies/p" && req.method === "PUT") {
      const b = JSON.parse(req.rawBody);
      assert.deepEqual(b, { name: "p", tools: ["x.*"], require_approval: true, approvals_required: 1, approvers: ["bob"], expect_version: 7 });
      return json({ status: "ok", policy: { ...b, version: 9 } });
    }
    if (u.pathname === "/v1/policies") return json({ policies: [{ name: "default" }, { name: "p", token_ttl_ms: 5 }] });
    if (u.pathname === "/v1/tokens/verify") {
      const b = JSON.parse(req.rawBody);
      if (b.tool === "email.send") {
        // The token is for payments.refund: refused, not spent.
        return sendProblem(res, new Problem(422, "token_wrong_tool", 'the token is for tool "payments.refund", not "email.send"'));
      }
      if (b.tool === "payments.refund") {
        assert.deepEqual(b, { execution_token: "gex_1", tool: "payments.refund" });
      } else {
        assert.deepEqual(b, { execution_token: "gex_1", payload: { a: 1 } });
      }
      return json({ status: "ok", valid: true, claims: { aud: "payments.refund", ns: "n", key: "a", fp: "f", fence: 9, owner: "o", iat: 1, exp: 2 } });
    }
    if (u.pathname === "/v1/cluster") {
      return json({ node_id: "n1", leader_id: "n1", leader_http: "x:1", term: 2, ready: true, nodes: [{ id: "n1", raft_addr: "r", http_addr: "x:1", gossip: "alive", leader: true }] });
    }
    sendProblem(res, new Problem(404, "no_route", u.pathname));
  });
  t.after(() => s.close());
  const c = fastClient([s.url], { discovery: false, retries: 0 });
  const page = await c.approvals();
  assert.equal(page.nextCursor, "c1");
  assert.equal(page.intents[0].approvalsRequired, 2);
  assert.equal(page.intents[0].policyVersion, 4);
  const trail = await c.audit("a");
  assert.equal(trail.dropped, 1);
  assert.equal(trail.events[0].fencingToken, 3);
  const p = await c.putPolicy({ name: "p", tools: ["x.*"], requireApproval: true, approvalsRequired: 1, approvers: ["bob"] }, { expectVersion: 7 });
  assert.equal(p.version, 9);
  assert.equal(p.requireApproval, true);
  const list = await c.listPolicies();
  assert.equal(list[1].tokenTtlMs, 5);
  const v = await c.verifyToken("gex_1", { payload: { a: 1 } });
  assert.deepEqual(v.claims, { tool: "payments.refund", namespace: "n", key: "a", fingerprint: "f", fencingToken: 9, owner: "o", issuedAt: 1, expires: 2 });
  await assert.rejects(c.verifyToken("gex_1", { payload: { a: 1 }, tool: "email.send" }),
    (e) => e instanceof sdk.TokenWrongToolError && e instanceof sdk.TokenInvalidError && e.status === 422 &&
      e.code === "token_wrong_tool" && e.detail.includes('"payments.refund"'));
  const right = await c.verifyToken("gex_1", { tool: "payments.refund" });
  assert.equal(right.claims.tool, "payments.refund");
  const st = await c.cluster();
  assert.equal(st.leaderId, "n1");
  assert.equal(st.nodes[0].httpAddr, "x:1");
  await assert.rejects(c.deletePolicy("nope"), (e) => e instanceof sdk.ProblemError && e.code === "no_route");
});

test("get long-polls with wait and after_version", async (t) => {
  const fc = await startCluster({ ids: ["a"] });
  t.after(() => fc.close());
  const c = fastClient([fc.url("a")]);
  const g = await c.claim({ key: "k", tool: "t", payload: 1 });
  const v = g.intent.version;
  const start = Date.now();
  const waiting = c.get("k", { waitMs: 5000, afterVersion: v });
  setTimeout(() => c.complete({ key: "k", owner: g.owner, fencingToken: g.fencingToken, outcome: "executed", result: { ok: 1 } }), 100);
  const it = await waiting;
  assert.equal(it.state, "executed");
  assert.deepEqual(it.result, { ok: 1 });
  assert.ok(Date.now() - start >= 90);
  const q = fc.requests.find((r) => r.op === "wait");
  assert.ok(q);
  const quick = await c.wait("k", 0, 1000);
  assert.equal(quick.state, "executed");
});
