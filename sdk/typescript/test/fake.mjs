// A fake intentd for the unit tests: an in-memory ledger with the claim /
// complete / renew / commit / approve / reject / get (long-poll) semantics
// the SDK relies on, served by one or more node:http servers ("nodes") of a
// fake cluster whose leader a test chooses. A node that does not lead
// answers 503 not_leader to everything but GET /v1/cluster, as a node that
// could not forward would. Tests inject failures with node hooks.

import http from "node:http";

const PROBLEM_BASE = "https://github.com/intentledger/intentd/blob/main/docs/problems.md#";

/** canonical JSON (sorted keys) for the fingerprint. */
function canonical(v) {
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  if (v && typeof v === "object") {
    return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
  }
  return JSON.stringify(v ?? null);
}

export class Problem {
  constructor(status, code, detail = "", extra = {}) {
    Object.assign(this, { status, code, detail, extra });
  }
}

export class FakeLedger {
  constructor({ approvalTools = [], now = () => Date.now() } = {}) {
    this.intents = new Map();
    this.index = 0;
    this.approvalTools = approvalTools;
    this.now = now;
    this.waiters = new Set();
    this.ops = []; // every applied op, for assertions
  }

  next() {
    return ++this.index;
  }

  changed(intent) {
    intent.version = this.next();
    intent.updated_at = new Date(this.now()).toISOString();
    for (const w of [...this.waiters]) w(intent.key);
  }

  expire(intent) {
    if (intent && intent.state === "declared" && this.now() > intent._deadline) {
      intent.state = "in_doubt";
      delete intent.lease_deadline;
      this.changed(intent);
    }
  }

  view(intent) {
    const out = {};
    for (const [k, v] of Object.entries(intent)) if (!k.startsWith("_")) out[k] = v;
    return out;
  }

  problem(status, code, detail, intent, extra = {}) {
    return new Problem(status, code, detail, { ...(intent ? { intent: this.view(intent) } : {}), ...extra });
  }

  claim(b) {
    this.ops.push({ op: "claim", owner: b.owner, key: b.key });
    if (!b.key) throw new Problem(400, "bad_request", "key: is required");
    if (!b.tool) throw new Problem(400, "bad_request", "tool: is required");
    const fp = canonical({ tool: b.tool, payload: b.payload });
    let it = this.intents.get(b.key);
    this.expire(it);
    const lease = b.lease_ms || 30000;
    const grant = (created) => {
      it.state = "declared";
      it.owner = b.owner;
      it.fencing_token = this.next();
      it.generation = (it.generation || 0) + 1;
      it.lease_ms = lease;
      it._deadline = this.now() + lease;
      it.lease_deadline = new Date(it._deadline).toISOString();
      delete it.result;
      this.changed(it);
      return [created ? 201 : 200, { status: "granted", fencing_token: it.fencing_token, execution_token: "gex_" + it.fencing_token, intent: this.view(it) }];
    };
    if (!it) {
      it = {
        key: b.key, namespace: "default", tool: b.tool, state: "declared", fingerprint: fp, payload: b.payload,
        fencing_token: 0, generation: 0, created_at: new Date(this.now()).toISOString(), duplicates: 0, divergent: 0, version: 0,
      };
      this.intents.set(b.key, it);
      if (this.approvalTools.includes(b.tool)) {
        it.state = "pending_approval";
        it.approvals_required = 1;
        this.changed(it);
        return [202, { status: "pending_approval", intent: this.view(it) }];
      }
      return grant(true);
    }
    if (it.fingerprint !== fp) {
      it.divergent++;
      throw this.problem(422, "divergent", "fingerprint differs", it, { fingerprint: it.fingerprint, request_fingerprint: fp });
    }
    switch (it.state) {
      case "pending_approval":
        return [202, { status: "pending_approval", intent: this.view(it) }];
      case "approved":
        return grant(true);
      case "rejected":
        throw this.problem(403, "rejected", "rejected", it);
      case "failed":
        return grant(true);
      case "in_doubt":
        throw this.problem(409, "in_doubt", "lease passed", it);
      case "executed":
      case "committed":
        it.duplicates++;
        return [200, { status: "duplicate", intent: this.view(it) }];
      case "declared":
        if (it.owner === b.owner) {
          return [200, { status: "granted", fencing_token: it.fencing_token, execution_token: "gex_" + it.fencing_token, intent: this.view(it) }];
        }
        throw this.problem(409, "in_flight", `owner ${JSON.stringify(it.owner)} holds the lease`, it, {
          retry_after_ms: Math.max(1, it._deadline - this.now()),
        });
    }
    throw new Problem(500, "internal", "unknown state");
  }

  held(key, b) {
    const it = this.intents.get(key);
    if (!it) throw new Problem(404, "not_found", "no intent");
    this.expire(it);
    if (it.owner !== b.owner || it.fencing_token !== b.fencing_token) throw this.problem(409, "fenced", "stale", it);
    return it;
  }

  complete(key, b) {
    this.ops.push({ op: "complete", owner: b.owner, key, outcome: b.outcome, result: b.result });
    const it = this.intents.get(key);
    if (!it) throw new Problem(404, "not_found", "no intent");
    this.expire(it);
    if (it.owner !== b.owner || it.fencing_token !== b.fencing_token) throw this.problem(409, "fenced", "stale", it);
    if (it.state === b.outcome || (it.state === "committed" && b.outcome === "executed")) {
      return [200, { status: "ok", intent: this.view(it) }];
    }
    if (it.state !== "declared" && it.state !== "in_doubt") throw this.problem(409, "invalid_state", "state " + it.state, it);
    it.state = b.outcome;
    if (b.result !== undefined) it.result = b.result;
    delete it.lease_deadline;
    this.changed(it);
    return [200, { status: "ok", intent: this.view(it) }];
  }

  renew(key, b) {
    this.ops.push({ op: "renew", owner: b.owner, key });
    const it = this.held(key, b);
    if (it.state === "in_doubt") throw this.problem(409, "in_doubt", "lease passed", it);
    if (it.state !== "declared") throw this.problem(409, "invalid_state", "state " + it.state, it);
    it._deadline = this.now() + b.lease_ms;
    it.lease_deadline = new Date(it._deadline).toISOString();
    this.changed(it);
    return [200, { status: "ok", intent: this.view(it) }];
  }

  commit(key, b) {
    this.ops.push({ op: "commit", owner: b.owner, key });
    const it = this.intents.get(key);
    if (!it) throw new Problem(404, "not_found", "no intent");
    if (it.owner !== b.owner) throw this.problem(409, "fenced", "stale", it);
    if (it.state === "committed") return [200, { status: "ok", intent: this.view(it) }];
    if (it.state !== "executed") throw this.problem(409, "invalid_state", "state " + it.state, it);
    it.state = "committed";
    this.changed(it);
    return [200, { status: "ok", intent: this.view(it) }];
  }

  decide(key, b, approve) {
    this.ops.push({ op: approve ? "approve" : "reject", key });
    const it = this.intents.get(key);
    if (!it) throw new Problem(404, "not_found", "no intent");
    if (it.state !== "pending_approval") throw this.problem(409, "not_pending_approval", "state " + it.state, it);
    it.state = approve ? "approved" : "rejected";
    it.approvals = [{ actor: b.actor || "approver", at: new Date(this.now()).toISOString() }];
    this.changed(it);
    return [200, { status: "ok", intent: this.view(it) }];
  }

  get(key) {
    const it = this.intents.get(key);
    if (!it) throw new Problem(404, "not_found", "no intent under this key");
    this.expire(it);
    return [200, this.view(it)];
  }

  /** waitFor resolves when key's version passes after, or after ms. */
  waitFor(key, after, ms) {
    return new Promise((resolve) => {
      const done = () => {
        this.waiters.delete(w);
        clearTimeout(t);
        clearInterval(poll);
        resolve();
      };
      const check = () => {
        const it = this.intents.get(key);
        this.expire(it);
        return it && it.version > after;
      };
      const w = (k) => {
        if (k === key && check()) done();
      };
      if (check()) return resolve();
      this.waiters.add(w);
      const t = setTimeout(done, ms);
      // the lease passing is a change too (the real ledger applies expiries)
      const poll = setInterval(() => {
        if (check()) done();
      }, 20);
    });
  }
}

function send(res, status, body, headers = {}) {
  const text = body === undefined ? "" : JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(text);
}

export function sendProblem(res, p) {
  const headers = { "content-type": "application/problem+json" };
  const ra = p.extra?.retry_after_ms ?? (p.status === 503 || p.status === 429 ? 1000 : 0);
  if (ra) headers["retry-after"] = String(Math.max(1, Math.ceil(ra / 1000)));
  res.writeHead(p.status, headers);
  res.end(JSON.stringify({ type: PROBLEM_BASE + p.code, title: "t " + p.code, status: p.status, detail: p.detail, code: p.code, ...p.extra }));
}

/** parse the escaped path of an intent call. */
function route(url) {
  const u = new URL(url, "http://x");
  const m = /^\/v1\/intents\/([^/]+)(?:\/([a-z]+))?$/.exec(u.pathname);
  return { u, key: m ? decodeURIComponent(m[1]) : undefined, action: m ? m[2] : undefined };
}

/**
 * FakeCluster: nodes sharing one ledger. hooks(nodeId, req, body) may answer
 * first: return true when it wrote the response itself, or an object
 * {after: (status, body) => boolean} ... kept simple: see handle().
 */
export class FakeCluster {
  constructor({ ids = ["a"], leader = ids[0], ledger = new FakeLedger() } = {}) {
    this.ids = ids;
    this.leader = leader;
    this.ledger = ledger;
    this.nodes = new Map();
    this.requests = []; // {node, method, path, op, headers, body}
    this.hook = null; // async (ctx) => boolean (true: answered)
  }

  async start() {
    for (const id of this.ids) {
      const server = http.createServer((req, res) => this.handle(id, req, res));
      const sockets = new Set();
      server.on("connection", (s) => {
        sockets.add(s);
        s.on("close", () => sockets.delete(s));
      });
      await new Promise((r) => server.listen(0, "127.0.0.1", r));
      const { port } = server.address();
      this.nodes.set(id, { id, server, sockets, url: `http://127.0.0.1:${port}` });
    }
    return this;
  }

  url(id) {
    return this.nodes.get(id).url;
  }

  urls() {
    return this.ids.map((id) => this.url(id));
  }

  count(node, op) {
    return this.requests.filter((r) => (node === undefined || r.node === node) && (op === undefined || r.op === op)).length;
  }

  async close() {
    for (const n of this.nodes.values()) {
      for (const s of n.sockets) s.destroy();
      await new Promise((r) => n.server.close(r));
    }
  }

  async handle(id, req, res) {
    let raw = "";
    for await (const chunk of req) raw += chunk;
    let body;
    try {
      body = raw ? JSON.parse(raw) : undefined;
    } catch {
      return sendProblem(res, new Problem(400, "bad_request", "not JSON"));
    }
    const { u, key, action } = route(req.url);
    let op = "other";
    if (u.pathname === "/v1/cluster") op = "cluster";
    else if (u.pathname === "/v1/intents" && req.method === "POST") op = "claim";
    else if (key !== undefined && action) op = action;
    else if (key !== undefined && req.method === "GET") op = u.searchParams.has("wait") ? "wait" : "get";
    const ctx = { node: id, method: req.method, path: u.pathname, query: u.searchParams, op, key, headers: req.headers, body, req, res };
    this.requests.push({ node: id, method: req.method, path: u.pathname, op, headers: req.headers, body, key });
    if (this.hook && (await this.hook(ctx))) return;
    if (op === "cluster") return send(res, 200, this.status(id));
    if (this.leader && id !== this.leader) {
      return sendProblem(res, new Problem(503, "not_leader", "not the leader"));
    }
    try {
      const [status, out] = await this.apply(ctx);
      send(res, status, out);
    } catch (e) {
      if (e instanceof Problem) return sendProblem(res, e);
      sendProblem(res, new Problem(500, "internal", String(e)));
    }
  }

  /** apply runs the call on the ledger and returns [status, body]. */
  async apply(ctx) {
    const L = this.ledger;
    const { op, key, body, query } = ctx;
    switch (op) {
      case "claim":
        return L.claim(body);
      case "complete":
        return L.complete(key, body);
      case "renew":
        return L.renew(key, body);
      case "commit":
        return L.commit(key, body);
      case "approve":
        return L.decide(key, body, true);
      case "reject":
        return L.decide(key, body, false);
      case "wait": {
        const ms = parseInt(query.get("wait"), 10);
        await L.waitFor(key, Number(query.get("after_version") || 0), ms);
        return L.get(key);
      }
      case "get":
        return L.get(key);
    }
    if (ctx.path === "/v1/intents" && ctx.method === "GET") {
      const state = query.get("state");
      const intents = [...L.intents.values()].filter((i) => !state || i.state === state).map((i) => L.view(i));
      return [200, { intents, next_cursor: "" }];
    }
    throw new Problem(404, "no_route", "no such endpoint");
  }

  status(id) {
    const st = { node_id: id, state: id === this.leader ? "leader" : "follower", leader_id: this.leader || "", ready: !!this.leader, nodes: [] };
    for (const nid of this.ids) {
      const addr = this.url(nid).replace("http://", "");
      if (nid === this.leader) st.leader_http = addr;
      st.nodes.push({ id: nid, raft_addr: "r-" + nid, http_addr: addr, gossip: "alive", leader: nid === this.leader });
    }
    return st;
  }
}

export async function startCluster(opts) {
  return new FakeCluster(opts).start();
}

export { send, canonical };
