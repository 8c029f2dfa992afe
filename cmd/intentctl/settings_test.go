package main

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/intentledger/intentd/client"
)

func TestSettings(t *testing.T) {
	e := newEnv(t)
	expect(t, e.run(t, "settings"), exitOK, "audit_retention", "0 (the default")
	expect(t, e.run(t, "settings", "set", "--audit-retention", "5"), exitOK, "audit_retention", "5")
	var st map[string]int
	e.jsonOut(t, &st, "settings")
	if st["audit_retention"] != 5 {
		t.Errorf("settings json = %v", st)
	}
	// Retention shows in the audit log: only the last 5 events are kept,
	// and the rest still verifies from the head's anchor.
	for i := range 8 {
		e.claim(t, fmt.Sprintf("k%d", i), "o")
	}
	var page client.AuditLogPage
	e.jsonOut(t, &page, "audit-log")
	if len(page.Events) != 5 || page.Head.Dropped == 0 {
		t.Errorf("after retention 5: %d events, head %+v", len(page.Events), page.Head)
	}
	expect(t, e.run(t, "audit-log", "verify"), exitOK, "verified 5 events")
	expect(t, e.run(t, "settings", "set", "--audit-retention", "20000000"), exitUsage)

	dead := httptest.NewServer(nil)
	dead.Close()
	expect(t, runCLI(t, "--addr", dead.URL, "settings"), exitUnavailable)
	// The next address answers when the first cannot.
	expect(t, runCLI(t, "--addr", dead.URL+","+e.addr, "settings"), exitOK, "5")
}
