// Error classes: the TypeScript form of client/errors.go's sentinels. A
// problem document (RFC 9457) becomes a ProblemError subclass chosen by its
// code, exactly as client/errors.go's sentinelCodes map them, so
// `err instanceof InFlightError` is Go's errors.Is(err, client.ErrInFlight).

import type { EffectResult, Intent } from "./types.js";
import { intentFromWire } from "./types.js";

/** Base class of every error the SDK throws (EffectUnknown aside, which your function throws). */
export class IntentdError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
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
export class ProblemError extends IntentdError {
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

  constructor(init: ProblemInit) {
    super(problemMessage(init), init.cause === undefined ? undefined : { cause: init.cause });
    this.status = init.status;
    this.code = init.code;
    this.title = init.title ?? "";
    this.detail = init.detail ?? "";
    this.type = init.type ?? "";
    this.field = init.field ?? "";
    this.intent = init.intent;
    this.retryAfterMs = init.retryAfterMs ?? 0;
    this.fingerprint = init.fingerprint ?? "";
    this.requestFingerprint = init.requestFingerprint ?? "";
  }

  /** The problem's fields, for logging (JSON.stringify of an Error is otherwise {}). */
  toJSON(): Record<string, unknown> {
    const out: Record<string, unknown> = { name: this.name, status: this.status, code: this.code, title: this.title };
    if (this.detail) out.detail = this.detail;
    if (this.type) out.type = this.type;
    if (this.field) out.field = this.field;
    if (this.intent) out.intent = this.intent;
    if (this.retryAfterMs) out.retryAfterMs = this.retryAfterMs;
    if (this.fingerprint) out.fingerprint = this.fingerprint;
    if (this.requestFingerprint) out.requestFingerprint = this.requestFingerprint;
    return out;
  }
}

function problemMessage(p: ProblemInit): string {
  let msg = `${p.status} ${p.code}`;
  if (p.title) msg += `: ${p.title}`;
  if (p.detail) msg += `: ${p.detail}`;
  return msg;
}

/** in_flight (409): another owner holds the lease; do not execute. Wait retryAfterMs and claim again with the same owner. */
export class InFlightError extends ProblemError {}
/** in_doubt (409): the lease passed without a report; check the tool's side, then resolve. */
export class InDoubtError extends ProblemError {}
/** divergent (422): same key, different tool or payload; never execute. */
export class DivergentError extends ProblemError {}
/** fenced (409): a stale owner or fencing token; you no longer hold the intent. */
export class FencedError extends ProblemError {}
/** rejected (403): an approver rejected the intent. */
export class RejectedError extends ProblemError {}
/** pending_approval: the intent waits for an approver; do not execute (do() throws it when its approval wait ends). */
export class PendingApprovalError extends ProblemError {}
/** not_found, policy_not_found (404). */
export class NotFoundError extends ProblemError {}
/** invalid_state, not_pending_approval, already_approved, version_mismatch (409): the call does not fit the state. */
export class InvalidStateError extends ProblemError {}
/** bad_request (400), too_large (413), unprocessable, unknown_policy (422); also bad input refused locally (status 0). Nothing was written. */
export class BadRequestError extends ProblemError {}
/** blocked (403): the policy that selects the tool blocks it. */
export class BlockedError extends ProblemError {}
/** token_used (409): the execution token was already verified once. */
export class TokenUsedError extends ProblemError {}
/** token_expired (410). */
export class TokenExpiredError extends ProblemError {}
/** token_invalid, token_mismatch (422). */
export class TokenInvalidError extends ProblemError {}
/**
 * token_wrong_tool (422): verifyToken named the tool about to run (`tool`) and the execution token was granted for
 * another one. Nothing was written: the token was not spent, and the tool it is for can still verify it. Do not act
 * on it. (Go's ErrTokenWrongTool, which also matches ErrTokenInvalid.)
 */
export class TokenWrongToolError extends TokenInvalidError {}
/** Not authorized: unauthenticated (401), and every 403 below (ForbiddenError), as Go's ErrUnauthorized. */
export class UnauthorizedError extends ProblemError {}
/** forbidden, not_an_approver (403), and the two subclasses: the key is valid but may not do this. */
export class ForbiddenError extends UnauthorizedError {}
/** not_grant_holder (403): the grant is bound to another API key; do not retry with this key. */
export class NotGrantHolderError extends ForbiddenError {}
/** self_approval (403): the claimant may not approve its own intent. */
export class SelfApprovalError extends ForbiddenError {}
/**
 * token_tool_forbidden (403): the client's API key is bound to tools (its `tools` in the key configuration) that do
 * not include the execution token's. The token was not spent. Do not act on it. (Go's ErrTokenToolForbidden, which
 * also matches ErrUnauthorized.)
 */
export class TokenToolForbiddenError extends ForbiddenError {}
/**
 * outcome_unknown (503), a 502/504 to a write, or a write whose answer was lost
 * (status 0): it may or may not have been applied. Retry the same request.
 */
export class OutcomeUnknownError extends ProblemError {}
/** unavailable, shutting_down, not_ready (503), or no answer to a read (status 0): nothing was written; retry. */
export class UnavailableError extends ProblemError {}
/** no_leader, not_leader (503): nothing was written; retry. (Go's ErrNoLeader; here also an UnavailableError.) */
export class NoLeaderError extends UnavailableError {}
/**
 * rate_limited, namespace_rate_limited (429): nothing was written; the client waits Retry-After out by itself, for up
 * to rateLimitWaitMs. (namespace_rate_limited: the claim's namespace is over its quota of claims per second.)
 */
export class RateLimitedError extends ProblemError {}
/**
 * namespace_full (507): the claim would add an intent to a namespace that holds its quota of intents; nothing was
 * written, and do() does not run the effect. Not retried: claims of keys the namespace holds, reports and reads are
 * still served; claim again once intents were purged. (Go's ErrNamespaceFull.)
 */
export class NamespaceFullError extends ProblemError {}
/**
 * ledger_full (507): the claim would add an intent while the cluster's leader is past a capacity (free disk under its
 * reserve, data dir over its cap, or live heap over its memory's high water); nothing was written, and do() does not
 * run the effect. Not retried (no Retry-After is sent: room comes back with purges or an operator, at no promised
 * time): claims of keys the ledger holds, reports and reads are still served. (Go's ErrLedgerFull.)
 */
export class LedgerFullError extends ProblemError {}
/** bad_snapshot (422). */
export class BadSnapshotError extends ProblemError {}
/** not_empty (409). */
export class NotEmptyError extends ProblemError {}

type ProblemClass = new (init: ProblemInit) => ProblemError;

/** The class of each problem code: client/errors.go's sentinelCodes. */
const CODE_CLASSES: Record<string, ProblemClass> = {
  in_flight: InFlightError,
  in_doubt: InDoubtError,
  divergent: DivergentError,
  fenced: FencedError,
  rejected: RejectedError,
  pending_approval: PendingApprovalError,
  not_found: NotFoundError,
  policy_not_found: NotFoundError,
  invalid_state: InvalidStateError,
  not_pending_approval: InvalidStateError,
  already_approved: InvalidStateError,
  version_mismatch: InvalidStateError,
  bad_request: BadRequestError,
  too_large: BadRequestError,
  unprocessable: BadRequestError,
  unknown_policy: BadRequestError,
  blocked: BlockedError,
  token_used: TokenUsedError,
  token_expired: TokenExpiredError,
  token_invalid: TokenInvalidError,
  token_mismatch: TokenInvalidError,
  token_wrong_tool: TokenWrongToolError,
  token_tool_forbidden: TokenToolForbiddenError,
  unauthenticated: UnauthorizedError,
  forbidden: ForbiddenError,
  not_an_approver: ForbiddenError,
  not_grant_holder: NotGrantHolderError,
  self_approval: SelfApprovalError,
  outcome_unknown: OutcomeUnknownError,
  no_leader: NoLeaderError,
  not_leader: NoLeaderError,
  unavailable: UnavailableError,
  shutting_down: UnavailableError,
  not_ready: UnavailableError,
  rate_limited: RateLimitedError,
  namespace_rate_limited: RateLimitedError,
  namespace_full: NamespaceFullError,
  ledger_full: LedgerFullError,
  bad_snapshot: BadSnapshotError,
  not_empty: NotEmptyError,
};

/** problemFor returns the error of a problem: the subclass its code names, else ProblemError. */
export function problemFor(init: ProblemInit): ProblemError {
  const cls = Object.prototype.hasOwnProperty.call(CODE_CLASSES, init.code) ? CODE_CLASSES[init.code] : ProblemError;
  return new cls(init);
}

/** 503 codes after which the same request may be sent again (client/errors.go's retryableCodes). */
const RETRYABLE_CODES = new Set(["no_leader", "not_leader", "outcome_unknown", "shutting_down", "unavailable", "not_ready"]);

/** Whether the same request may be sent again after p (Problem.retryable). */
export function retryableProblem(p: ProblemError): boolean {
  switch (p.status) {
    case 0:
      return true;
    case 503:
      return p.code === "" || RETRYABLE_CODES.has(p.code);
    case 502:
    case 504:
    case 429:
      return true;
  }
  return false;
}

/** Whether a write that failed with err may have been applied (maybeApplied). */
export function maybeApplied(err: unknown): boolean {
  if (err instanceof OutcomeUnknownError) return true;
  if (err instanceof ProblemError) {
    return err.status === 502 || err.status === 504 || err.status === 500 || err.code === "outcome_unknown";
  }
  return false;
}

/** Whether err says the cluster could not answer, rather than a definite answer (transient). */
export function transient(err: unknown): boolean {
  if (err instanceof ProblemError) return retryableProblem(err) || err.status >= 500;
  return true;
}

/** Code of a problem that came without a document (from a proxy, say), by its status. */
function codeForStatus(status: number): string {
  switch (status) {
    case 400:
      return "bad_request";
    case 401:
      return "unauthenticated";
    case 403:
      return "forbidden";
    case 413:
      return "too_large";
    case 422:
      return "unprocessable";
    case 429:
      return "rate_limited";
    case 502:
    case 503:
    case 504:
      return "unavailable";
  }
  return "";
}

const STATUS_TEXT: Record<number, string> = {
  400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
  409: "Conflict", 410: "Gone", 413: "Request Entity Too Large", 422: "Unprocessable Entity",
  429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
  503: "Service Unavailable", 504: "Gateway Timeout", 507: "Insufficient Storage",
};

/**
 * readProblem decodes an error answer as client/problem.go does: a problem
 * document's fields as they are; a document without a code keeps its type,
 * title and detail and is named by its status, as is an answer without a
 * document, whose body (cut) is the detail; Retry-After (whole seconds)
 * counts when the document names no wait.
 */
export function readProblem(status: number, body: string, retryAfterHeader: string | null): ProblemError {
  const init: ProblemInit = { status, code: "" };
  let doc: Record<string, unknown> | undefined;
  try {
    const v: unknown = JSON.parse(body);
    if (v && typeof v === "object" && !Array.isArray(v)) doc = v as Record<string, unknown>;
  } catch {
    // not a document
  }
  if (doc && (isNonEmptyString(doc.code) || isNonEmptyString(doc.title) || isNonEmptyString(doc.type))) {
    init.code = str(doc.code);
    init.title = str(doc.title);
    init.detail = str(doc.detail);
    init.type = str(doc.type);
    init.field = str(doc.field);
    init.fingerprint = str(doc.fingerprint);
    init.requestFingerprint = str(doc.request_fingerprint);
    if (doc.intent && typeof doc.intent === "object") init.intent = intentFromWire(doc.intent);
    if (typeof doc.retry_after_ms === "number" && doc.retry_after_ms > 0) init.retryAfterMs = doc.retry_after_ms;
  } else {
    let detail = body.trim();
    if (detail.length > 200) detail = detail.slice(0, 200) + "...";
    init.detail = detail;
  }
  if (!init.code) init.code = codeForStatus(status);
  if (!init.title) init.title = STATUS_TEXT[status] ?? "";
  if (!init.retryAfterMs && retryAfterHeader && /^\s*\d+\s*$/.test(retryAfterHeader)) {
    const secs = parseInt(retryAfterHeader, 10);
    if (secs > 0) init.retryAfterMs = secs * 1000;
  }
  return problemFor(init);
}

function str(v: unknown): string {
  return typeof v === "string" ? v : "";
}

function isNonEmptyString(v: unknown): boolean {
  return typeof v === "string" && v !== "";
}

/** badRequest is the error of bad input refused before anything is sent. */
export function badRequest(detail: string, field?: string, cause?: unknown): BadRequestError {
  return new BadRequestError({ status: 0, code: "bad_request", title: "Bad request (refused locally)", detail, field, cause });
}

const EFFECT_UNKNOWN = Symbol.for("intentd.EffectUnknown");

/**
 * EffectUnknown is for the function do() runs: throw it (or an error whose
 * cause chain holds one) when you cannot tell whether the effect happened
 * (the provider timed out mid-call). do() then reports nothing: the key
 * stays held until its lease passes, then it is in_doubt and is never
 * granted again until someone checks the tool's side and resolves it.
 * The ledger never answers with it. (Go's client.ErrEffectUnknown.)
 */
export class EffectUnknown extends Error {
  constructor(message = "whether the effect happened is unknown", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "EffectUnknown";
    Object.defineProperty(this, EFFECT_UNKNOWN, { value: true });
  }
}

/**
 * isEffectUnknown reports whether err is, or has in its cause chain, an
 * EffectUnknown (also one from another copy of this package).
 */
export function isEffectUnknown(err: unknown): boolean {
  for (let e = err, depth = 0; e && typeof e === "object" && depth < 32; depth++) {
    if (e instanceof EffectUnknown || (e as Record<symbol, unknown>)[EFFECT_UNKNOWN] === true) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * ReportError: the effect ran (effect.ran is true) but do() could not record
 * its outcome as it should: effect.status is undefined when nothing was
 * recorded (the cause says why: FencedError when the grant moved on,
 * OutcomeUnknownError, ...; the intent turns in_doubt unless a retry lands),
 * or "executed" when it was recorded without its result (the result was not
 * JSON or the ledger refused it). Do not run the effect again.
 */
export class ReportError extends IntentdError {
  readonly effect: EffectResult;
  constructor(message: string, effect: EffectResult, cause: unknown) {
    super(message, { cause });
    this.effect = effect;
  }
}
