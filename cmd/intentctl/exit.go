package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/intentledger/intentd/client"
)

// Exit codes; "intentctl help" documents them.
const (
	exitOK           = 0 // granted, duplicate, ok, pending_approval
	exitError        = 1 // any other error
	exitUsage        = 2 // usage or bad input (400, 413, 422 except divergent)
	exitInFlight     = 3
	exitDivergent    = 4
	exitInDoubt      = 5
	exitFenced       = 6
	exitNotFound     = 7
	exitUnavailable  = 8  // 503, network errors, outcome unknown
	exitRefused      = 9  // rejected, blocked, invalid state or namespace full
	exitUnauthorized = 10 // 401, 403 forbidden, not an approver
	exitTokenRefused = 11 // execution token used, expired or invalid
	exitChainBroken  = 12 // audit log hash chain does not verify
)

// fail reports err and returns its exit code.
func (c *cli) fail(err error) int {
	code := exitCode(err)
	var p *client.Problem
	if c.output == "json" && errors.As(err, &p) {
		c.printJSON(p)
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "intentctl: %v\nRun 'intentctl help' for usage.\n", err)
	case errors.As(err, &p):
		fmt.Fprintf(c.stderr, "intentctl: %s (%d): %s\n", p.Code, p.Status, p.Title)
		if p.Detail != "" {
			fmt.Fprintf(c.stderr, "  detail: %s\n", p.Detail)
		}
		if p.RequestFingerprint != "" {
			fmt.Fprintf(c.stderr, "  recorded fingerprint: %s\n  request fingerprint:  %s\n", p.Fingerprint, p.RequestFingerprint)
		}
		if p.Intent != nil {
			fmt.Fprintf(c.stderr, "  intent: state %s, owner %q, fencing token %d\n", p.Intent.State, p.Intent.Owner, p.Intent.FencingToken)
		}
		if p.RetryAfter > 0 {
			fmt.Fprintf(c.stderr, "  retry after: %v\n", p.RetryAfter)
		}
		if err != error(p) {
			fmt.Fprintf(c.stderr, "  (%v)\n", err)
		}
	default:
		fmt.Fprintf(c.stderr, "intentctl: %v\n", err)
		if client.ClientCertRefused(err) {
			fmt.Fprintf(c.stderr, "  the node refused this client's TLS certificate (or its lack of one): give --cert and --key "+
				"(or INTENTCTL_CERT, INTENTCTL_KEY) signed by the node's client CA (--tls-client-ca)\n")
		}
	}
	return code
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ue *usageError
	var p *client.Problem
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case client.ClientCertRefused(err): // before ErrUnavailable, which wraps it
		return exitUnauthorized
	case errors.Is(err, client.ErrOutcomeUnknown), errors.Is(err, client.ErrNoLeader),
		errors.Is(err, client.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	case errors.Is(err, client.ErrInFlight):
		return exitInFlight
	case errors.Is(err, client.ErrDivergent):
		return exitDivergent
	case errors.Is(err, client.ErrInDoubt):
		return exitInDoubt
	case errors.Is(err, client.ErrFenced):
		return exitFenced
	case errors.Is(err, client.ErrNotFound):
		return exitNotFound
	case errors.Is(err, client.ErrRejected), errors.Is(err, client.ErrBlocked), errors.Is(err, client.ErrInvalidState),
		errors.Is(err, client.ErrNamespaceFull), errors.Is(err, client.ErrLedgerFull):
		return exitRefused
	case errors.Is(err, client.ErrBadRequest):
		return exitUsage
	case errors.Is(err, client.ErrUnauthorized):
		return exitUnauthorized
	case errors.Is(err, client.ErrTokenUsed), errors.Is(err, client.ErrTokenExpired), errors.Is(err, client.ErrTokenInvalid):
		return exitTokenRefused
	case errors.Is(err, client.ErrChainBroken):
		return exitChainBroken
	case errors.As(err, &p) && p.Status == 503:
		return exitUnavailable
	case errors.As(err, &p) && (p.Status == 401 || p.Status == 403):
		return exitUnauthorized
	}
	return exitError
}
