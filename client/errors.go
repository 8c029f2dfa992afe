package client

import (
	"errors"
)

// Sentinel errors. A *Problem matches them with errors.Is by its code; a
// transport failure wraps ErrOutcomeUnknown (a write that was sent) or
// ErrUnavailable. Errors returned by Do wrap them too, and wrap the
// *Problem (errors.As) when the ledger answered.
var (
	// ErrInFlight: another owner holds the lease; do not execute.
	ErrInFlight = errors.New("intent is in flight under another owner")
	// ErrInDoubt: the lease passed without a report; resolve the intent.
	ErrInDoubt = errors.New("intent is in doubt")
	// ErrDivergent: the payload differs from the recorded one.
	ErrDivergent = errors.New("payload differs from the recorded intent")
	// ErrFenced: a stale owner or fencing token.
	ErrFenced = errors.New("stale owner or fencing token")
	// ErrRejected: an approver rejected the intent.
	ErrRejected = errors.New("intent was rejected")
	// ErrPendingApproval: the intent waits for an approver; do not
	// execute. A claim answers it as a success (202), which Do turns into
	// this error.
	ErrPendingApproval = errors.New("intent is pending approval")
	// ErrNotFound: no intent under the key.
	ErrNotFound = errors.New("intent not found")
	// ErrInvalidState: the call does not fit the intent's state.
	ErrInvalidState = errors.New("operation not allowed in the intent's state")
	// ErrBadRequest: bad input (400, 413, 422 other than divergent);
	// nothing was written.
	ErrBadRequest = errors.New("bad request")
	// ErrOutcomeUnknown: a write may or may not have been applied; retry
	// the same request to learn which.
	ErrOutcomeUnknown = errors.New("outcome unknown")
	// ErrNoLeader: the cluster has no leader (or the node could not reach
	// it); nothing was written.
	ErrNoLeader = errors.New("no leader")
	// ErrUnavailable: the request could not be served; nothing was
	// written.
	ErrUnavailable = errors.New("unavailable")
	// ErrEffectUnknown is for the function Do runs: return an error
	// wrapping it when you cannot tell whether the effect happened (the
	// provider timed out mid-call). Do then reports nothing, so the key is
	// not granted again: its lease passes, the intent turns in_doubt and
	// must be resolved after checking the tool's side. The ledger never
	// answers with it.
	ErrEffectUnknown = errors.New("whether the effect happened is unknown")

	// ErrBlocked: the policy that selects the tool blocks it.
	ErrBlocked = errors.New("the policy blocks this tool")
	// ErrTokenUsed: the execution token was already verified once.
	ErrTokenUsed = errors.New("execution token already used")
	// ErrTokenExpired: the execution token's lifetime passed.
	ErrTokenExpired = errors.New("execution token expired")
	// ErrTokenInvalid: the execution token is forged, malformed, signed by
	// an unknown key, or does not bind the payload or the current grant.
	ErrTokenInvalid = errors.New("execution token is not valid")
	// ErrUnauthorized: no valid API key, or its roles do not allow the
	// call.
	ErrUnauthorized = errors.New("not authorized")
	// ErrNotGrantHolder: the grant is bound to the API key that claimed
	// it, and this client's key is another one without the reconciler
	// role; nothing was written beyond the audit trail. Do not retry
	// with this key. It also matches ErrUnauthorized.
	ErrNotGrantHolder = errors.New("the grant is bound to another API key")
	// ErrSelfApproval: the approving key is the one that claimed the
	// intent, and its policy does not set allow_self_approval; another
	// approver must decide. It also matches ErrUnauthorized.
	ErrSelfApproval = errors.New("the claimant may not approve its own intent")
	// ErrRateLimited: the node refused the call under its per-client or
	// per-key rate limit, or its namespace's claims per second (429);
	// nothing was written. The client waits the
	// Retry-After and sends it again, like any call the cluster could not
	// serve yet.
	ErrRateLimited = errors.New("rate limited")
	// ErrBadSnapshot: a snapshot failed its checks: the cluster refused to
	// restore it (422 bad_snapshot), or what a download brought is not a
	// snapshot. Nothing was restored.
	ErrBadSnapshot = errors.New("bad snapshot")
	// ErrNotEmpty: the cluster's ledger holds intents, so it refused a
	// restore without force (409 not_empty); nothing was restored.
	ErrNotEmpty = errors.New("the ledger is not empty")
	// ErrNamespaceFull: the claim would add an intent to a namespace that
	// holds its quota of intents (507 namespace_full); nothing was
	// written. Claims of keys it holds, reports and reads are served;
	// retry once intents were purged.
	ErrNamespaceFull = errors.New("the namespace holds its quota of intents")
	// ErrLedgerFull: the claim would add an intent while the leader is
	// past a capacity (507 ledger_full: free disk under its reserve, data
	// dir over its cap, or live heap over its memory's high water);
	// nothing was written. Claims of keys the ledger holds, reports and
	// reads are served; claims of new keys are admitted again once there
	// is room (purges, an operator), at no promised time.
	ErrLedgerFull = errors.New("the ledger is full")
)

// sentinelCodes maps each sentinel to the problem codes it stands for.
var sentinelCodes = map[error][]string{
	ErrInFlight:        {"in_flight"},
	ErrInDoubt:         {"in_doubt"},
	ErrDivergent:       {"divergent"},
	ErrFenced:          {"fenced"},
	ErrRejected:        {"rejected"},
	ErrPendingApproval: {"pending_approval"},
	ErrNotFound:        {"not_found", "policy_not_found", "unknown_peer"},
	ErrInvalidState:    {"invalid_state", "not_pending_approval", "already_approved", "version_mismatch", "peer_is_leader", "no_live_majority", "not_voter", "signing_key_in_use"},
	ErrBadRequest:      {"bad_request", "too_large", "unprocessable", "unknown_policy", "policy_mismatch"},
	ErrBlocked:         {"blocked"},
	ErrTokenUsed:       {"token_used"},
	ErrTokenExpired:    {"token_expired"},
	ErrTokenInvalid:    {"token_invalid", "token_mismatch"},
	ErrUnauthorized:    {"unauthenticated", "forbidden", "not_an_approver", "not_grant_holder", "self_approval", "key_reserved"},
	ErrNotGrantHolder:  {"not_grant_holder"},
	ErrSelfApproval:    {"self_approval"},
	ErrOutcomeUnknown:  {"outcome_unknown"},
	ErrNoLeader:        {"no_leader", "not_leader"},
	ErrUnavailable:     {"unavailable", "shutting_down", "not_ready"},
	ErrRateLimited:     {"rate_limited", "namespace_rate_limited"},
	ErrNamespaceFull:   {"namespace_full"},
	ErrLedgerFull:      {"ledger_full"},
	ErrBadSnapshot:     {"bad_snapshot"},
	ErrNotEmpty:        {"not_empty"},
}

// retryableCodes are 503 answers after which the same request may be sent
// again.
var retryableCodes = []string{"no_leader", "not_leader", "outcome_unknown", "shutting_down", "unavailable", "not_ready"}
