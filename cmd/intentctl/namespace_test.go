package main

import (
	"strings"
	"testing"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/ledger"
)

// TestNamespaceUsage: "namespace usage" shows what the key's namespace
// holds against its quota, in a table and as JSON; a claim past the
// quota exits 9 (namespace_full) and adds nothing.
func TestNamespaceUsage(t *testing.T) {
	e := newEnv(t)
	if err := e.svc.SetNamespaceQuotas(ledger.NamespaceQuotas{"default": {MaxIntents: 2, ClaimsPerSecond: 100, Burst: 10}}); err != nil {
		t.Fatal(err)
	}
	expect(t, e.run(t, "namespace", "usage"), exitOK, "default", "0 of 2", "100/s, burst 10")
	e.claim(t, "a", "o")
	e.claim(t, "b", "o")
	r := e.run(t, "claim", "c", "--tool", "payments.refund", "--payload", `{"amount":1}`, "--owner", "o")
	expect(t, r, exitRefused)
	if !strings.Contains(r.stderr, "namespace_full (507)") {
		t.Errorf("the refusal does not name namespace_full: %s", r)
	}
	expect(t, e.run(t, "namespace", "usage", "default"), exitOK, "2 of 2", "declared")
	var u client.NamespaceUsage
	e.jsonOut(t, &u, "namespace", "usage")
	if u.Namespace != "default" || u.Intents != 2 || u.ByState["declared"] != 2 || u.Bytes == 0 || u.Quota == nil || u.Quota.MaxIntents != 2 {
		t.Fatalf("usage json %+v", u)
	}
	expect(t, e.run(t, "namespace", "usage", "Bad"), exitUsage)
	expect(t, e.run(t, "namespace", "usage", "a", "b"), exitUsage)
	expect(t, e.run(t, "namespace"), exitUsage)
}
