// The client's decisions without I/O: its settings and their defaults, the
// route (which node to ask first, what a discovery answer means), the
// requests of the API table, what an answer or the lack of one means
// (problem mapping), the backoff, and what do() records. Nothing here sends,
// sleeps or listens: client.ts does, driving flow.ts. Reading the clock
// (Date.now) and the jitter source are the only side effects.
import { BadRequestError, FencedError, InDoubtError, IntentdError, InvalidStateError, LedgerFullError, NamespaceFullError, NotFoundError, OutcomeUnknownError, ProblemError, RateLimitedError, UnavailableError, badRequest, readProblem, retryableProblem, } from "./errors.js";
import { hasLoneSurrogate } from "./keys.js";
import { encodeJSON, errorMessage } from "./util.js";
/** Defaults of the options (client/client.go). */
export const DEFAULTS = Object.freeze({
    retries: 4,
    backoffBaseMs: 50,
    backoffMaxMs: 2000,
    timeoutMs: 30000,
    maxWaitMs: 30000,
    approvalWaitMs: 30000,
    rateLimitWaitMs: 30000,
    reportTimeoutMs: 30000,
    discoveryRefreshMs: 60000,
    probeTimeoutMs: 1000,
});
/** The longest long-poll the cluster serves (GET /v1/intents/{key}?wait=), in ms. */
export const MAX_LONG_POLL_MS = 60000;
/** Bounds the error message recorded for a failed effect (bytes). */
const MAX_ERROR_RESULT_BYTES = 1024;
/** The lease do() assumes when neither the effect nor the grant names one, in ms. */
const DEFAULT_LEASE_MS = 30000;
export function positive(v, d) {
    return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : d;
}
export function nonNegative(v, d) {
    return typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : d;
}
/**
 * Core holds the client's settings and its route: which nodes to ask, in
 * which order, and when to ask the cluster again. The transport replaces
 * the route with what a discovery (flow.ts) returns.
 */
export class Core {
    seeds;
    timeoutMs;
    retries;
    base;
    max;
    discovery;
    discoveryRefreshMs;
    probeTimeoutMs;
    maxWaitMs;
    approvalWaitMs;
    rateLimitWaitMs;
    reportTimeoutMs;
    autoCommit;
    random;
    /** The route calls use now. */
    route;
    constructor(seeds, options) {
        this.seeds = seeds;
        this.timeoutMs = positive(options.timeoutMs, DEFAULTS.timeoutMs);
        this.retries = Math.floor(nonNegative(options.retries, DEFAULTS.retries));
        this.base = positive(options.backoffBaseMs, DEFAULTS.backoffBaseMs);
        this.max = Math.max(positive(options.backoffMaxMs, DEFAULTS.backoffMaxMs), this.base);
        this.discovery = options.discovery ?? true;
        this.discoveryRefreshMs = positive(options.discoveryRefreshMs, DEFAULTS.discoveryRefreshMs);
        this.probeTimeoutMs = positive(options.probeTimeoutMs, DEFAULTS.probeTimeoutMs);
        this.maxWaitMs = positive(options.maxWaitMs, DEFAULTS.maxWaitMs);
        this.approvalWaitMs = nonNegative(options.approvalWaitMs, DEFAULTS.approvalWaitMs);
        this.rateLimitWaitMs = nonNegative(options.rateLimitWaitMs, DEFAULTS.rateLimitWaitMs);
        this.reportTimeoutMs = positive(options.reportTimeoutMs, DEFAULTS.reportTimeoutMs);
        this.autoCommit = options.autoCommit ?? true;
        this.random = options.random ?? Math.random;
        this.route = { version: 0, addrs: dedupe(seeds), leader: "", at: Date.now(), preferred: 0 };
    }
    /** backoff is the wait before retry number attempt+1: exponential with jitter in [d/2, d], raised to Retry-After, capped at max. */
    backoff(attempt, retryAfterMs) {
        let d = this.base;
        for (let i = 0; i < attempt && d < this.max; i++)
            d *= 2;
        d = Math.min(d, this.max);
        d = d / 2 + this.random() * (d / 2);
        if (retryAfterMs > d)
            d = Math.min(retryAfterMs, this.max);
        return d;
    }
    /** The route to use now, or undefined when it is time to ask the cluster (currentRoute). */
    freshRoute() {
        const rt = this.route;
        if (!this.discovery || (rt.version > 0 && Date.now() - rt.at < this.discoveryRefreshMs))
            return rt;
        return undefined;
    }
    /** The addresses in the order the next call tries them. */
    endpoints() {
        const rt = this.route;
        const out = [];
        for (let i = 0; i < rt.addrs.length; i++)
            out.push(rt.addrs[(rt.preferred + i) % rt.addrs.length]);
        return out;
    }
    /**
     * routeFromStatus orders the addresses by st, as the node at base sees
     * it: the leader first (base itself when it leads), then the configured
     * addresses, then the other members' advertised HTTP addresses.
     */
    routeFromStatus(base, st, version, at) {
        if (!st.leaderId)
            return undefined;
        const scheme = base.startsWith("https://") ? "https" : "http";
        let leader;
        if (st.nodeId === st.leaderId) {
            leader = base;
        }
        else {
            if (!st.leaderHttp)
                return undefined;
            try {
                leader = normalizeAddr(st.leaderHttp, scheme);
            }
            catch {
                return undefined;
            }
        }
        const addrs = [leader, ...this.seeds];
        for (const n of st.nodes) {
            if (n.id === st.nodeId || n.id === st.leaderId || !n.httpAddr || n.gossip === "left" || n.gossip === "dead")
                continue;
            try {
                addrs.push(normalizeAddr(n.httpAddr, scheme));
            }
            catch {
                // skip an address that does not parse
            }
        }
        return { route: { version, addrs: dedupe(addrs), leader, at, preferred: 0 }, ready: st.ready };
    }
}
// ------------------------------------------------------------ addresses and requests
/** normalizeAddr turns "host:port" or a URL into a base URL without a trailing slash. */
export function normalizeAddr(a, scheme = "http") {
    let s = a.trim();
    if (!s.includes("://"))
        s = `${scheme}://${s}`;
    let u;
    try {
        u = new URL(s);
    }
    catch {
        throw new IntentdError(`intentd: address ${JSON.stringify(a)}: want http://host:port`);
    }
    if (!u.host || (u.protocol !== "http:" && u.protocol !== "https:")) {
        throw new IntentdError(`intentd: address ${JSON.stringify(a)}: want http://host:port`);
    }
    if (u.search || u.hash)
        throw new IntentdError(`intentd: address ${JSON.stringify(a)}: no query or fragment allowed`);
    return `${u.protocol}//${u.host}${u.pathname}`.replace(/\/+$/, "");
}
export function dedupe(addrs) {
    return [...new Set(addrs.filter((a) => a !== ""))];
}
/** Raw JSON text to embed in a request body as it is. */
export class RawJSON {
    text;
    constructor(text) {
        this.text = text;
    }
}
/**
 * jsonBody writes an object from fields, skipping undefined ones and
 * embedding RawJSON as it is. The field names are the API's (snake_case
 * words), written as they are.
 */
export function jsonBody(fields) {
    let out = "";
    for (const k in fields) {
        const v = fields[k];
        if (v === undefined)
            continue;
        out += (out === "" ? '{"' : ',"') + k + '":' + (v instanceof RawJSON ? v.text : JSON.stringify(v));
    }
    return out === "" ? "{}" : out + "}";
}
export function optionalJSON(value, field) {
    return value === undefined ? undefined : new RawJSON(encodeJSON(value, field));
}
/** The escaped path of an intent and an optional action: the key is one path segment. */
export function intentPath(key, action) {
    return "/v1/intents/" + encodeURIComponent(key) + (action ? "/" + action : "");
}
export function needKey(key) {
    if (typeof key !== "string" || key === "")
        throw badRequest("key is required", "key");
    if (hasLoneSurrogate(key))
        throw badRequest("key is not valid UTF-8 (a lone surrogate)", "key");
}
/** The body of a claim (POST /v1/intents); payload is JSON text. */
export function claimBody(c) {
    return jsonBody({
        key: c.key,
        tool: c.tool,
        payload: new RawJSON(c.payload),
        owner: c.owner,
        policy: c.policy || undefined,
        lease_ms: c.leaseMs && c.leaseMs > 0 ? Math.round(c.leaseMs) : undefined,
    });
}
/** The body of a complete; result is JSON text. */
export function completeBody(owner, fencingToken, outcome, result) {
    return jsonBody({
        owner, fencing_token: fencingToken, outcome,
        result: result === undefined ? undefined : new RawJSON(result),
    });
}
/**
 * getRequest is the request of get(): a linearizable (or stale) read, or
 * with waitMs a long-poll whose attempt may take timeoutMs + waitMs.
 */
export function getRequest(key, options, timeoutMs, rateLimitWaitMs) {
    needKey(key);
    const q = new URLSearchParams();
    let attemptMs;
    if (options.waitMs !== undefined) {
        const w = options.waitMs;
        if (!(w >= 0 && w <= MAX_LONG_POLL_MS)) {
            throw badRequest(`wait ${w} ms is outside 0..${MAX_LONG_POLL_MS} ms`, "wait");
        }
        q.set("wait", `${Math.round(w)}ms`);
        q.set("after_version", String(Math.max(0, Math.floor(options.afterVersion ?? 0))));
        attemptMs = timeoutMs + w;
    }
    if (options.stale)
        q.set("consistency", "stale");
    return { method: "GET", path: intentPath(key), query: q, timeoutMs: attemptMs, rateLimitWaitMs };
}
/** The path and query of r, as sent. */
export function requestPath(r) {
    let path = r.path;
    if (r.query) {
        const qs = r.query.toString();
        if (qs)
            path += "?" + qs;
    }
    return path;
}
// ------------------------------------------------------------ what an answer means
/** Network errors that say the request never left: nothing was written. */
const NOT_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL"]);
export function notSent(err) {
    for (let e = err, depth = 0; e && typeof e === "object" && depth < 8; depth++) {
        const code = e.code;
        if (typeof code === "string" && NOT_SENT_CODES.has(code))
            return true;
        const errors = e.errors;
        if (Array.isArray(errors) && errors.length > 0 && errors.every((x) => notSent(x)))
            return true;
        e = e.cause;
    }
    return false;
}
/** noTransport is the attempt of a client whose transport could not be loaded: nothing was sent. */
export function noTransport(e) {
    return {
        ok: false,
        err: new UnavailableError({ status: 0, code: "unavailable", title: "No transport", detail: errorMessage(e), cause: e }),
        retry: false,
        wait: 0,
    };
}
/**
 * noAnswer is the attempt that got no answer: the Sender rejected with e.
 * byCaller: the caller's signal ended it (cause: its reason); timedOut:
 * the attempt's timeout did. A write that may have left is unknown.
 */
export function noAnswer(r, base, path, timeoutMs, e, how) {
    const write = r.method !== "GET";
    const unsent = !how.byCaller && !how.timedOut && notSent(e);
    const Kind = write && !unsent ? OutcomeUnknownError : UnavailableError;
    const why = how.timedOut ? `no answer within ${timeoutMs} ms` : errorMessage(e);
    return {
        ok: false,
        err: new Kind({
            status: 0, code: Kind === OutcomeUnknownError ? "outcome_unknown" : "unavailable", title: "No answer",
            detail: `${r.method} ${base + path}: ${why}`, cause: how.cause,
        }),
        // The caller's signal ending is not the server's fault: stop.
        retry: !how.byCaller,
        wait: 0,
    };
}
/**
 * answered is the attempt that got an answer: the decoded 2xx document, or
 * the Problem (a write's 502 or 504 as OutcomeUnknownError: it may have been
 * applied). aborted: the caller's signal has ended (then no retry).
 */
export function answered(r, base, path, answer, aborted) {
    const write = r.method !== "GET";
    const { status, text } = answer;
    if (status >= 200 && status < 300) {
        if (text === "" || text.trim() === "")
            return { ok: true, status, data: undefined };
        try {
            return { ok: true, status, data: JSON.parse(text) };
        }
        catch (e) {
            // The call was answered; only its body is lost. For a write, what it
            // did is not known to the caller.
            const Kind = write ? OutcomeUnknownError : UnavailableError;
            return {
                ok: false,
                err: new Kind({
                    status: 0, code: write ? "outcome_unknown" : "unavailable", title: "Undecodable answer",
                    detail: `${r.method} ${base + path}: decoding the ${status} answer: ${errorMessage(e)}`, cause: e,
                }),
                retry: !aborted,
                wait: 0,
            };
        }
    }
    let p = readProblem(status, text, answer.retryAfter);
    if (write && (status === 502 || status === 504)) {
        p = new OutcomeUnknownError({
            status: p.status, code: p.code, title: p.title, detail: p.detail, type: p.type,
            retryAfterMs: p.retryAfterMs, cause: p,
        });
    }
    return { ok: false, err: p, retry: retryableProblem(p), wait: p.retryAfterMs };
}
/** rateLimited: the node is up and asked us to slow down (nothing was written). */
export function rateLimited(err) {
    return err instanceof RateLimitedError || err.status === 429;
}
/**
 * retryableForDo: err says the cluster could not answer, or asked to slow down (do()'s retryable). NamespaceFullError
 * and LedgerFullError (507) are definite refusals.
 */
export function retryableForDo(err) {
    if (err instanceof NamespaceFullError || err instanceof LedgerFullError)
        return false;
    if (err instanceof ProblemError && (err.status >= 500 || err.status === 429))
        return true;
    return err instanceof OutcomeUnknownError || err instanceof UnavailableError || err instanceof RateLimitedError;
}
/** retryAfterOf is err's Retry-After in ms, 0 for anything but a Problem. */
export function retryAfterOf(err) {
    return err instanceof ProblemError ? err.retryAfterMs : 0;
}
// ------------------------------------------------------------ do()
/** leaseFor is the lease do() renews: the effect's, else the grant's, else 30 s. */
export function leaseFor(effectLeaseMs, resp) {
    let lease = effectLeaseMs && effectLeaseMs > 0 ? effectLeaseMs : 0;
    if (lease <= 0 && resp.intent?.leaseMs)
        lease = resp.intent.leaseMs;
    if (lease <= 0)
        lease = DEFAULT_LEASE_MS;
    return lease;
}
/** grantLost: a renewal refused with err says the right to execute is gone. */
export function grantLost(err) {
    return err instanceof FencedError || err instanceof InDoubtError || err instanceof InvalidStateError || err instanceof NotFoundError;
}
/** refusedResult: the ledger refused a report carrying result (too large): record the effect without it. */
export function refusedResult(err, result) {
    return err instanceof BadRequestError && result !== undefined;
}
/** errorResult is the result recorded for a failed effect: {"error": message}, cut to 1 KiB at a UTF-8 boundary. */
export function errorResult(err) {
    let msg = errorMessage(err);
    const bytes = new TextEncoder().encode(msg);
    if (bytes.length > MAX_ERROR_RESULT_BYTES) {
        let cut = MAX_ERROR_RESULT_BYTES;
        while (cut > 0 && (bytes[cut] & 0xc0) === 0x80)
            cut--;
        msg = new TextDecoder().decode(bytes.subarray(0, cut)) + "...";
    }
    return JSON.stringify({ error: msg });
}
