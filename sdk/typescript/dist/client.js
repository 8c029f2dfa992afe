// The client: the transport that drives the core. It sends (fetch or
// node:net, transport.ts and node.ts), ends what the caller's AbortSignal
// ends, sleeps, runs one discovery at a time, runs fn under a grant while
// timers renew its lease, and holds every call of the API table. What an
// answer means, when to retry, which node to ask and what do() records are
// decided without I/O in core.ts and flow.ts (client/do.go's contract).
import { IntentdError, NoLeaderError, ProblemError, badRequest, isEffectUnknown } from "./errors.js";
import { key as makeKey, validateKey } from "./keys.js";
import { Core, answered, claimBody, getRequest, grantLost, intentPath, jsonBody, leaseFor, needKey, noAnswer, noTransport, nonNegative, normalizeAddr, optionalJSON, positive, requestPath, } from "./core.js";
import { call, claimCall, discover, drive, duplicate, intentCall, record, settle } from "./flow.js";
import { auditLogPageFromWire, auditTrailFromWire, clusterStatusFromWire, intentFromWire, listPageFromWire, policyFromWire, policyToWire, tokenVerificationFromWire, } from "./types.js";
import { nodeSender, onNode } from "./node.js";
import { fetchSender, isTimeout } from "./transport.js";
import { encodeJSON, errorMessage, linkSignals, newOwner, sleep } from "./util.js";
export { DEFAULTS, MAX_LONG_POLL_MS, normalizeAddr } from "./core.js";
/**
 * Client talks to an intentd cluster. Any node answers any call; with
 * discovery (the default) the client asks the configured nodes for GET
 * /v1/cluster on its first call and sends every call to the leader first,
 * then to the other nodes; it asks again after an answer that says the node
 * could not serve. Every ledger write is idempotent when repeated with the
 * same key, owner, payload and fencing token, so the client retries writes
 * and reads the cluster could not answer (503, network errors, a lost
 * answer), with exponential backoff and jitter raised to Retry-After, and
 * waits 429s out; it never retries a definite answer. Refusals are thrown
 * as ProblemError subclasses (InFlightError, DivergentError, ...).
 */
export class Client {
    /** The settings, the route and every decision (core.ts, flow.ts); this class performs their steps. */
    core;
    /** The transport once chosen; until then, sending waits for senderReady. */
    sender;
    senderReady;
    /** The headers of every request, and of a request with a body. */
    headers;
    bodyHeaders;
    traceInject;
    // An ES private field: util.inspect and console.log do not show it.
    #apiKey;
    ownerPrefix;
    userAgent;
    /** The discovery under way, which concurrent calls wait for. */
    discovering;
    constructor(options) {
        if (!options || options.addrs === undefined)
            throw new IntentdError("intentd: no server address");
        const list = typeof options.addrs === "string" ? [options.addrs] : [...options.addrs];
        const seeds = [];
        for (const a of list) {
            for (const part of String(a).split(",")) {
                if (part.trim() !== "")
                    seeds.push(normalizeAddr(part));
            }
        }
        if (seeds.length === 0)
            throw new IntentdError("intentd: no server address");
        this.core = new Core(seeds, options);
        this.#apiKey = options.apiKey ?? "";
        this.ownerPrefix = options.ownerPrefix || "intentd-ts";
        this.userAgent = options.userAgent ?? "intentd-ts/0.1";
        for (const [what, v] of [["apiKey", this.#apiKey], ["userAgent", this.userAgent]]) {
            // Refused here rather than by every request (fetch and node:net alike).
            if (/[^\t\x20-\x7e]/.test(v))
                throw new IntentdError(`intentd: ${what} must be printable ASCII (it is sent as an HTTP header)`);
        }
        const headers = { accept: "application/json, application/problem+json" };
        if (this.userAgent)
            headers["user-agent"] = this.userAgent;
        if (this.#apiKey)
            headers.authorization = `Bearer ${this.#apiKey}`;
        this.headers = Object.freeze(headers);
        this.traceInject = options.traceInject;
        this.bodyHeaders = Object.freeze({ ...headers, "content-type": "application/json" });
        const transport = options.transport ?? "auto";
        if (transport !== "auto" && transport !== "fetch" && transport !== "node") {
            throw new IntentdError(`intentd: transport ${JSON.stringify(transport)}: want "auto", "fetch" or "node"`);
        }
        if (transport === "node" && options.fetch)
            throw new IntentdError('intentd: transport "node" does not use options.fetch');
        if (transport === "node" && !onNode())
            throw new IntentdError('intentd: transport "node" needs Node (use "auto" or "fetch")');
        const f = options.fetch ?? globalThis.fetch;
        const viaFetch = options.fetch
            ? fetchSender(options.fetch)
            : typeof f === "function" ? fetchSender((input, init) => globalThis.fetch(input, init)) : undefined;
        if (transport === "node" || (transport === "auto" && !options.fetch && onNode())) {
            // node:net loads asynchronously; the first call waits for it.
            this.senderReady = nodeSender().then((send) => (this.sender = send), (err) => {
                if (transport === "node" || !viaFetch) {
                    throw new IntentdError(`intentd: cannot load the node transport: ${errorMessage(err)}`, { cause: err });
                }
                return (this.sender = viaFetch);
            });
            // Not an unhandled rejection if no call is ever made; each call sees the error.
            this.senderReady.catch(() => { });
        }
        else {
            if (!viaFetch)
                throw new IntentdError("intentd: no fetch in this runtime: pass options.fetch");
            this.sender = viaFetch;
        }
    }
    /** The configured addresses, normalized. */
    addrs() {
        return [...this.core.seeds];
    }
    /** The addresses in the order the next call tries them: the one that answered last first (the leader, once discovered). */
    endpoints() {
        return this.core.endpoints();
    }
    /** The leader's HTTP address as last discovered, or "" when no discovery has named one. */
    leader() {
        return this.core.route.leader;
    }
    /** A fresh owner name for one execution attempt ("prefix/instance/random"). */
    newOwner() {
        return newOwner(this.ownerPrefix);
    }
    // ---------------------------------------------------------------- routing
    /** Asks the nodes for the cluster's status now and puts the leader first; returns the leader's address. */
    async discover(options = {}) {
        const rt = await this.rediscover(this.core.route, options.signal);
        if (!rt.leader) {
            throw new NoLeaderError({
                status: 0, code: "no_leader", title: "No leader", detail: "discovery: no node named a leader",
            });
        }
        return rt.leader;
    }
    /**
     * rediscover replaces seen by a freshly discovered route (flow.ts's
     * discover), unless another call already replaced it. One discovery runs
     * at a time; concurrent callers wait for it, each within its own signal.
     * A failed discovery still yields a new route (the same order), so a
     * failing cluster is asked at most once per failed attempt.
     */
    async rediscover(seen, signal) {
        for (;;) {
            if (this.core.route !== seen)
                return this.core.route;
            if (this.discovering) {
                try {
                    await raceSignal(this.discovering, signal);
                }
                catch {
                    return this.core.route;
                }
                continue;
            }
            // Without the caller's signal: the discovery goes on for the others.
            this.discovering = this.run(discover(this.core, seen), undefined).then((next) => {
                this.core.route = next;
                this.discovering = undefined;
            });
            try {
                await raceSignal(this.discovering, signal);
            }
            catch {
                // the caller stopped waiting; the discovery goes on for the others
            }
            return this.core.route;
        }
    }
    // ------------------------------------------------------------- transport
    /** run drives flow, performing its steps within signal. */
    run(flow, signal) {
        return drive(flow, (step) => this.perform(step, signal));
    }
    /** perform does one step of a flow: the I/O, the waits and the signals. */
    perform(step, signal) {
        switch (step.kind) {
            case "attempt":
                return this.attempt(step.base, step.req, signal);
            case "pause":
                return sleep(step.ms, signal);
            case "refresh":
                return this.rediscover(step.seen, signal);
            case "poll":
                return this.poll(step, signal);
        }
    }
    /**
     * request performs a call (flow.ts's call: routes, retries, backoff) and
     * returns the HTTP status and the decoded 2xx answer.
     */
    request(r, signal) {
        return this.run(call(this.core, r, signal), signal);
    }
    /** withTrace adds the trace context traceInject writes to headers (headers as they are without one). */
    withTrace(headers) {
        if (!this.traceInject)
            return headers;
        const carrier = {};
        try {
            this.traceInject(carrier);
        }
        catch {
            return headers; // a broken hook costs the trace, never the call
        }
        const tp = carrier.traceparent;
        if (typeof tp !== "string" || !validTraceparent(tp))
            return headers;
        const out = { ...headers, traceparent: tp };
        const ts = carrier.tracestate;
        if (typeof ts === "string" && ts !== "" && ts.length <= 512 && !/[^\x20-\x7e]/.test(ts))
            out.tracestate = ts;
        return out;
    }
    /** attempt sends the call to one node, once; core.ts says what came of it. */
    async attempt(base, r, signal) {
        const path = requestPath(r);
        const timeoutMs = r.timeoutMs ?? this.core.timeoutMs;
        let send = this.sender;
        if (!send) {
            try {
                send = await this.senderReady;
            }
            catch (e) {
                // transport "node" where node:net cannot be loaded: nothing was sent.
                return noTransport(e);
            }
        }
        let answer;
        try {
            answer = await send({
                method: r.method, base, path, headers: this.withTrace(r.body === undefined ? this.headers : this.bodyHeaders), body: r.body, signal, timeoutMs,
            });
        }
        catch (e) {
            const byCaller = !!signal?.aborted;
            return noAnswer(r, base, path, timeoutMs, e, {
                byCaller, timedOut: !byCaller && isTimeout(e), cause: byCaller ? signal?.reason : e,
            });
        }
        return answered(r, base, path, answer, !!signal?.aborted);
    }
    /** poll long-polls one intent, the whole call bounded by step.boundMs and signal. */
    async poll(step, signal) {
        const bounded = linkSignals([signal], step.boundMs);
        try {
            const intent = await this.getWith(step.key, { waitMs: step.waitMs, afterVersion: step.afterVersion, signal: bounded.signal }, 0);
            return { ok: true, intent };
        }
        catch (err) {
            return { ok: false, err, timedOut: bounded.timedOut() };
        }
        finally {
            bounded.dispose();
        }
    }
    // ------------------------------------------------------------- intents
    /**
     * claim asks for the right to execute the effect named by req.key. A grant
     * (new: created, or repeated to the same owner), a duplicate (the effect
     * already ran: use intent.result) and pending_approval are answers; every
     * refusal is thrown (InFlightError, InDoubtError, DivergentError,
     * RejectedError, BadRequestError, ...). The claim is retried with the same
     * owner, so a lost answer comes back as the same grant.
     */
    async claim(req, options = {}) {
        needKey(req.key);
        const owner = req.owner || this.newOwner();
        const body = claimBody({
            key: req.key, tool: req.tool, payload: encodeJSON(req.payload, "payload"), owner, policy: req.policy, leaseMs: req.leaseMs,
        });
        return this.run(claimCall(this.core, body, owner, options.signal), options.signal);
    }
    /** complete reports the outcome of the effect by its owner and fencing token; a stale one is refused with FencedError. */
    async complete(req, options = {}) {
        return this.intentCall(req.key, "complete", jsonBody({
            owner: req.owner,
            fencing_token: req.fencingToken,
            outcome: req.outcome,
            result: optionalJSON(req.result, "result"),
        }), options.signal);
    }
    /** renew extends the owner's lease while a long effect runs. */
    async renew(req, options = {}) {
        return this.intentCall(req.key, "renew", jsonBody({
            owner: req.owner, fencing_token: req.fencingToken, lease_ms: Math.round(req.leaseMs),
        }), options.signal);
    }
    /** commit acknowledges an executed intent's result (executed -> committed). */
    async commit(req, options = {}) {
        return this.intentCall(req.key, "commit", jsonBody({ owner: req.owner }), options.signal);
    }
    /** resolve settles an in_doubt intent as executed or failed, after someone checked the tool's side. */
    async resolve(req, options = {}) {
        return this.intentCall(req.key, "resolve", jsonBody({
            outcome: req.outcome, result: optionalJSON(req.result, "result"), actor: req.actor, reason: req.reason || undefined,
        }), options.signal);
    }
    /** approve approves a pending intent (role approver). */
    async approve(req, options = {}) {
        return this.intentCall(req.key, "approve", jsonBody({
            actor: req.actor || undefined, reason: req.reason || undefined, fingerprint: req.fingerprint || undefined,
        }), options.signal);
    }
    /** reject rejects a pending intent (role approver). */
    async reject(req, options = {}) {
        return this.intentCall(req.key, "reject", jsonBody({
            actor: req.actor || undefined, reason: req.reason || undefined, fingerprint: req.fingerprint || undefined,
        }), options.signal);
    }
    intentCall(key, action, body, signal) {
        return this.run(intentCall(this.core, key, action, body, signal), signal);
    }
    /**
     * get reads one intent, linearizable unless stale; NotFoundError when there
     * is none. With waitMs it long-polls: it answers as soon as the intent's
     * version is above afterVersion, or after waitMs with the intent as it is.
     */
    async get(key, options = {}) {
        return this.getWith(key, options);
    }
    async getWith(key, options, rateLimitWaitMs) {
        const { data } = await this.request(getRequest(key, options, this.core.timeoutMs, rateLimitWaitMs), options.signal);
        return intentFromWire(data);
    }
    /** wait long-polls one intent (get with waitMs and afterVersion). */
    async wait(key, afterVersion, waitMs, options = {}) {
        return this.get(key, { waitMs, afterVersion, signal: options.signal });
    }
    /** list reads a page of intents in key order. */
    async list(options = {}) {
        const q = new URLSearchParams();
        if (options.state)
            q.set("state", options.state);
        if (options.prefix)
            q.set("prefix", options.prefix);
        if (options.limit)
            q.set("limit", String(options.limit));
        if (options.cursor)
            q.set("cursor", options.cursor);
        if (options.stale)
            q.set("consistency", "stale");
        const { data } = await this.request({ method: "GET", path: "/v1/intents", query: q }, options.signal);
        return listPageFromWire(data);
    }
    /** approvals reads a page of the pending_approval queue. */
    async approvals(options = {}) {
        return this.list({ ...options, state: "pending_approval" });
    }
    /** audit reads every recorded attempt on key. */
    async audit(key, options = {}) {
        needKey(key);
        const { data } = await this.request({ method: "GET", path: intentPath(key, "audit") }, options.signal);
        return auditTrailFromWire(data);
    }
    // ------------------------------------------------------------- the gate
    /**
     * verifyToken asks the ledger whether the tool may act on an execution
     * token (role tool): signature, expiry, the token's tool (`tool`: the
     * tool about to act; and the API key's tools), the binding to payload
     * (or fingerprint; neither: not checked) and to the current grant, and
     * single use. A token for another tool throws TokenWrongToolError, one
     * for a tool outside the key's tools TokenToolForbiddenError; neither
     * spends it. A valid answer spends the token (claims.tool names its
     * tool); any later one throws TokenUsedError. An OutcomeUnknownError may
     * have spent it: do not act.
     */
    async verifyToken(executionToken, options = {}) {
        const body = jsonBody({
            execution_token: executionToken,
            payload: optionalJSON(options.payload, "payload"),
            fingerprint: options.fingerprint || undefined,
            tool: options.tool || undefined,
        });
        const { data } = await this.request({ method: "POST", path: "/v1/tokens/verify", body }, options.signal);
        return tokenVerificationFromWire(data);
    }
    /** putPolicy creates or replaces a policy (admin); expectVersion makes it a compare-and-set (InvalidStateError). */
    async putPolicy(policy, options = {}) {
        if (!policy || !policy.name)
            throw badRequest("policy name is required", "name");
        const { data } = await this.request({
            method: "PUT", path: "/v1/policies/" + encodeURIComponent(policy.name),
            body: JSON.stringify(policyToWire(policy, options.expectVersion)),
        }, options.signal);
        return policyFromWire(data?.policy);
    }
    /** getPolicy reads one policy; NotFoundError when there is none. */
    async getPolicy(name, options = {}) {
        if (!name)
            throw badRequest("policy name is required", "name");
        const { data } = await this.request({ method: "GET", path: "/v1/policies/" + encodeURIComponent(name) }, options.signal);
        return policyFromWire(data?.policy);
    }
    /** listPolicies reads every policy: the default first, then in matching order. */
    async listPolicies(options = {}) {
        const { data } = await this.request({ method: "GET", path: "/v1/policies" }, options.signal);
        const list = data?.policies;
        return Array.isArray(list) ? list.map(policyFromWire) : [];
    }
    /** deletePolicy removes a policy (admin). */
    async deletePolicy(name, options = {}) {
        if (!name)
            throw badRequest("policy name is required", "name");
        await this.request({ method: "DELETE", path: "/v1/policies/" + encodeURIComponent(name) }, options.signal);
    }
    /** jwks returns the execution-token public keys as a JSON Web Key Set. */
    async jwks(options = {}) {
        return (await this.request({ method: "GET", path: "/v1/keys" }, options.signal)).data;
    }
    /** rotateKey makes the cluster sign new execution tokens with a new key (admin) and returns its id. */
    async rotateKey(options = {}) {
        const { data } = await this.request({ method: "POST", path: "/v1/keys/rotate", body: "{}" }, options.signal);
        const kid = data?.kid;
        return typeof kid === "string" ? kid : "";
    }
    /** auditLog reads a page of the namespace's hash-chained audit log from seq since on. */
    async auditLog(options = {}) {
        const q = new URLSearchParams({ since: String(options.since ?? 0) });
        if (options.limit)
            q.set("limit", String(options.limit));
        if (options.namespace)
            q.set("namespace", options.namespace);
        const { data } = await this.request({ method: "GET", path: "/v1/audit", query: q }, options.signal);
        return auditLogPageFromWire(data);
    }
    /** settings reads the cluster-wide settings. */
    async settings(options = {}) {
        const { data } = await this.request({ method: "GET", path: "/v1/settings" }, options.signal);
        const v = data?.audit_retention;
        return { auditRetention: typeof v === "number" ? v : 0 };
    }
    /** putSettings replaces the cluster-wide settings (admin). */
    async putSettings(settings, options = {}) {
        const r = settings.auditRetention;
        if (!Number.isInteger(r) || r < 0 || r > 10000000) {
            throw badRequest(`audit retention ${r} is outside 0..10000000`, "audit_retention");
        }
        const { data } = await this.request({
            method: "PUT", path: "/v1/settings", body: JSON.stringify({ audit_retention: r }),
        }, options.signal);
        const v = data?.audit_retention;
        return { auditRetention: typeof v === "number" ? v : 0 };
    }
    // ------------------------------------------------------------- cluster
    /** cluster reads the cluster's status as the answering node sees it. */
    async cluster(options = {}) {
        const { data } = await this.request({ method: "GET", path: "/v1/cluster" }, options.signal);
        return clusterStatusFromWire(data);
    }
    /** health asks one node (default: the first configured) whether it is live and ready, without retries. */
    async health(addr, options = {}) {
        const base = normalizeAddr(addr || this.core.seeds[0]);
        await this.request({ method: "GET", path: "/healthz", addr: base }, options.signal);
        try {
            await this.request({ method: "GET", path: "/readyz", addr: base }, options.signal);
            return { addr: base, live: true, ready: true };
        }
        catch (err) {
            if (err instanceof ProblemError && err.code === "not_ready") {
                return { addr: base, live: true, ready: false, detail: err.detail };
            }
            throw err;
        }
    }
    // ------------------------------------------------------------- do
    /**
     * do runs fn at most once for the logical effect named by effect.key,
     * across retries, duplicate deliveries, concurrent callers and processes,
     * and records its outcome: Go's client.Do.
     *
     * - One owner per call (effect.owner or a fresh one), re-sent with every
     *   retry of the claim; never a new owner per attempt.
     * - granted: fn runs exactly once with the Grant, while the lease is
     *   renewed every lease/3; a refused renewal (fenced, in_doubt) aborts
     *   fn's signal with that error as its reason.
     * - fn resolves: complete(executed, its value as JSON), then commit
     *   (best-effort); returns status "executed" with value and result.
     * - fn throws EffectUnknown: nothing is reported (the key turns in_doubt
     *   when its lease passes) and the error is rethrown.
     * - fn throws anything else: complete(failed, {"error": message}) and the
     *   error is rethrown; a later call may run the effect again.
     * - The outcome is reported with the same owner, token and result until the
     *   ledger answers, for up to reportTimeoutMs, even after your signal
     *   aborted; if it cannot be, a ReportError (effect.ran true) is thrown.
     * - duplicate: fn does not run; returns status "duplicate" with the
     *   recorded result.
     * - in_flight: fn does not run; do() long-polls the key until the holder's
     *   record changes and claims again with the same owner, for up to
     *   maxWaitMs: the holder's result (duplicate), a new grant if it failed,
     *   in_doubt, or InFlightError at the end.
     * - pending_approval: fn does not run until an approver decides: do()
     *   long-polls for the decision for up to approvalWaitMs, then claims
     *   again (granted: fn runs once; rejected: RejectedError); still pending
     *   at the end: PendingApprovalError.
     * - divergent, in_doubt, rejected, ...: fn does not run; the typed error.
     * - The claim's outcome stays unknown: fn does not run; OutcomeUnknownError.
     *   To resume, set effect.owner yourself and call do() again.
     *
     * Bad input (an invalid key, no tool, a payload that is not JSON) is
     * refused before anything is sent, with BadRequestError.
     */
    async do(effect, fn, options = {}) {
        if (typeof fn !== "function")
            throw badRequest("no function to run");
        if (!effect || typeof effect !== "object")
            throw badRequest("no effect", "key");
        validateKey(effect.key);
        if (typeof effect.tool !== "string" || effect.tool === "")
            throw badRequest("tool is required", "tool");
        const payload = encodeJSON(effect.payload, "payload");
        if (effect.leaseMs !== undefined && !(Number.isFinite(effect.leaseMs) && effect.leaseMs >= 0)) {
            throw badRequest(`leaseMs ${effect.leaseMs} is not a duration`, "lease_ms");
        }
        const signal = options.signal;
        const fresh = !effect.owner;
        const owner = effect.owner || this.newOwner();
        const body = claimBody({ key: effect.key, tool: effect.tool, payload, owner, policy: effect.policy, leaseMs: effect.leaseMs });
        const resp = await this.run(settle(this.core, {
            key: effect.key, body, owner, fresh,
            maxWaitMs: positive(options.maxWaitMs, this.core.maxWaitMs),
            approvalWaitMs: nonNegative(options.approvalWaitMs, this.core.approvalWaitMs),
        }, signal), signal);
        if (resp.status === "granted")
            return this.execute(effect, resp, fn, signal);
        return duplicate(resp, owner);
    }
    /**
     * once wraps a tool function so that each logical call of it runs at most
     * once: the returned function takes the same arguments (and an optional
     * {signal} / {abortSignal}), claims key(args) under tool with the
     * arguments as payload, and returns fn's value, or for a duplicate the
     * recorded result of the first run (its JSON form). Refusals are thrown.
     */
    once(options, fn) {
        if (!options || typeof options.tool !== "string" || options.tool === "")
            throw badRequest("once: tool is required", "tool");
        if (typeof options.key !== "function")
            throw badRequest("once: key(args) is required", "key");
        if (typeof fn !== "function")
            throw badRequest("once: no function to wrap");
        const { tool } = options;
        return async (args, callOptions) => {
            const k = options.key(args);
            const key = typeof k === "string" ? k : makeKey(tool, ...k);
            const payload = options.payload ? options.payload(args) : args === undefined ? null : args;
            const signal = callOptions?.signal ?? callOptions?.abortSignal;
            const res = await this.do({ key, tool, payload, policy: options.policy, leaseMs: options.leaseMs }, (grant, sig) => fn(args, { grant, signal: sig }), { signal, approvalWaitMs: options.approvalWaitMs, maxWaitMs: options.maxWaitMs });
            return (res.ran ? res.value : res.result);
        };
    }
    /**
     * execute runs fn under the grant while a timer renews its lease every
     * lease/3, then records how fn ended (flow.ts's record) under the
     * report's own deadline, also after the caller's signal ended: an effect
     * that happened is reported rather than left to turn in_doubt.
     */
    async execute(effect, resp, fn, signal) {
        const grant = {
            key: effect.key, owner: resp.owner, fencingToken: resp.fencingToken,
            executionToken: resp.executionToken, intent: resp.intent,
        };
        const lease = leaseFor(effect.leaseMs, resp);
        const fnSignal = linkSignals([signal]);
        const every = Math.max(lease / 3, 1);
        let stopped = false;
        let timer;
        let renewing;
        const tick = () => {
            timer = undefined;
            if (stopped || signal?.aborted)
                return;
            renewing = (async () => {
                // Each renewal is abandoned after 2/3 of the lease, when the lease
                // would pass anyway.
                const rs = linkSignals([signal], Math.max(lease - every, 1));
                try {
                    await this.renew({ key: grant.key, owner: grant.owner, fencingToken: grant.fencingToken, leaseMs: lease }, { signal: rs.signal });
                }
                catch (err) {
                    if (stopped || signal?.aborted)
                        return;
                    if (grantLost(err)) {
                        // The right to execute is gone.
                        stopped = true;
                        fnSignal.abort(err);
                        return;
                    }
                    // The cluster could not answer: try again at the next tick.
                }
                finally {
                    rs.dispose();
                }
            })();
            void renewing.then(() => {
                renewing = undefined;
                if (!stopped)
                    timer = setTimeout(tick, every);
            });
        };
        timer = setTimeout(tick, every);
        const stop = async () => {
            stopped = true;
            if (timer !== undefined)
                clearTimeout(timer);
            // A renewal under way finishes first, so it cannot land after the report.
            if (renewing)
                await renewing;
            fnSignal.dispose();
        };
        let ran;
        try {
            ran = { threw: false, value: await fn(grant, fnSignal.signal) };
        }
        catch (e) {
            ran = { threw: true, err: e };
        }
        finally {
            await stop();
        }
        const out = {
            status: undefined, result: undefined, value: ran.threw ? undefined : ran.value, ran: true,
            intent: resp.intent, owner: grant.owner, fencingToken: grant.fencingToken,
        };
        if (ran.threw && isEffectUnknown(ran.err)) {
            // Nothing recorded: the intent turns in_doubt when its lease passes.
            throw ran.err;
        }
        const rs = linkSignals([], this.core.reportTimeoutMs);
        try {
            return await this.run(record(this.core, grant, ran, out, rs.signal), rs.signal);
        }
        finally {
            rs.dispose();
        }
    }
}
/** raceSignal settles with p, or rejects with signal's reason when it aborts first. */
function raceSignal(p, signal) {
    if (!signal)
        return p;
    if (signal.aborted)
        return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
        const on = () => reject(signal.reason);
        signal.addEventListener("abort", on, { once: true });
        p.then((v) => {
            signal.removeEventListener("abort", on);
            resolve(v);
        }, (e) => {
            signal.removeEventListener("abort", on);
            reject(e);
        });
    });
}
/** once wraps a tool function with client.once(options, fn). */
export function once(client, options, fn) {
    return client.once(options, fn);
}
/** validTraceparent reports whether tp is a W3C traceparent of version 00 (the IDs not all zero). */
export function validTraceparent(tp) {
    return /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/.test(tp);
}
