package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// offline runs intentctl pointed at an address where nothing listens,
// with stdin: "audit verify" must not need the cluster.
func offline(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	code := runWith(context.Background(), append([]string{"--addr", "http://127.0.0.1:1", "--retries", "0"}, args...),
		strings.NewReader(stdin), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// mutations lists, for one export line, every offset whose byte can be
// changed into another one while the line stays JSON: a letter or digit
// inside a string (not the one after a backslash) or a digit of a number.
func mutations(line string) []int {
	var at []int
	inString, escaped := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inString && escaped:
			escaped = false
			continue
		case inString && c == '\\':
			escaped = true
			continue
		case c == '"':
			inString = !inString
			continue
		}
		if c >= '0' && c <= '9' || inString && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			at = append(at, i)
		}
	}
	return at
}

// changeByte changes the byte at i into another of its kind (a hex digit
// stays a hex digit, so a \u escape stays one).
func changeByte(line string, i int) string {
	c := line[i]
	var d byte
	switch {
	case c >= '0' && c <= '9':
		d = '0' + (c-'0'+1)%10
	case c >= 'a' && c <= 'f':
		d = 'a' + (c-'a'+1)%6
	case c >= 'A' && c <= 'F':
		d = 'A' + (c-'A'+1)%6
	case c >= 'a' && c <= 'z':
		d = 'g' + (c-'g'+1)%20
	default:
		d = 'G' + (c-'G'+1)%20
	}
	return line[:i] + string(d) + line[i+1:]
}

// TestAuditVerifyNamesTheChangedEvent: "audit verify FILE|-" checks an
// export offline. The export intentctl writes and the one the API serves
// (GET /v1/audit?format=jsonl, what the console's Export button saves)
// verify, from a file and from standard input; then, for every event, every
// byte that can change while the line stays JSON is changed in turn, and
// each time the check fails (exit 12) naming that event's seq.
func TestAuditVerifyNamesTheChangedEvent(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		key := fmt.Sprintf("job:%d", i)
		token := e.claim(t, key, "o")
		expect(t, e.run(t, "complete", key, "--owner", "o", "--token", fmt.Sprint(token), "--outcome", "executed",
			"--result", `{"id":"r-1","amount":12.50}`), exitOK)
	}
	expect(t, e.run(t, "claim", "a<b>&c", "--tool", "t", "--payload", `{"note":"é \"quoted\""}`), exitOK)

	r := e.run(t, "audit-log", "export")
	expect(t, r, exitOK)
	export := r.stdout
	lines := strings.Split(strings.TrimSuffix(export, "\n"), "\n")
	n := len(lines) - 1
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(file, []byte(export), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("verified %d events, seq 1..%d", n, n)
	expect(t, offline(t, "", "audit", "verify", file), exitOK, want)
	expect(t, offline(t, export, "audit", "verify", "-"), exitOK, want)
	expect(t, offline(t, export, "audit", "verify", "-", "--output", "json"), exitOK, `"ok": true`)

	resp, err := http.Get(e.addr + "/v1/audit?format=jsonl")
	if err != nil {
		t.Fatal(err)
	}
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/audit?format=jsonl = %d, %v", resp.StatusCode, err)
	}
	expect(t, offline(t, string(served), "audit", "verify", "-"), exitOK, want)

	// Usage: a file is required; a missing one, an empty input and a
	// file that is not an export are usage errors, not a broken chain.
	expect(t, offline(t, "", "audit", "verify"), exitUsage)
	expect(t, offline(t, "", "audit", "verify", filepath.Join(t.TempDir(), "none.jsonl")), exitUsage)
	expect(t, offline(t, "", "audit", "verify", "-"), exitUsage)
	expect(t, offline(t, "{}\n", "audit", "verify", "-"), exitUsage)

	changed := 0
	for li := 1; li < len(lines); li++ {
		seq := regexp.MustCompile(fmt.Sprintf(`\bseq %d\b`, li))
		for _, at := range mutations(lines[li]) {
			tampered := append([]string(nil), lines...)
			tampered[li] = changeByte(lines[li], at)
			r := offline(t, strings.Join(tampered, "\n")+"\n", "audit", "verify", "-")
			if r.code != exitChainBroken || !strings.Contains(r.stderr, "audit chain broken") || !seq.MatchString(r.stderr) {
				t.Fatalf("line %d, byte %d changed (%q to %q): want exit %d naming seq %d, got %s", li+1, at,
					lines[li][at:at+1], tampered[li][at:at+1], exitChainBroken, li, r)
			}
			changed++
		}
	}
	if changed < 100*n {
		t.Fatalf("only %d one-byte changes tried over %d events", changed, n)
	}
	t.Logf("%d one-byte changes over %d events, each named", changed, n)
}
