// The flows of the client and of do(), without I/O (the "sans-I/O" style of
// the Python SDK's _flow.py): one call through the routes with its retries,
// a discovery, and do()'s claim, waits and reports.
//
// Each flow is a generator that yields a Step and receives its outcome: the
// value, or the error thrown in at the yield, so a flow handles a failed
// step with an ordinary try/catch. drive() runs a flow; the Client (the
// transport: fetch or node:net, AbortSignal, timers) performs each step.
// The caller's signal is read (Stop), never listened to: the transport ends
// a step when it aborts. Reading the clock is the only side effect here.
import { InDoubtError, InFlightError, IntentdError, NotFoundError, OutcomeUnknownError, PendingApprovalError, ProblemError, ReportError, maybeApplied, transient, } from "./errors.js";
import { MAX_LONG_POLL_MS, completeBody, errorResult, getRequest, intentPath, jsonBody, needKey, rateLimited, refusedResult, retryAfterOf, retryableForDo, } from "./core.js";
import { claimResponseFromWire, clusterStatusFromWire, intentFromWire, intentResponseFromWire } from "./types.js";
import { encodeJSON, errorMessage } from "./util.js";
/** drive runs flow, performing each step with perform; a step's rejection is thrown into the flow at its yield. */
export async function drive(flow, perform) {
    let r = flow.next();
    for (;;) {
        if (r.done)
            return r.value;
        let out;
        try {
            out = await perform(r.value);
        }
        catch (e) {
            r = flow.throw(e);
            continue;
        }
        r = flow.next(out);
    }
}
const pause = (ms) => ({ kind: "pause", ms });
// ------------------------------------------------------------ one call
/**
 * call performs r, retrying as the Client documents, and returns the HTTP
 * status and the decoded 2xx answer: answers that say the cluster could not
 * serve and transport failures are sent again up to c.retries times, moving
 * through the nodes and rediscovering the leader; 429s on the same node for
 * up to rateLimitWaitMs. When the caller's signal aborts, it throws the
 * signal's reason, or an OutcomeUnknownError (cause: the reason) when a
 * write may have been applied.
 */
export function* call(c, r, stop) {
    const write = r.method !== "GET";
    if (stop?.aborted)
        throw stop.reason;
    if (r.addr) {
        const a = yield { kind: "attempt", base: r.addr, req: r };
        if (a.ok)
            return a;
        if (stop?.aborted && !(write && maybeApplied(a.err)))
            throw stop.reason;
        throw a.err;
    }
    let rt = c.freshRoute() ?? (yield { kind: "refresh", seen: c.route });
    let idx = rt.preferred % rt.addrs.length;
    let unknown = false; // an attempt of this write may have been applied
    let lastErr;
    let attempt = 0;
    let limited = 0;
    const limitDeadline = Date.now() + (r.rateLimitWaitMs ?? c.rateLimitWaitMs);
    for (;;) {
        const base = rt.addrs[idx];
        const a = yield { kind: "attempt", base, req: r };
        if (a.ok) {
            rt.preferred = idx;
            return a;
        }
        const err = a.err;
        if (write && maybeApplied(err))
            unknown = true;
        lastErr = err;
        if (stop?.aborted || !a.retry)
            break;
        if (rateLimited(err)) {
            // The node is up and asked us to slow down: nothing was written.
            // Wait it out on the same node, bounded by time, not by retries.
            const left = limitDeadline - Date.now();
            if (left <= 0)
                break;
            try {
                yield pause(Math.min(c.backoff(limited++, a.wait), left));
            }
            catch {
                break;
            }
            continue;
        }
        if (attempt >= c.retries)
            break;
        try {
            yield pause(c.backoff(attempt++, a.wait));
        }
        catch {
            break;
        }
        // The node could not serve: perhaps the leader moved or died. Ask the
        // cluster again (at most once per failed route), else move on.
        let next = (idx + 1) % rt.addrs.length;
        if (c.discovery) {
            const nrt = yield { kind: "refresh", seen: rt };
            if (nrt !== rt) {
                rt = nrt;
                next = rt.preferred % rt.addrs.length;
                if (rt.addrs[next] === base && rt.addrs.length > 1)
                    next = (next + 1) % rt.addrs.length;
            }
        }
        idx = next;
    }
    if (stop?.aborted) {
        if (!unknown)
            throw stop.reason;
        throw new OutcomeUnknownError({
            status: 0, code: "outcome_unknown", title: "Outcome unknown",
            detail: `${r.method} ${r.path}: stopped by the caller after an attempt that may have been applied`,
            cause: stop.reason,
        });
    }
    if (unknown && lastErr && !(lastErr instanceof OutcomeUnknownError) && transient(lastErr)) {
        // An earlier attempt may have been applied even though the last one
        // definitely was not.
        throw new OutcomeUnknownError({
            status: lastErr.status, code: "outcome_unknown", title: "Outcome unknown",
            detail: `an earlier attempt may have been applied: ${lastErr.message}`, cause: lastErr,
            retryAfterMs: lastErr.retryAfterMs,
        });
    }
    throw lastErr;
}
/** intentCall posts an action on one intent (complete, renew, commit, ...). */
export function* intentCall(c, key, action, body, stop) {
    needKey(key);
    const { data } = yield* call(c, { method: "POST", path: intentPath(key, action), body }, stop);
    return intentResponseFromWire(data);
}
/** claimCall sends a claim whose body is ready. */
export function* claimCall(c, body, owner, stop) {
    const { status, data } = yield* call(c, { method: "POST", path: "/v1/intents", body }, stop);
    return claimResponseFromWire(data, status, owner);
}
// ------------------------------------------------------------ discovery
/**
 * discover asks the nodes of cur, in its order, for the cluster's status
 * and returns the route it implies. A node that is ready wins over one that
 * is not; without any answer naming a leader the order stays (a new
 * version). It takes at most one probe timeout per node; the transport
 * drives it without the caller's signal, so it goes on for the others.
 */
export function* discover(c, cur) {
    const at = Date.now();
    let found;
    for (let i = 0; i < cur.addrs.length; i++) {
        const base = cur.addrs[(cur.preferred + i) % cur.addrs.length];
        const a = yield {
            kind: "attempt", base, req: { method: "GET", path: "/v1/cluster", timeoutMs: c.probeTimeoutMs },
        };
        if (!a.ok)
            continue;
        const r = c.routeFromStatus(base, clusterStatusFromWire(a.data), cur.version + 1, at);
        if (!r)
            continue;
        if (r.ready) {
            found = r.route;
            break;
        }
        if (!found)
            found = r.route;
    }
    return found ?? { version: cur.version + 1, addrs: cur.addrs, leader: cur.leader, at, preferred: cur.preferred };
}
/**
 * settle claims until the answer is one do() acts on: granted or duplicate.
 * A pending approval is waited out (long-polls) for up to approvalWaitMs,
 * then claimed again; still pending: PendingApprovalError.
 */
export function* settle(c, claim, stop) {
    const approvalDeadline = Date.now() + claim.approvalWaitMs;
    let resp = yield* settleClaim(c, claim, stop);
    for (;;) {
        switch (resp.status) {
            case "granted":
            case "duplicate":
                return resp;
            case "pending_approval":
                yield* awaitDecision(c, claim.key, resp.intent, approvalDeadline, stop);
                resp = yield* settleClaim(c, claim, stop);
                continue;
        }
        throw new IntentdError(`intentd: claim ${JSON.stringify(claim.key)}: unexpected status ${JSON.stringify(resp.status)}`);
    }
}
/** duplicate is what do() returns for a duplicate: the recorded result, fn not run. */
export function duplicate(resp, owner) {
    return {
        status: "duplicate", result: resp.intent?.result, value: undefined, ran: false,
        intent: resp.intent, owner, fencingToken: 0,
    };
}
/**
 * settleClaim claims until the answer is definite: it re-sends the same
 * claim (same owner) while its outcome is unknown or the cluster cannot
 * answer, and waits (long-poll) while another owner holds the key, for up
 * to maxWaitMs and within the caller's signal.
 */
export function* settleClaim(c, claim, stop) {
    const { key, owner, fresh, maxWaitMs } = claim;
    const deadline = Date.now() + maxWaitMs;
    let unknown = false; // an attempt of this call may have been granted
    let released = false; // this call already reported its own unused grant
    for (let attempt = 0;; attempt++) {
        let err;
        try {
            return yield* claimCall(c, claim.body, owner, stop);
        }
        catch (e) {
            err = e;
        }
        if (stop?.aborted) {
            if (err instanceof OutcomeUnknownError)
                throw err;
            if (unknown)
                throw claimGaveUp(key, err, true, maxWaitMs);
            throw err;
        }
        let wait;
        if (err instanceof InFlightError) {
            // Definite: another owner holds the key, so no attempt of this call
            // was granted.
            unknown = false;
            const left = deadline - Date.now();
            if (left <= 0)
                throw claimGaveUp(key, err, false, maxWaitMs);
            try {
                yield* awaitHolder(c, key, err, attempt, left, stop);
            }
            catch (e) {
                if (stop?.aborted)
                    throw e;
            }
            continue;
        }
        else if (err instanceof InDoubtError && fresh && !released && err.intent?.owner === owner) {
            // A lost answer granted this call's own owner, whose lease then
            // passed while the call could not reach the cluster. This call has
            // not run the effect, and the owner is this call's alone: say the
            // grant failed unused and claim again.
            try {
                yield* report(c, {
                    key, owner, fencingToken: err.intent.fencingToken, outcome: "failed",
                    result: JSON.stringify({ error: "the claim's answer was lost and its lease passed; the effect never ran" }),
                }, stop);
            }
            catch (e) {
                throw new IntentdError(`intentd: claim ${JSON.stringify(key)}: its own earlier grant passed unused and reporting that failed: ${errorMessage(e)}`, { cause: e });
            }
            released = true;
            unknown = false;
            continue;
        }
        else if (retryableForDo(err)) {
            if (maybeApplied(err))
                unknown = true;
            wait = c.backoff(attempt, retryAfterOf(err));
        }
        else {
            throw err;
        }
        const left = deadline - Date.now();
        if (left <= 0)
            throw claimGaveUp(key, err, unknown, maxWaitMs);
        try {
            yield pause(Math.min(wait, left));
        }
        catch (e) {
            if (unknown)
                throw claimGaveUp(key, err, true, maxWaitMs);
            throw e;
        }
    }
}
/** claimGaveUp is the error of a claim that never got a definite answer (or stayed in flight). */
export function claimGaveUp(key, last, unknown, maxWaitMs) {
    if (last instanceof InFlightError)
        return last;
    if (unknown && !(last instanceof OutcomeUnknownError)) {
        return new OutcomeUnknownError({
            status: last instanceof ProblemError ? last.status : 0, code: "outcome_unknown", title: "Outcome unknown",
            detail: `claim ${JSON.stringify(key)}: no definite answer within ${maxWaitMs} ms and an earlier attempt may have been granted: ${errorMessage(last)}`,
            cause: last,
        });
    }
    return last instanceof Error ? last : new IntentdError(errorMessage(last), { cause: last });
}
/**
 * awaitHolder waits while another owner holds the key: a long-poll for the
 * next change of its record (a renewal, a report, the lease passing), else
 * backoff bounded by the holder's Retry-After.
 */
export function* awaitHolder(c, key, err, attempt, left, stop) {
    const version = err.intent?.version;
    if (version !== undefined && version > 0) {
        // Wake at the latest when the holder's lease should have passed.
        const until = err.retryAfterMs > 0 ? err.retryAfterMs + 250 : 30000;
        const waitMs = Math.max(50, Math.min(left, until, MAX_LONG_POLL_MS));
        const started = Date.now();
        // The poll (and any 429 it waits out) ends with the wait.
        const p = yield { kind: "poll", key, waitMs, afterVersion: version, boundMs: left + 1000 };
        if (p.ok)
            return;
        if (stop?.aborted)
            throw p.err;
        if (p.err instanceof NotFoundError || p.timedOut)
            return; // gone (purged), or out of time: claim again
        // Too many waiters, unavailable ...: fall back to backoff, unless the
        // poll itself took its time.
        if (Date.now() - started >= waitMs)
            return;
    }
    let wait = c.backoff(attempt, 0);
    if (err.retryAfterMs > 0 && err.retryAfterMs < wait)
        wait = err.retryAfterMs;
    yield pause(Math.min(wait, Math.max(0, left)));
}
/**
 * awaitDecision long-polls a pending intent until it is no longer
 * pending_approval, or throws PendingApprovalError at the deadline.
 */
export function* awaitDecision(c, key, intent, deadline, stop) {
    let current = intent;
    for (let attempt = 0;; attempt++) {
        if (current && current.state !== "pending_approval")
            return;
        const left = deadline - Date.now();
        if (left <= 0) {
            throw new PendingApprovalError({
                status: 202, code: "pending_approval", title: "Pending approval",
                detail: "the intent waits for an approver; nothing may run before it is approved", intent: current,
            });
        }
        // The poll (and any 429 it waits out) ends with the approval wait.
        const p = yield {
            kind: "poll", key, waitMs: Math.min(left, MAX_LONG_POLL_MS), afterVersion: current?.version ?? 0, boundMs: left + 1000,
        };
        if (p.ok) {
            current = p.intent;
            continue;
        }
        const e = p.err;
        if (stop?.aborted)
            throw e;
        if (p.timedOut)
            continue;
        if (!retryableForDo(e))
            throw e;
        yield pause(Math.min(c.backoff(attempt, retryAfterOf(e)), left));
        if (e instanceof ProblemError && e.status === 429) {
            // The node will not hold another long-poll now (too_many_waiters):
            // read without waiting instead.
            try {
                const { data } = yield* call(c, getRequest(key, {}, c.timeoutMs, 0), stop);
                current = intentFromWire(data);
            }
            catch (e2) {
                if (stop?.aborted)
                    throw e2;
            }
        }
    }
}
/** report sends a complete until the ledger answers definitely or the stop ends it. */
export function* report(c, req, stop) {
    const body = completeBody(req.owner, req.fencingToken, req.outcome, req.result);
    for (let attempt = 0;; attempt++) {
        try {
            return yield* intentCall(c, req.key, "complete", body, stop);
        }
        catch (err) {
            if (stop?.aborted || !retryableForDo(err))
                throw err;
            try {
                yield pause(c.backoff(attempt, retryAfterOf(err)));
            }
            catch {
                throw err;
            }
        }
    }
}
/**
 * record reports how fn ended, with out (status, intent, result) filled in:
 * failed (with the error as the result; then fn's error is thrown, recorded
 * or not), or executed with fn's value as the result (a result the ledger
 * will not store is left out rather than leaving the effect to turn
 * in_doubt; then ReportError), and commits it when c.autoCommit
 * (best-effort). A report that cannot be made throws ReportError. The
 * transport drives it under the report's own deadline, not the caller's
 * signal. (fn throwing EffectUnknown is not recorded at all: the transport
 * rethrows it before.)
 */
export function* record(c, grant, ran, out, stop) {
    const { key, owner, fencingToken } = grant;
    if (ran.threw) {
        try {
            const done = yield* report(c, { key, owner, fencingToken, outcome: "failed", result: errorResult(ran.err) }, stop);
            out.status = "failed";
            out.intent = done.intent;
        }
        catch {
            // Recording the failure failed: the key turns in_doubt when its
            // lease passes. The function's own error is what the caller gets.
        }
        throw ran.err;
    }
    let result;
    let encErr;
    if (ran.value !== undefined) {
        try {
            result = encodeJSON(ran.value, "result");
        }
        catch (e) {
            encErr = e;
        }
    }
    let done;
    try {
        try {
            done = yield* report(c, { key, owner, fencingToken, outcome: "executed", result }, stop);
        }
        catch (e) {
            if (!refusedResult(e, result))
                throw e;
            // The ledger will not store this result (too large): record the
            // effect without it rather than leave it to turn in_doubt.
            encErr = e;
            result = undefined;
            done = yield* report(c, { key, owner, fencingToken, outcome: "executed" }, stop);
        }
    }
    catch (e) {
        throw new ReportError(`intentd: effect ${JSON.stringify(key)} ran but recording it failed: ${errorMessage(e)}`, out, e);
    }
    out.status = "executed";
    out.intent = done.intent;
    out.result = done.intent?.result !== undefined ? done.intent.result : result !== undefined ? JSON.parse(result) : undefined;
    if (c.autoCommit) {
        try {
            const cr = yield* intentCall(c, key, "commit", jsonBody({ owner }), stop);
            if (cr.intent)
                out.intent = cr.intent;
        }
        catch {
            // best-effort
        }
    }
    if (encErr !== undefined) {
        throw new ReportError(`intentd: effect ${JSON.stringify(key)} executed and recorded without its result: ${errorMessage(encErr)}`, out, encErr);
    }
    return out;
}
