export { Client, DEFAULTS, MAX_LONG_POLL_MS, normalizeAddr, once, validTraceparent } from "./client.js";
export type { CallOptions, ClientOptions, DoOptions, Effect, EffectFn, FetchFn, GetOptions, ListOptions, OnceCallOptions, OnceContext, OnceOptions, } from "./client.js";
export { BadRequestError, BadSnapshotError, BlockedError, DivergentError, EffectUnknown, FencedError, ForbiddenError, InDoubtError, InFlightError, IntentdError, InvalidStateError, LedgerFullError, NamespaceFullError, NoLeaderError, NotEmptyError, NotFoundError, NotGrantHolderError, OutcomeUnknownError, PendingApprovalError, ProblemError, RateLimitedError, RejectedError, ReportError, SelfApprovalError, TokenExpiredError, TokenInvalidError, TokenToolForbiddenError, TokenUsedError, TokenWrongToolError, UnauthorizedError, UnavailableError, isEffectUnknown, problemFor, } from "./errors.js";
export type { ProblemInit } from "./errors.js";
export { KEY_SEPARATOR, MAX_KEY_BYTES, isPrintable, key, keyOf, validateKey } from "./keys.js";
export { PRINTABLE_UNICODE_VERSION } from "./printable.js";
export { newOwner } from "./util.js";
export type { Approval, AuditEvent, AuditHead, AuditLogPage, AuditRecord, AuditTrail, ClaimRequest, ClaimResponse, ClusterStatus, CommitRequest, CompleteRequest, DecisionRequest, EffectResult, Grant, Health, Intent, IntentResponse, ListPage, NodeStatus, Outcome, Policy, RenewRequest, ResolveRequest, Settings, State, Status, TokenClaims, TokenVerification, } from "./types.js";
