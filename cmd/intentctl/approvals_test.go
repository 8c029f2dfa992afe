package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

func TestApprovalFlow(t *testing.T) {
	e := newEnv(t)
	expect(t, e.run(t, "policy", "put", "payments", "--tools", "payments.*", "--require-approval", "--approvals", "2"), exitOK)
	claim := []string{"claim", "charge:ord_7", "--tool", "payments.charge", "--payload", `{"amount":700}`, "--owner", "agent-1"}
	expect(t, e.run(t, claim...), exitOK, "pending_approval")

	var in client.IntentResponse
	e.jsonOut(t, &in, "get", "charge:ord_7")
	fp := in.Intent.Fingerprint
	expect(t, e.run(t, "approvals"), exitOK, "KEY", "charge:ord_7", "payments.charge", "0/2", fp[:12])
	var page client.ListPage
	e.jsonOut(t, &page, "approvals", "--limit", "10")
	if len(page.Intents) != 1 || page.Intents[0].State != client.StatePendingApproval {
		t.Fatalf("approvals json = %+v", page)
	}

	// A decision bound to another payload's fingerprint is refused.
	wrong := strings.Repeat("0", len(fp))
	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "alice", "--fingerprint", wrong), exitDivergent)
	expect(t, e.run(t, "reject", "charge:ord_7", "--actor", "alice", "--fingerprint", wrong), exitDivergent)

	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "alice", "--fingerprint", fp, "--reason", "looks right"),
		exitOK, "pending_approval")
	expect(t, e.run(t, "approvals"), exitOK, "1/2", "alice")
	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "alice"), exitRefused) // already approved by alice

	// A long-poll wakes up on the second approval.
	e.jsonOut(t, &in, "get", "charge:ord_7")
	done := make(chan result, 1)
	go func() {
		var out, errOut strings.Builder
		code := run(context.Background(), []string{"--addr", e.addr, "--retries", "0", "wait", "charge:ord_7",
			"--after-version", fmt.Sprint(in.Intent.Version), "--wait", "20s"}, &out, &errOut)
		done <- result{code: code, stdout: out.String(), stderr: errOut.String()}
	}()
	ledgertest.AwaitWaiting(t, e.svc, 1) // the approval must wake a waiting long-poll
	expect(t, e.run(t, "approve", "charge:ord_7", "--actor", "bob", "--fingerprint", fp), exitOK, "approved")
	select {
	case r := <-done:
		expect(t, r, exitOK, "changed", "true", "approved")
	case <-time.After(15 * time.Second):
		t.Fatal("wait did not answer after the approval")
	}
	expect(t, e.run(t, "approvals"), exitOK)
	if r := e.run(t, "approvals"); strings.Contains(r.stdout, "charge:ord_7") {
		t.Errorf("an approved intent is still listed:\n%s", r)
	}
	// Nothing changes after the current version: the wait times out with
	// the intent as it is.
	e.jsonOut(t, &in, "get", "charge:ord_7")
	expect(t, e.run(t, "wait", "charge:ord_7", "--after-version", fmt.Sprint(in.Intent.Version), "--wait", "50ms"),
		exitOK, "changed", "false", "approved")
	expect(t, e.run(t, "wait", "missing", "--wait", "0s"), exitNotFound)

	expect(t, e.run(t, claim...), exitOK, "granted", "gex_")

	// Rejection.
	expect(t, e.run(t, "claim", "charge:ord_8", "--tool", "payments.charge", "--payload", "{}"), exitOK, "pending_approval")
	expect(t, e.run(t, "reject", "charge:ord_8", "--actor", "carol", "--reason", "no"), exitOK, "rejected")
	expect(t, e.run(t, "claim", "charge:ord_8", "--tool", "payments.charge", "--payload", "{}"), exitRefused)
}
