package idemproxy

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/intentledger/intentd/client"
)

// Recording is what the proxy reports to the ledger about an upstream
// answer.
type Recording int

// The recordings.
const (
	// RecordExecuted: complete executed with the answer; retries replay it.
	RecordExecuted Recording = iota
	// RecordFailed: complete failed; the next request with the key runs
	// again.
	RecordFailed
	// RecordNothing: no report; the lease passes and the key turns
	// in_doubt.
	RecordNothing
)

// Decide says how to record an upstream answer of status on a route whose
// 5xx policy is on: every answer below 500 (4xx included) is executed and
// replayed; a 5xx follows on.
func Decide(status int, on On5xx) Recording {
	if status < 500 {
		return RecordExecuted
	}
	switch on {
	case On5xxRetry:
		return RecordFailed
	case On5xxInDoubt:
		return RecordNothing
	}
	return RecordExecuted
}

// maxInFlightRetryAfter caps the Retry-After of in-flight answers: the
// ledger's is the rest of the holder's lease (up to client.DefaultLease by default), but
// most requests answer long before their lease would pass.
const maxInFlightRetryAfter = 5 * time.Second

// ClaimProblem turns a claim that did not grant (an SDK error) into the
// client's problem and the metrics result. unsettled says the claim never
// got a definite answer; unknown that it may have been granted.
func ClaimProblem(err error, ledgerKey string) (*Problem, Result) {
	var lp *client.Problem
	errors.As(err, &lp)
	var intent *client.Intent
	if lp != nil {
		intent = lp.Intent
	}
	with := func(p *Problem) *Problem {
		p.LedgerKey, p.Intent = ledgerKey, viewOf(intent)
		return p
	}
	if u := (*client.UnsettledError)(nil); errors.As(err, &u) {
		if u.MaybeGranted {
			return with(NewProblem(CodeOutcomeUnknown, "the ledger did not answer the claim in time and it may have been applied; "+
					"nothing was sent to the upstream. Retry with the same Idempotency-Key: it is safe. ("+u.Last.Error()+")")).RetryAfter(0),
				ResultOutcomeUnknown
		}
		return with(NewProblem(CodeLedgerUnavailable, "the ledger could not be reached; nothing was claimed or sent. "+
			"Retry with the same Idempotency-Key. ("+u.Last.Error()+")")).RetryAfter(0), ResultLedgerUnavailable
	}
	switch {
	case errors.Is(err, client.ErrInFlight):
		holder, retryAfter := "", time.Duration(0)
		if intent != nil {
			holder = fmt.Sprintf(" (owner %q)", intent.Owner)
		}
		if lp != nil {
			retryAfter = lp.RetryAfter
		}
		return with(NewProblem(CodeInFlight, "another request with this Idempotency-Key is being processed"+holder+
			"; retry after Retry-After to get its answer")).RetryAfter(min(retryAfter, maxInFlightRetryAfter)), ResultInFlight
	case errors.Is(err, client.ErrInDoubt):
		return with(NewProblem(CodeInDoubt, "an earlier request with this Idempotency-Key was sent to the upstream and no answer was recorded, "+
			"so whether it acted is unknown; it is never sent again automatically. Check the upstream and resolve the intent "+
			"(intentctl resolve "+ledgerKey+" --outcome executed|failed ...)")), ResultInDoubt
	case errors.Is(err, client.ErrDivergent):
		p := with(NewProblem(CodeFingerprintMismatch, "this Idempotency-Key was first used with another request (method, path, query, "+
			"body or fingerprint headers differ); the first request's answer stays replayable to that request"))
		if lp != nil {
			p.Fingerprint, p.RequestFingerprint = lp.Fingerprint, lp.RequestFingerprint
		}
		return p, ResultMismatch
	case errors.Is(err, client.ErrRejected):
		return with(NewProblem(CodeRejected, "an approver rejected the request made under this Idempotency-Key")), ResultRejected
	case errors.Is(err, client.ErrBlocked):
		return with(NewProblem(CodeBlocked, err.Error())), ResultRejected
	}
	if KeyReserved(err) {
		return with(NewProblem(CodeLedgerRefused, "the ledger refused the proxy's claim: keys under the proxy's prefix "+
			LedgerKeyPrefix+" are reserved to another API key of the namespace and the proxy's own API key (--api-key) does not "+
			"list the prefix. Nothing was sent to the upstream. The operator must give the proxy's key \"key_prefixes\": [\""+
			LedgerKeyPrefix+"\"] in the ledger's keys file (docs/proxy.md). ("+err.Error()+")")), ResultLedgerRefused
	}
	return with(NewProblem(CodeLedgerRefused, "the ledger refused the claim: "+err.Error())).WithStatus(http.StatusBadGateway), ResultLedgerRefused
}

// codeKeyReserved is the ledger's 403 problem code for a claim of a key
// under a prefix another API key of the namespace reserves
// (key_prefixes in the ledger's keys file).
const codeKeyReserved = "key_reserved"

// KeyReserved reports whether err is the ledger's 403 key_reserved: the
// proxy's own API key does not hold the prefix its keys are under, which
// another key reserves. A configuration error of the proxy, never of the
// client.
func KeyReserved(err error) bool {
	var lp *client.Problem
	return errors.As(err, &lp) && lp.Code == codeKeyReserved
}
