import type { EffectResult, Intent } from "./types.js";
/** Base class of every error the SDK throws (EffectUnknown aside, which your function throws). */
export declare class IntentdError extends Error {
    constructor(message: string, options?: {
        cause?: unknown;
    });
}
/** The fields of a problem, as ProblemError holds them. */
export interface ProblemInit {
    /** The HTTP status; 0 when no answer came (a network failure or timeout). */
    status: number;
    /** The stable word to switch on: in_flight, divergent, no_leader, ... (docs/problems.md). */
    code: string;
    title?: string;
    detail?: string;
    /** The URI of the code's documentation. */
    type?: string;
    /** The offending request field of a bad-input problem. */
    field?: string;
    /** The intent record, when the answer carries it (in_flight, in_doubt, divergent, fenced, ...). */
    intent?: Intent;
    /** When a retry makes sense, in milliseconds (0: not said). */
    retryAfterMs?: number;
    /** On divergent: the recorded fingerprint and this request's. */
    fingerprint?: string;
    requestFingerprint?: string;
    cause?: unknown;
}
/**
 * An error answer of the API (a problem document), or a failure to get one
 * (status 0). Subclasses say what it means; code says exactly which answer.
 */
export declare class ProblemError extends IntentdError {
    readonly status: number;
    readonly code: string;
    readonly title: string;
    readonly detail: string;
    readonly type: string;
    readonly field: string;
    readonly intent: Intent | undefined;
    readonly retryAfterMs: number;
    readonly fingerprint: string;
    readonly requestFingerprint: string;
    constructor(init: ProblemInit);
    /** The problem's fields, for logging (JSON.stringify of an Error is otherwise {}). */
    toJSON(): Record<string, unknown>;
}
/** in_flight (409): another owner holds the lease; do not execute. Wait retryAfterMs and claim again with the same owner. */
export declare class InFlightError extends ProblemError {
}
/** in_doubt (409): the lease passed without a report; check the tool's side, then resolve. */
export declare class InDoubtError extends ProblemError {
}
/** divergent (422): same key, different tool or payload; never execute. */
export declare class DivergentError extends ProblemError {
}
/** fenced (409): a stale owner or fencing token; you no longer hold the intent. */
export declare class FencedError extends ProblemError {
}
/** rejected (403): an approver rejected the intent. */
export declare class RejectedError extends ProblemError {
}
/** pending_approval: the intent waits for an approver; do not execute (do() throws it when its approval wait ends). */
export declare class PendingApprovalError extends ProblemError {
}
/** not_found, policy_not_found (404). */
export declare class NotFoundError extends ProblemError {
}
/** invalid_state, not_pending_approval, already_approved, version_mismatch (409): the call does not fit the state. */
export declare class InvalidStateError extends ProblemError {
}
/** bad_request (400), too_large (413), unprocessable, unknown_policy (422); also bad input refused locally (status 0). Nothing was written. */
export declare class BadRequestError extends ProblemError {
}
/** blocked (403): the policy that selects the tool blocks it. */
export declare class BlockedError extends ProblemError {
}
/** token_used (409): the execution token was already verified once. */
export declare class TokenUsedError extends ProblemError {
}
/** token_expired (410). */
export declare class TokenExpiredError extends ProblemError {
}
/** token_invalid, token_mismatch (422). */
export declare class TokenInvalidError extends ProblemError {
}
/**
 * token_wrong_tool (422): verifyToken named the tool about to run (`tool`) and the execution token was granted for
 * another one. Nothing was written: the token was not spent, and the tool it is for can still verify it. Do not act
 * on it. (Go's ErrTokenWrongTool, which also matches ErrTokenInvalid.)
 */
export declare class TokenWrongToolError extends TokenInvalidError {
}
/** Not authorized: unauthenticated (401), and every 403 below (ForbiddenError), as Go's ErrUnauthorized. */
export declare class UnauthorizedError extends ProblemError {
}
/** forbidden, not_an_approver (403), and the two subclasses: the key is valid but may not do this. */
export declare class ForbiddenError extends UnauthorizedError {
}
/** not_grant_holder (403): the grant is bound to another API key; do not retry with this key. */
export declare class NotGrantHolderError extends ForbiddenError {
}
/** self_approval (403): the claimant may not approve its own intent. */
export declare class SelfApprovalError extends ForbiddenError {
}
/**
 * token_tool_forbidden (403): the client's API key is bound to tools (its `tools` in the key configuration) that do
 * not include the execution token's. The token was not spent. Do not act on it. (Go's ErrTokenToolForbidden, which
 * also matches ErrUnauthorized.)
 */
export declare class TokenToolForbiddenError extends ForbiddenError {
}
/**
 * outcome_unknown (503), a 502/504 to a write, or a write whose answer was lost
 * (status 0): it may or may not have been applied. Retry the same request.
 */
export declare class OutcomeUnknownError extends ProblemError {
}
/** unavailable, shutting_down, not_ready (503), or no answer to a read (status 0): nothing was written; retry. */
export declare class UnavailableError extends ProblemError {
}
/** no_leader, not_leader (503): nothing was written; retry. (Go's ErrNoLeader; here also an UnavailableError.) */
export declare class NoLeaderError extends UnavailableError {
}
/**
 * rate_limited, namespace_rate_limited (429): nothing was written; the client waits Retry-After out by itself, for up
 * to rateLimitWaitMs. (namespace_rate_limited: the claim's namespace is over its quota of claims per second.)
 */
export declare class RateLimitedError extends ProblemError {
}
/**
 * namespace_full (507): the claim would add an intent to a namespace that holds its quota of intents; nothing was
 * written, and do() does not run the effect. Not retried: claims of keys the namespace holds, reports and reads are
 * still served; claim again once intents were purged. (Go's ErrNamespaceFull.)
 */
export declare class NamespaceFullError extends ProblemError {
}
/**
 * ledger_full (507): the claim would add an intent while the cluster's leader is past a capacity (free disk under its
 * reserve, data dir over its cap, or live heap over its memory's high water); nothing was written, and do() does not
 * run the effect. Not retried (no Retry-After is sent: room comes back with purges or an operator, at no promised
 * time): claims of keys the ledger holds, reports and reads are still served. (Go's ErrLedgerFull.)
 */
export declare class LedgerFullError extends ProblemError {
}
/** bad_snapshot (422). */
export declare class BadSnapshotError extends ProblemError {
}
/** not_empty (409). */
export declare class NotEmptyError extends ProblemError {
}
/** problemFor returns the error of a problem: the subclass its code names, else ProblemError. */
export declare function problemFor(init: ProblemInit): ProblemError;
/** Whether the same request may be sent again after p (Problem.retryable). */
export declare function retryableProblem(p: ProblemError): boolean;
/** Whether a write that failed with err may have been applied (maybeApplied). */
export declare function maybeApplied(err: unknown): boolean;
/** Whether err says the cluster could not answer, rather than a definite answer (transient). */
export declare function transient(err: unknown): boolean;
/**
 * readProblem decodes an error answer as client/problem.go does: a problem
 * document's fields as they are; a document without a code keeps its type,
 * title and detail and is named by its status, as is an answer without a
 * document, whose body (cut) is the detail; Retry-After (whole seconds)
 * counts when the document names no wait.
 */
export declare function readProblem(status: number, body: string, retryAfterHeader: string | null): ProblemError;
/** badRequest is the error of bad input refused before anything is sent. */
export declare function badRequest(detail: string, field?: string, cause?: unknown): BadRequestError;
/**
 * EffectUnknown is for the function do() runs: throw it (or an error whose
 * cause chain holds one) when you cannot tell whether the effect happened
 * (the provider timed out mid-call). do() then reports nothing: the key
 * stays held until its lease passes, then it is in_doubt and is never
 * granted again until someone checks the tool's side and resolves it.
 * The ledger never answers with it. (Go's client.ErrEffectUnknown.)
 */
export declare class EffectUnknown extends Error {
    constructor(message?: string, options?: {
        cause?: unknown;
    });
}
/**
 * isEffectUnknown reports whether err is, or has in its cause chain, an
 * EffectUnknown (also one from another copy of this package).
 */
export declare function isEffectUnknown(err: unknown): boolean;
/**
 * ReportError: the effect ran (effect.ran is true) but do() could not record
 * its outcome as it should: effect.status is undefined when nothing was
 * recorded (the cause says why: FencedError when the grant moved on,
 * OutcomeUnknownError, ...; the intent turns in_doubt unless a retry lands),
 * or "executed" when it was recorded without its result (the result was not
 * JSON or the ledger refused it). Do not run the effect again.
 */
export declare class ReportError extends IntentdError {
    readonly effect: EffectResult;
    constructor(message: string, effect: EffectResult, cause: unknown);
}
