package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
)

func TestAuditLogExportVerify(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		token := e.claim(t, fmt.Sprintf("job:%d", i), "o")
		expect(t, e.run(t, "complete", fmt.Sprintf("job:%d", i), "--owner", "o", "--token", fmt.Sprint(token),
			"--outcome", "executed"), exitOK)
	}
	// An event with characters JSON encoders like to escape.
	expect(t, e.run(t, "claim", "a<b>&c", "--tool", "t", "--payload", "{}"), exitOK)

	r := e.run(t, "audit-log", "--limit", "2")
	expect(t, r, exitOK, "SEQ", "HASH", "claim", "job:0", "next: --since 3")
	var page client.AuditLogPage
	e.jsonOut(t, &page, "audit-log")
	n := len(page.Events)
	if n < 7 || page.Head.LastSeq != page.Events[n-1].Seq {
		t.Fatalf("audit-log json: %d events, head %+v", n, page.Head)
	}

	expect(t, e.run(t, "audit-log", "verify"), exitOK, fmt.Sprintf("verified %d events, seq 1..%d, head hash %s", n, n, page.Head.LastHash))

	dir := t.TempDir()
	export := func(args ...string) (string, []string) {
		t.Helper()
		r := e.run(t, append([]string{"audit-log", "export"}, args...)...)
		expect(t, r, exitOK)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		file := filepath.Join(dir, fmt.Sprintf("export-%d.jsonl", len(lines)))
		if err := os.WriteFile(file, []byte(r.stdout), 0o600); err != nil {
			t.Fatal(err)
		}
		return file, lines
	}
	file, lines := export()
	if len(lines) != n+1 || !strings.HasPrefix(lines[0], `{"head":`) {
		t.Fatalf("export: %d lines, first %q", len(lines), lines[0])
	}
	for i, line := range lines[1:] {
		var rec client.AuditRecord
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Seq != page.Events[i].Seq ||
			string(rec.Event) != string(page.Events[i].Event) {
			t.Fatalf("export line %d = %s (%v)", i+2, line, err)
		}
	}
	expect(t, e.run(t, "audit-log", "verify", "--file", file), exitOK, fmt.Sprintf("verified %d events, seq 1..%d", n, n))
	var res verified
	e.jsonOut(t, &res, "audit-log", "verify", "--file", file)
	if !res.OK || res.Verified != n || res.HeadHash != page.Head.LastHash {
		t.Errorf("verify json = %+v", res)
	}

	// A partial export verifies from its first event on.
	partial, plines := export("--since", "3")
	if len(plines) != n-1 {
		t.Fatalf("export --since 3: %d lines", len(plines))
	}
	expect(t, e.run(t, "audit-log", "verify", "--file", partial), exitOK, fmt.Sprintf("verified %d events, seq 3..%d", n-2, n), "partial")
	expect(t, e.run(t, "audit-log", "verify", "--since", "3"), exitOK, "partial")

	tamper := func(name string, edit func([]string) []string) string {
		out := edit(slices.Clone(lines))
		f := filepath.Join(dir, name+".jsonl")
		if err := os.WriteFile(f, []byte(strings.Join(out, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		name string
		edit func([]string) []string
		seq  string
	}{
		{"altered event", func(l []string) []string {
			l[3] = strings.Replace(l[3], `"owner":"o"`, `"owner":"x"`, 1)
			return l
		}, "seq 3"},
		{"altered hash and event", func(l []string) []string {
			// Recomputing one event's hash still breaks the next one's prev.
			var rec client.AuditRecord
			_ = json.Unmarshal([]byte(l[2]), &rec)
			rec.Event = json.RawMessage(strings.Replace(string(rec.Event), `"op":"complete"`, `"op":"claim"`, 1))
			rec.Hash = auth.HashKey(string(rec.Event))
			data, _ := json.Marshal(rec)
			l[2] = string(data)
			return l
		}, "seq 3"},
		{"deleted event", func(l []string) []string { return slices.Delete(l, 4, 5) }, "seq 5"},
		{"deleted first event", func(l []string) []string { return slices.Delete(l, 1, 2) }, "seq 2"},
		{"deleted last event", func(l []string) []string { return l[:len(l)-1] }, fmt.Sprintf("seq %d", n-1)},
		{"swapped events", func(l []string) []string {
			l[2], l[3] = l[3], l[2]
			return l
		}, "seq 3"},
		{"broken line", func(l []string) []string {
			l[5] = l[5][:20]
			return l
		}, "line 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tamper(strings.ReplaceAll(tc.name, " ", "-"), tc.edit)
			if tc.name == "altered event" && !strings.Contains(lines[3], `"owner":"o"`) {
				t.Fatalf("line 4 has no owner to alter: %s", lines[3])
			}
			r := e.run(t, "audit-log", "verify", "--file", f)
			expect(t, r, exitChainBroken)
			if !strings.Contains(r.stderr, "audit chain broken") || !strings.Contains(r.stderr, tc.seq) {
				t.Errorf("stderr does not name %s:\n%s", tc.seq, r)
			}
			r = e.run(t, "audit-log", "verify", "--file", f, "--output", "json")
			expect(t, r, exitChainBroken, `"ok": false`, tc.seq)
		})
	}
}
