import { InFlightError } from "./errors.js";
import type { Core, Req, Route, Stop } from "./core.js";
import type { ClaimResponse, EffectResult, Grant, Intent, IntentResponse } from "./types.js";
/** Send req once to the node at base: an AttemptResult (never thrown). */
export interface AttemptStep {
    kind: "attempt";
    base: string;
    req: Req;
}
/** Wait ms; throws the caller's abort reason when it aborts first. */
export interface PauseStep {
    kind: "pause";
    ms: number;
}
/** Discover the route again unless another call already replaced seen: the route to use (never thrown). */
export interface RefreshStep {
    kind: "refresh";
    seen: Route;
}
/**
 * Long-poll key for a version above afterVersion for up to waitMs, the
 * whole call (429s included) bounded by boundMs and the caller's signal: a
 * PollResult (never thrown).
 */
export interface PollStep {
    kind: "poll";
    key: string;
    waitMs: number;
    afterVersion: number;
    boundMs: number;
}
export declare type PollResult = {
    ok: true;
    intent: Intent;
} | {
    ok: false;
    err: unknown;
    timedOut: boolean;
};
export declare type Step = AttemptStep | PauseStep | RefreshStep | PollStep;
/** A flow: yields steps, receives their outcomes, returns a T. */
export declare type Flow<T> = Generator<Step, T, any>;
/** drive runs flow, performing each step with perform; a step's rejection is thrown into the flow at its yield. */
export declare function drive<T>(flow: Flow<T>, perform: (step: Step) => Promise<unknown>): Promise<T>;
/**
 * call performs r, retrying as the Client documents, and returns the HTTP
 * status and the decoded 2xx answer: answers that say the cluster could not
 * serve and transport failures are sent again up to c.retries times, moving
 * through the nodes and rediscovering the leader; 429s on the same node for
 * up to rateLimitWaitMs. When the caller's signal aborts, it throws the
 * signal's reason, or an OutcomeUnknownError (cause: the reason) when a
 * write may have been applied.
 */
export declare function call(c: Core, r: Req, stop: Stop | undefined): Flow<{
    status: number;
    data: unknown;
}>;
/** intentCall posts an action on one intent (complete, renew, commit, ...). */
export declare function intentCall(c: Core, key: string, action: string, body: string, stop: Stop | undefined): Flow<IntentResponse>;
/** claimCall sends a claim whose body is ready. */
export declare function claimCall(c: Core, body: string, owner: string, stop: Stop | undefined): Flow<ClaimResponse>;
/**
 * discover asks the nodes of cur, in its order, for the cluster's status
 * and returns the route it implies. A node that is ready wins over one that
 * is not; without any answer naming a leader the order stays (a new
 * version). It takes at most one probe timeout per node; the transport
 * drives it without the caller's signal, so it goes on for the others.
 */
export declare function discover(c: Core, cur: Route): Flow<Route>;
/** What do() claims: the claim's body, ready, and its bounds. */
export interface Claim {
    key: string;
    body: string;
    owner: string;
    /** The owner was made for this call, so any grant to it is this call's. */
    fresh: boolean;
    maxWaitMs: number;
    approvalWaitMs: number;
}
/**
 * settle claims until the answer is one do() acts on: granted or duplicate.
 * A pending approval is waited out (long-polls) for up to approvalWaitMs,
 * then claimed again; still pending: PendingApprovalError.
 */
export declare function settle(c: Core, claim: Claim, stop: Stop | undefined): Flow<ClaimResponse>;
/** duplicate is what do() returns for a duplicate: the recorded result, fn not run. */
export declare function duplicate<R>(resp: ClaimResponse, owner: string): EffectResult<R>;
/**
 * settleClaim claims until the answer is definite: it re-sends the same
 * claim (same owner) while its outcome is unknown or the cluster cannot
 * answer, and waits (long-poll) while another owner holds the key, for up
 * to maxWaitMs and within the caller's signal.
 */
export declare function settleClaim(c: Core, claim: Claim, stop: Stop | undefined): Flow<ClaimResponse>;
/** claimGaveUp is the error of a claim that never got a definite answer (or stayed in flight). */
export declare function claimGaveUp(key: string, last: unknown, unknown: boolean, maxWaitMs: number): Error;
/**
 * awaitHolder waits while another owner holds the key: a long-poll for the
 * next change of its record (a renewal, a report, the lease passing), else
 * backoff bounded by the holder's Retry-After.
 */
export declare function awaitHolder(c: Core, key: string, err: InFlightError, attempt: number, left: number, stop: Stop | undefined): Flow<void>;
/**
 * awaitDecision long-polls a pending intent until it is no longer
 * pending_approval, or throws PendingApprovalError at the deadline.
 */
export declare function awaitDecision(c: Core, key: string, intent: Intent | undefined, deadline: number, stop: Stop | undefined): Flow<void>;
/** What report() sends: the outcome of key's grant; result is JSON text. */
export interface Report {
    key: string;
    owner: string;
    fencingToken: number;
    outcome: "executed" | "failed";
    result?: string;
}
/** report sends a complete until the ledger answers definitely or the stop ends it. */
export declare function report(c: Core, req: Report, stop: Stop | undefined): Flow<IntentResponse>;
/** How fn ended under a grant. */
export declare type Ran<R> = {
    threw: false;
    value: R | undefined;
} | {
    threw: true;
    err: unknown;
};
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
export declare function record<R>(c: Core, grant: Grant, ran: Ran<R>, out: EffectResult<R>, stop: Stop | undefined): Flow<EffectResult<R>>;
