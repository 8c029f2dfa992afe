package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/frontend/idemproxy"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// These tests run everything as it runs in production: a 3-node intentd
// cluster and intent-proxy as real processes (kill -9 is a real crash),
// with the upstream API in the test process so it can count executions.

// refusalNoteRE reads the count of a refusal note's audit event (the
// ledger's coalesced record of refusals it answered from its state).
var refusalNoteRE = regexp.MustCompile(`^(\d+) in_flight refusals of fencing token `)

// testRoutesFile is the proxies' routes file.
const testRoutesFile = `[
  {"name": "charges",  "method": "POST", "path": "/v1/charges",  "tool": "charge",   "lease": "3s"},
  {"name": "wait",     "method": "POST", "path": "/v1/wait",     "tool": "wait",     "lease": "10s", "wait_in_flight": true},
  {"name": "retry",    "method": "POST", "path": "/v1/retry",    "tool": "retry",    "on_5xx": "retry"},
  {"name": "doubt",    "method": "POST", "path": "/v1/doubt",    "tool": "doubt",    "on_5xx": "in_doubt", "lease": "2s"},
  {"name": "failover", "method": "POST", "path": "/v1/failover", "tool": "failover", "lease": "20s"},
  {"name": "approve",  "method": "POST", "path": "/v1/approve",  "tool": "approve",  "policy": "needs-approval"},
  {"name": "optional",                   "path": "/v1/optional", "key": "optional"}
]`

// world is one cluster, one upstream and two proxies in front of both.
type world struct {
	nodes  []*nodetest.Proc
	addrs  []string
	ledger *client.Client
	up     *upstream
	a, b   *proxyProc
}

func startWorld(t *testing.T) *world {
	t.Helper()
	pbin := nodetest.Binary(t, "cmd/intent-proxy")
	ibin := nodetest.IntentdBinary(t)
	dir := t.TempDir()
	fast := []string{"--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms", "--auth=off"}
	w := &world{}
	first := nodetest.StartProc(t, ibin, dir, "n1", append(fast, "--bootstrap-expect", "3")...)
	w.nodes = []*nodetest.Proc{first,
		nodetest.StartProc(t, ibin, dir, "n2", append(fast, "--bootstrap-expect", "3", "--join", first.Gossip)...),
		nodetest.StartProc(t, ibin, dir, "n3", append(fast, "--bootstrap-expect", "3", "--join", first.Gossip)...)}
	for _, n := range w.nodes {
		w.addrs = append(w.addrs, "http://"+n.HTTP)
	}
	nodetest.WaitFor(t, 60*time.Second, "three ready nodes", func() bool {
		return nodetest.Ready(w.nodes[0].HTTP) && nodetest.Ready(w.nodes[1].HTTP) && nodetest.Ready(w.nodes[2].HTTP)
	})
	var err error
	if w.ledger, err = client.New(w.addrs); err != nil {
		t.Fatal(err)
	}
	w.up = newUpstream(t)
	routes := filepath.Join(dir, "routes.json")
	if err := os.WriteFile(routes, []byte(testRoutesFile), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--upstream", w.up.URL, "--ledger", strings.Join(w.addrs, ","), "--routes", routes,
		"--upstream-timeout", "5s", "--log-level", "debug"}
	w.a = startProxy(t, "a", pbin, args...)
	w.b = startProxy(t, "b", pbin, args...)
	return w
}

// ledgerKey is the ledger key of an Idempotency-Key on a route's tool, for
// a client that sends no credentials (the routes scope keys by them).
func ledgerKey(tool, key string) string {
	return idemproxy.LedgerKey(tool, idemproxy.ScopeDigest(http.Header{}, idemproxy.DefaultScopeHeaders), key)
}

func TestProxyProcesses(t *testing.T) {
	w := startWorld(t)
	A, B := w.a.url(), w.b.url()

	t.Run("replay", func(t *testing.T) {
		first := mustSend(t, A, "POST", "/v1/charges", "r1", `{"amount":1299,"currency":"usd"}`)
		if first.code != 201 || first.replayed() || first.header.Get("X-Fencing-Token-Seen") == "" {
			t.Fatalf("first: %v", first)
		}
		for _, base := range []string{A, B, A} { // any proxy, keys reordered: the same answer
			again := mustSend(t, base, "POST", "/v1/charges", "r1", `{"currency":"usd","amount":1299}`)
			if !sameAnswer(first, again) || !again.replayed() {
				t.Errorf("retry through %s: %v, want %v", base, again, first)
			}
		}
		if n := w.up.count(`"r1"`); n != 1 {
			t.Errorf("%d executions", n)
		}
	})

	t.Run("key rules", func(t *testing.T) {
		if r := mustSend(t, A, "POST", "/v1/charges", "", `{}`); r.code != 400 || r.problemCode() != idemproxy.CodeMissingKey {
			t.Errorf("missing: %v", r)
		}
		if r := mustSend(t, A, "POST", "/v1/charges", "", `{}`, idemproxy.HeaderIdempotencyKey, `"open`); r.code != 400 || r.problemCode() != idemproxy.CodeInvalidKey {
			t.Errorf("invalid: %v", r)
		}
		if r := mustSend(t, A, "POST", "/v1/charges", "", `{}`, idemproxy.HeaderIdempotencyKey, strings.Repeat("k", 256)); r.code != 400 || r.problemCode() != idemproxy.CodeInvalidKey {
			t.Errorf("too long: %v", r)
		}
		for i := 0; i < 2; i++ {
			if r := mustSend(t, B, "POST", "/v1/optional", "", `{}`); r.code != 201 {
				t.Errorf("optional without a key: %v", r)
			}
			if r := mustSend(t, B, "GET", "/v1/charges", "get-key", ""); r.code != 201 {
				t.Errorf("GET: %v", r)
			}
		}
		if w.up.count("") != 2 || w.up.count(`"get-key"`) != 2 {
			t.Errorf("pass-through ran %d and %d times, want 2 each", w.up.count(""), w.up.count(`"get-key"`))
		}
	})

	t.Run("fingerprint mismatch", func(t *testing.T) {
		first := mustSend(t, A, "POST", "/v1/charges", "fp", `{"amount":1}`)
		if r := mustSend(t, B, "POST", "/v1/charges", "fp", `{"amount":2}`); r.code != 422 || r.problemCode() != idemproxy.CodeFingerprintMismatch {
			t.Errorf("other body: %v", r)
		}
		if r := mustSend(t, B, "POST", "/v1/charges?dry=1", "fp", `{"amount":1}`); r.code != 422 {
			t.Errorf("other query: %v", r)
		}
		if r := mustSend(t, B, "POST", "/v1/charges", "fp", `{"amount":1}`); !sameAnswer(first, r) || !r.replayed() {
			t.Errorf("the original after mismatches: %v", r)
		}
		if w.up.count(`"fp"`) != 1 {
			t.Errorf("%d executions", w.up.count(`"fp"`))
		}
	})

	t.Run("upstream statuses", func(t *testing.T) {
		for _, c := range []struct {
			path, key, mode string
			code, runs      int
		}{
			{"/v1/charges", "s404", "status=404", 404, 1}, // 4xx: recorded, replayed
			{"/v1/charges", "s500", "status=500", 500, 1}, // on_5xx record (default): replayed
			{"/v1/retry", "s503", "status=503", 503, 3},   // on_5xx retry: each attempt runs
		} {
			first := mustSend(t, A, "POST", c.path, c.key, `{}`, "X-Upstream", c.mode)
			for i := 0; i < 2; i++ {
				r := mustSend(t, B, "POST", c.path, c.key, `{}`, "X-Upstream", c.mode)
				if r.code != c.code || (c.runs == 1) != (sameAnswer(first, r) && r.replayed()) {
					t.Errorf("%s %s retry %d: %v (first %v)", c.path, c.mode, i, r, first)
				}
			}
			if n := w.up.count(`"` + c.key + `"`); n != c.runs {
				t.Errorf("%s %s: %d executions, want %d", c.path, c.mode, n, c.runs)
			}
		}
		// After failed 5xx attempts, a success is recorded and replayed.
		ok := mustSend(t, A, "POST", "/v1/retry", "s503", `{}`)
		if r := mustSend(t, B, "POST", "/v1/retry", "s503", `{}`); ok.code != 201 || !sameAnswer(ok, r) || w.up.count(`"s503"`) != 4 {
			t.Errorf("success after 5xx: %v then %v (%d executions)", ok, r, w.up.count(`"s503"`))
		}
		// on_5xx in_doubt: held, then in doubt; never run again.
		if r := mustSend(t, A, "POST", "/v1/doubt", "s502", `{}`, "X-Upstream", "status=502"); r.code != 502 {
			t.Fatalf("in_doubt route: %v", r)
		}
		untilInDoubt(t, w, B, "/v1/doubt", "s502")
		if w.up.count(`"s502"`) != 1 {
			t.Errorf("%d executions", w.up.count(`"s502"`))
		}
	})

	t.Run("body limits", func(t *testing.T) {
		big := `"` + strings.Repeat("x", 64<<10) + `"`
		if r := mustSend(t, A, "POST", "/v1/charges", "too-big", big); r.code != 413 || r.problemCode() != idemproxy.CodeBodyTooLarge {
			t.Errorf("over --max-body: %v", r)
		}
		if _, err := w.ledger.Get(context.Background(), ledgerKey("charge", "too-big"), client.GetOptions{}); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("a refused body reached the ledger: %v", err)
		}
		first := mustSend(t, A, "POST", "/v1/charges", "large", `{}`, "X-Upstream", "big=100000")
		again := mustSend(t, B, "POST", "/v1/charges", "large", `{}`)
		if first.code != 200 || len(first.body) != 100000 || again.code != 200 || len(again.body) != 0 ||
			again.header.Get(idemproxy.HeaderBodyOmitted) != "true" || !again.replayed() {
			t.Errorf("large answer: %d (%d bytes), replay %v", first.code, len(first.body), again)
		}
	})

	t.Run("pending approval", func(t *testing.T) {
		ctx := context.Background()
		if _, err := w.ledger.PutPolicy(ctx, client.Policy{Name: "needs-approval", Tools: []string{"approve"}, RequireApproval: true,
			AllowSelfApproval: true}, 0); err != nil {
			t.Fatal(err)
		}
		r := mustSend(t, A, "POST", "/v1/approve", "ap", `{"refund":5}`)
		if r.code != 202 || !strings.Contains(r.header.Get("Location"), "/v1/intents/") || w.up.count(`"ap"`) != 0 {
			t.Fatalf("%v", r)
		}
		if _, err := w.ledger.Approve(ctx, client.DecisionRequest{Key: ledgerKey("approve", "ap"), Actor: "alice"}); err != nil {
			t.Fatal(err)
		}
		if r := mustSend(t, B, "POST", "/v1/approve", "ap", `{"refund":5}`); r.code != 201 || w.up.count(`"ap"`) != 1 {
			t.Errorf("after approval: %v", r)
		}
	})

	t.Run("16 concurrent duplicates on one proxy", func(t *testing.T) {
		concurrentDuplicates(t, w, "/v1/charges", "c16", []string{A})
	})
	t.Run("two proxies share the guarantee", func(t *testing.T) {
		concurrentDuplicates(t, w, "/v1/charges", "c16x2", []string{A, B})
	})
	t.Run("wait_in_flight", func(t *testing.T) {
		concurrentDuplicates(t, w, "/v1/wait", "w16", []string{A, B})
	})

	t.Run("upstream hangs", func(t *testing.T) {
		r := mustSend(t, A, "POST", "/v1/charges", "hung", `{}`, "X-Upstream", "hang")
		if r.code != 504 || r.problemCode() != idemproxy.CodeUpstreamNoAnswer {
			t.Fatalf("%v", r)
		}
		untilInDoubt(t, w, B, "/v1/charges", "hung")
		if w.up.count(`"hung"`) != 1 {
			t.Errorf("%d executions", w.up.count(`"hung"`))
		}
	})

	t.Run("upstream resets", func(t *testing.T) {
		mustSend(t, A, "POST", "/v1/charges", "warm", `{}`) // the reset comes on a reused connection
		r := mustSend(t, A, "POST", "/v1/charges", "reset", `{}`, "X-Upstream", "reset")
		if r.code != 502 || r.problemCode() != idemproxy.CodeUpstreamNoAnswer {
			t.Fatalf("%v", r)
		}
		untilInDoubt(t, w, A, "/v1/charges", "reset")
		if w.up.count(`"reset"`) != 1 {
			t.Errorf("%d executions", w.up.count(`"reset"`))
		}
	})

	t.Run("upstream killed mid-request", func(t *testing.T) {
		done := make(chan reply, 1)
		go func() { r, _ := send(A, "POST", "/v1/charges", "killed", `{}`, "X-Upstream", "block"); done <- r }()
		awaitArrival(t, w, `"killed"`)
		w.up.CloseClientConnections() // as a crash of the upstream looks from the proxy
		if r := <-done; r.code != 502 || r.problemCode() != idemproxy.CodeUpstreamNoAnswer {
			t.Fatalf("%v", r)
		}
		untilInDoubt(t, w, B, "/v1/charges", "killed")
		close(w.up.gate(`"killed"`))
		if w.up.count(`"killed"`) != 1 {
			t.Errorf("%d executions", w.up.count(`"killed"`))
		}
	})

	t.Run("proxy SIGKILLed mid-request and restarted", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { _, err := send(A, "POST", "/v1/charges", "crash", `{}`, "X-Upstream", "block"); done <- err }()
		awaitArrival(t, w, `"crash"`)
		w.a.Kill()
		if err := <-done; err == nil {
			t.Fatal("the client got an answer from a killed proxy")
		}
		// The other proxy answers from the ledger at once: the key is held.
		if r := mustSend(t, B, "POST", "/v1/charges", "crash", `{}`); r.code != 409 ||
			(r.problemCode() != idemproxy.CodeInFlight && r.problemCode() != idemproxy.CodeInDoubt) {
			t.Errorf("retry through the other proxy: %v", r)
		}
		w.a.start(t)
		untilInDoubt(t, w, A, "/v1/charges", "crash")
		close(w.up.gate(`"crash"`)) // the first upstream request ends: nobody records it
		if r := mustSend(t, A, "POST", "/v1/charges", "crash", `{}`); r.problemCode() != idemproxy.CodeInDoubt {
			t.Errorf("after the upstream answered into the void: %v", r)
		}
		if w.up.count(`"crash"`) != 1 {
			t.Errorf("%d executions", w.up.count(`"crash"`))
		}
	})

	t.Run("SIGTERM finishes the requests in flight", func(t *testing.T) {
		done := make(chan reply, 1)
		go func() { r, _ := send(B, "POST", "/v1/charges", "term", `{}`, "X-Upstream", "block"); done <- r }()
		awaitArrival(t, w, `"term"`)
		stopped := make(chan error, 1)
		go func() {
			exited, err := w.b.Stop(time.Minute)
			if !exited {
				err = errors.New("no exit after SIGTERM")
			}
			stopped <- err
		}()
		// The proxy stops accepting and waits for the request in flight.
		nodetest.WaitFor(t, 30*time.Second, "proxy b to stop accepting", func() bool {
			_, err := send(B, "GET", "/-/healthz", "", "")
			return err != nil
		})
		close(w.up.gate(`"term"`))
		first := <-done
		if err := <-stopped; err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		if first.code != 201 {
			t.Fatalf("the request in flight: %v", first)
		}
		if r := mustSend(t, A, "POST", "/v1/charges", "term", `{}`); !sameAnswer(first, r) || !r.replayed() {
			t.Errorf("replay after the graceful stop: %v", r)
		}
		w.b.start(t)
	})

	// Last: it leaves the cluster with two nodes.
	t.Run("ledger leader killed between grant and complete", func(t *testing.T) {
		done := make(chan reply, 1)
		go func() { r, _ := send(A, "POST", "/v1/failover", "fo", `{"n":1}`, "X-Upstream", "block"); done <- r }()
		awaitArrival(t, w, `"fo"`) // granted: the upstream works
		leader := nodetest.LeaderHTTP(w.nodes[0].HTTP, "")
		var killed *nodetest.Proc
		for _, n := range w.nodes {
			if n.HTTP == leader {
				killed = n
			}
		}
		if killed == nil {
			t.Fatalf("no leader known (%q)", leader)
		}
		killed.Kill()
		close(w.up.gate(`"fo"`))
		first := <-done
		if first.code != 201 {
			t.Fatalf("first: %v", first)
		}
		again := mustSend(t, B, "POST", "/v1/failover", "fo", `{"n":1}`)
		if !sameAnswer(first, again) || !again.replayed() {
			t.Errorf("retry after failover: %v, want %v", again, first)
		}
		in, err := w.ledger.Get(context.Background(), ledgerKey("failover", "fo"), client.GetOptions{})
		if err != nil || (in.State != client.StateExecuted && in.State != client.StateCommitted) {
			t.Errorf("intent after failover: %+v, %v", in, err)
		}
		if w.up.count(`"fo"`) != 1 {
			t.Errorf("%d executions", w.up.count(`"fo"`))
		}
	})
}

// awaitArrival waits until the upstream has a blocked request of key.
func awaitArrival(t *testing.T, w *world, key string) {
	t.Helper()
	select {
	case <-w.up.arrivals(key):
	case <-time.After(time.Minute):
		t.Fatalf("request %s never reached the upstream", key)
	}
}

// untilInDoubt retries key until its answer is 409 in-doubt, checking
// that every answer before is 409 in-flight, then that three more retries
// are in-doubt too.
func untilInDoubt(t *testing.T, w *world, base, path, key string) {
	t.Helper()
	nodetest.WaitFor(t, time.Minute, key+" in doubt", func() bool {
		r := mustSend(t, base, "POST", path, key, `{}`)
		switch r.problemCode() {
		case idemproxy.CodeInDoubt:
			return true
		case idemproxy.CodeInFlight:
			if r.code != 409 || r.header.Get("Retry-After") == "" {
				t.Errorf("in-flight answer: %v", r)
			}
			return false
		}
		t.Fatalf("retry of %s: %v, want 409 in-flight or in-doubt", key, r)
		return false
	})
	for i := 0; i < 3; i++ {
		if r := mustSend(t, base, "POST", path, key, `{}`); r.code != 409 || r.problemCode() != idemproxy.CodeInDoubt {
			t.Errorf("in doubt, retry %d: %v", i, r)
		}
	}
}

// concurrentDuplicates sends 16 requests with one key at once, spread over
// the proxies. Exactly one reaches the upstream, which holds it; on a
// wait_in_flight route the other 15 wait and get its answer replayed, on
// others they get 409 in-flight at once and the answer replayed on retry.
func concurrentDuplicates(t *testing.T, w *world, path, key string, proxies []string) {
	t.Helper()
	const n = 16
	waits := strings.HasSuffix(path, "/wait")
	type result struct {
		r   reply
		err error
	}
	results := make(chan result, n)
	var wg sync.WaitGroup
	defer wg.Wait()
	release := sync.OnceFunc(func() { close(w.up.gate(`"` + key + `"`)) })
	defer release()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := send(proxies[i%len(proxies)], "POST", path, key, `{"order":"o-16"}`, "X-Upstream", "block")
			results <- result{r, err}
		}()
	}
	awaitArrival(t, w, `"`+key+`"`)
	secondArrival := func() {
		select {
		case <-w.up.arrivals(`"` + key + `"`):
			t.Fatalf("a second request with key %s reached the upstream", key)
		default:
		}
	}
	var conflicts []reply
	if waits {
		// Every other request has claimed and found the key in flight.
		nodetest.WaitFor(t, time.Minute, "15 waiting requests", func() bool {
			secondArrival()
			trail, err := w.ledger.Audit(context.Background(), ledgerKey("wait", key))
			if err != nil {
				return false
			}
			// A refusal after the key's first is answered from the
			// leader's state and recorded later in a note that counts them
			// ("N in_flight refusals of fencing token ..."): count its N.
			inFlight := 0
			for _, e := range trail.Events {
				if e.Op != "claim" || e.Status != "in_flight" {
					continue
				}
				if m := refusalNoteRE.FindStringSubmatch(e.Reason); m != nil {
					k, _ := strconv.Atoi(m[1])
					inFlight += k
				} else {
					inFlight++
				}
			}
			return inFlight >= n-1
		})
	} else {
		for len(conflicts) < n-1 {
			select {
			case res := <-results:
				if res.err != nil || res.r.code != 409 || res.r.problemCode() != idemproxy.CodeInFlight || res.r.header.Get("Retry-After") == "" {
					t.Fatalf("a duplicate while the first is in flight: %v %v", res.r, res.err)
				}
				conflicts = append(conflicts, res.r)
			case <-w.up.arrivals(`"` + key + `"`):
				t.Fatalf("a second request with key %s reached the upstream", key)
			case <-time.After(time.Minute):
				t.Fatalf("only %d of %d duplicates answered", len(conflicts), n-1)
			}
		}
	}
	release()
	wg.Wait()
	close(results)
	var first *reply
	var replays []reply
	for res := range results {
		if res.err != nil {
			t.Fatalf("request: %v", res.err)
		}
		if res.r.replayed() {
			replays = append(replays, res.r)
			continue
		}
		if first != nil || res.r.code != 201 {
			t.Fatalf("answers: %v and %v", first, res.r)
		}
		first = &res.r
	}
	if first == nil {
		t.Fatal("no request ran")
	}
	for range conflicts { // the 409s retry
		replays = append(replays, mustSend(t, proxies[len(replays)%len(proxies)], "POST", path, key, `{"order":"o-16"}`))
	}
	if len(replays) != n-1 {
		t.Fatalf("%d replays, want %d", len(replays), n-1)
	}
	for _, r := range replays {
		if !sameAnswer(*first, r) || !r.replayed() {
			t.Errorf("replay %v, want %v", r, *first)
		}
	}
	if c := w.up.count(`"` + key + `"`); c != 1 {
		t.Errorf("%d executions, want 1", c)
	}
}
