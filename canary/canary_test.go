package canary

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/localcluster"
)

// hangGuard bounds a test run: a guard against hangs, not a performance
// threshold.
const hangGuard = 5 * time.Minute

// TestMain lets the test binary serve as a canary tool process, so the
// process mode runs without a separate build.
func TestMain(m *testing.M) {
	if os.Getenv(ToolProcessEnv) == "1" {
		os.Exit(ToolProcessMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestNewPlanDeterministic(t *testing.T) {
	for _, c := range AllClasses {
		for e := 0; e < 20; e++ {
			if a, b := NewPlan(7, c, e), NewPlan(7, c, e); a != b {
				t.Fatalf("plan of (7, %s, %d) differs: %v vs %v", c, e, a, b)
			}
		}
	}
	if NewPlan(1, LostAck, 3) == NewPlan(2, LostAck, 3) && NewPlan(1, LostAck, 4) == NewPlan(2, LostAck, 4) {
		t.Fatal("plans do not depend on the seed")
	}
}

func TestParse(t *testing.T) {
	for _, c := range AllClasses {
		got, err := ParseClass(c.String())
		if err != nil || got != c {
			t.Fatalf("ParseClass(%q) = %v, %v", c.String(), got, err)
		}
	}
	if _, err := ParseClass("nope"); err == nil {
		t.Fatal("ParseClass accepted an unknown class")
	}
	if _, err := ParseBroken("nope"); err == nil {
		t.Fatal("ParseBroken accepted an unknown mode")
	}
}

// TestGate runs a short gate twice against one real 3-node cluster and
// checks that it passes with identical digests, and that each broken mode
// fails it with I1 violations; once with the tool service in-process and
// once as real processes killed at the crash point, and each of those with
// the tool guarded by client.Do, as a plain HTTP API behind intent-proxy
// and as a plain MCP server behind the MCP gate.
func TestGate(t *testing.T) {
	for _, via := range []Via{ViaSDK, ViaHTTPProxy, ViaMCP} {
		for _, mode := range []string{"in-process", "process"} {
			t.Run(string(via)+"/"+mode, func(t *testing.T) {
				var tool []string
				if mode == "process" {
					tool = []string{os.Args[0]}
				}
				testGate(t, tool, via)
			})
		}
	}
}

func testGate(t *testing.T, toolCommand []string, via Via) {
	if testing.Short() {
		t.Skip("starts a real cluster")
	}
	t.Parallel() // each mode has its own cluster, ports and tool service
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cl, err := localcluster.Start(ctx, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	classes := AllClasses
	run := func(id string, broken Broken, classes ...Class) *Result {
		t.Helper()
		res, err := Run(ctx, Config{Addrs: cl.URLs(), Seed: 1, Episodes: 10, Concurrency: 16, Broken: broken, RunID: id,
			ToolCommand: toolCommand, Via: via, Classes: classes})
		if err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		return res
	}

	t.Run("correct", func(t *testing.T) {
		a, b := run("a", NotBroken, classes...), run("b", NotBroken, classes...)
		for _, r := range []*Result{a, b} {
			if !r.Passed() {
				for _, v := range r.Violations {
					t.Errorf("%s %s e%d: %s\n  %s", v.Property, v.Class, v.Episode, v.Detail, strings.Join(v.Events, "\n  "))
				}
				t.Fatalf("gate failed: I1=%d I2=%d I4=%d divergent-executed=%d", r.I1, r.I2, r.I4, r.DivergentExecuted)
			}
		}
		if a.Digest != b.Digest {
			for i := range min(len(a.Log), len(b.Log)) {
				if a.Log[i] != b.Log[i] {
					t.Fatalf("replay differs at line %d:\n  %s\n  %s", i, a.Log[i], b.Log[i])
				}
			}
			t.Fatalf("digests differ: %s vs %s", a.Digest, b.Digest)
		}
		if len(a.Classes) != len(classes) {
			t.Fatalf("%d classes ran, want %d", len(a.Classes), len(classes))
		}
		for _, s := range a.Classes {
			if s.Episodes != 10 {
				t.Fatalf("class %s ran %d episodes, want 10", s.Class, s.Episodes)
			}
		}
		if st := byClass(a, Crash); st.InDoubt == 0 || st.Crashes != 10 {
			t.Fatalf("crash class: %+v, want 10 crashes surfaced as in_doubt", st)
		}
		if st := byClass(a, Divergent); st.DivergentRefused != 10 {
			t.Fatalf("divergent class: %+v, want 10 refused", st)
		}
	})
	for _, broken := range []Broken{FreshKey, NoLedger} {
		t.Run(string(broken), func(t *testing.T) {
			r := run("broken-"+string(broken), broken)
			if r.Passed() || r.I1 == 0 {
				t.Fatalf("broken mode %s passed the gate: I1=%d", broken, r.I1)
			}
			v := r.Violations[0]
			if len(v.Events) == 0 || v.Seed != 1 {
				t.Fatalf("violation without its event order or seed: %+v", v)
			}
		})
	}
}

func TestAnswerOutcome(t *testing.T) {
	problem := func(code string) (http.Header, []byte) {
		return http.Header{"Content-Type": {"application/problem+json"}}, []byte(`{"code":"` + code + `","detail":"d"}`)
	}
	jsonH := http.Header{"Content-Type": {"application/json"}}
	replayed := http.Header{"Content-Type": {"application/json"}, "Idempotency-Replayed": {"true"}}
	for _, c := range []struct {
		via    Via
		status int
		header http.Header
		body   string
		want   string
	}{
		{ViaSDK, 200, jsonH, `{"outcome":"executed"}`, "executed"},
		{ViaSDK, 409, jsonH, `{"outcome":"in_doubt"}`, "in_doubt"},
		{ViaSDK, 502, jsonH, `not json`, ""},
		{ViaHTTPProxy, 201, jsonH, `{"txn":"t1"}`, "executed"},
		{ViaHTTPProxy, 201, replayed, `{"txn":"t1"}`, "duplicate"},
		{ViaHTTPProxy, 201, jsonH, `{}`, "error"},
		{ViaHTTPProxy, 502, jsonH, `{"error":"provider"}`, "error"},
	} {
		if got, _ := answerOutcome(c.via, c.status, c.header, []byte(c.body)); got != c.want {
			t.Errorf("%s %d %v %s: %q, want %q", c.via, c.status, c.header, c.body, got, c.want)
		}
	}
	for code, want := range map[string]string{"in-flight": "in_flight", "in-doubt": "in_doubt", "fingerprint-mismatch": "divergent",
		"upstream-no-answer": outcomeNoAnswer, "ledger-unavailable": "error"} {
		h, b := problem(code)
		if got, _ := answerOutcome(ViaHTTPProxy, 409, h, b); got != want {
			t.Errorf("problem %s: %q, want %q", code, got, want)
		}
	}
	if v, err := ParseVia(""); err != nil || v != ViaSDK {
		t.Errorf(`ParseVia(""): %q, %v`, v, err)
	}
	if v, err := ParseVia("http-proxy"); err != nil || v != ViaHTTPProxy {
		t.Errorf(`ParseVia("http-proxy"): %q, %v`, v, err)
	}
	if _, err := ParseVia("grpc"); err == nil {
		t.Error("ParseVia accepted an unknown mode")
	}
	if got := idempotencyKey(`canary:a"b\c`); got != `"canary:a\"b\\c"` {
		t.Errorf("idempotencyKey: %s", got)
	}
}

func byClass(r *Result, c Class) *ClassStats {
	for _, s := range r.Classes {
		if s.Class == c.String() {
			return s
		}
	}
	return &ClassStats{}
}
