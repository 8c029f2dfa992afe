package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
)

func TestFullFlow(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "claim", "refund:ord_1", "--tool", "payments.refund", "--payload", `{"amount":100}`, "--owner", "agent-1")
	expect(t, r, exitOK, "granted (new)", "fencing_token", "execution_token", "gex_", "declared", "agent-1")

	token := e.claim(t, "refund:ord_1", "agent-1") // the same owner again gets the same grant
	e.mem.Advance(time.Second)
	expect(t, e.run(t, "renew", "refund:ord_1", "--owner", "agent-1", "--token", fmt.Sprint(token), "--lease", "1m"),
		exitOK, "status", "ok", epoch.Add(61*time.Second).Format(time.RFC3339))
	expect(t, e.run(t, "complete", "refund:ord_1", "--owner", "agent-1", "--token", fmt.Sprint(token),
		"--outcome", "executed", "--result", `{"refund_id":"re_1"}`), exitOK, "executed", `{"refund_id":"re_1"}`)
	expect(t, e.run(t, "commit", "refund:ord_1", "--owner", "agent-1"), exitOK, "committed")

	// A second delivery is a lookup: duplicate, exit 0, with the result.
	expect(t, e.run(t, "claim", "refund:ord_1", "--tool", "payments.refund", "--payload", `{ "amount": 100.0 }`),
		exitOK, "duplicate", `{"refund_id":"re_1"}`)

	expect(t, e.run(t, "get", "refund:ord_1"), exitOK, "committed", "refund:ord_1")
	expect(t, e.run(t, "get", "refund:ord_1", "--stale"), exitOK, "committed")
	r = e.run(t, "get", "refund:ord_1", "--output", "json")
	expect(t, r, exitOK)
	var got client.IntentResponse
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Intent.State != client.StateCommitted {
		t.Errorf("get json = %s (%v)", r.stdout, err)
	}

	r = e.run(t, "audit", "refund:ord_1")
	expect(t, r, exitOK, "INDEX", "claim", "renew", "complete", "commit", "duplicate")
	r = e.run(t, "audit", "refund:ord_1", "--output", "json")
	expect(t, r, exitOK, `"events"`, `"op": "commit"`)
}

func TestList(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		e.claim(t, fmt.Sprintf("job:%d", i), "o")
	}
	r := e.run(t, "list", "--prefix", "job:", "--limit", "2")
	expect(t, r, exitOK, "KEY", "job:0", "job:1", "next_cursor: job:1")
	if strings.Contains(r.stdout, "job:2") {
		t.Errorf("first page holds job:2:\n%s", r.stdout)
	}
	expect(t, e.run(t, "list", "--prefix", "job:", "--cursor", "job:1"), exitOK, "job:2")
	r = e.run(t, "list", "--state", "declared", "--output", "json")
	var page client.ListPage
	if err := json.Unmarshal([]byte(r.stdout), &page); err != nil || len(page.Intents) != 3 {
		t.Errorf("list json = %s (%v)", r, err)
	}
	expect(t, e.run(t, "list", "--state", "sleeping"), exitUsage)
}
