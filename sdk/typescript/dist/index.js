// intentd: the TypeScript SDK of the intent ledger, the at-most-once gate in
// front of side-effecting tool calls. See README.md.
export { Client, DEFAULTS, MAX_LONG_POLL_MS, normalizeAddr, once, validTraceparent } from "./client.js";
export { BadRequestError, BadSnapshotError, BlockedError, DivergentError, EffectUnknown, FencedError, ForbiddenError, InDoubtError, InFlightError, IntentdError, InvalidStateError, LedgerFullError, NamespaceFullError, NoLeaderError, NotEmptyError, NotFoundError, NotGrantHolderError, OutcomeUnknownError, PendingApprovalError, ProblemError, RateLimitedError, RejectedError, ReportError, SelfApprovalError, TokenExpiredError, TokenInvalidError, TokenToolForbiddenError, TokenUsedError, TokenWrongToolError, UnauthorizedError, UnavailableError, isEffectUnknown, problemFor, } from "./errors.js";
export { KEY_SEPARATOR, MAX_KEY_BYTES, isPrintable, key, keyOf, validateKey } from "./keys.js";
export { PRINTABLE_UNICODE_VERSION } from "./printable.js";
export { newOwner } from "./util.js";
