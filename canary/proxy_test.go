package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeTool records the deliveries it gets and answers executed, or dies
// (drops the connection) when told to crash.
type fakeTool struct {
	mu         sync.Mutex
	deliveries []string
	crashes    []string
}

func (f *fakeTool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.deliveries = append(f.deliveries, r.Header.Get(HeaderDelivery))
	if c := r.Header.Get(HeaderCrash); c != "" {
		f.crashes = append(f.crashes, c)
		f.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	f.mu.Unlock()
	writeJSON(w, http.StatusOK, ChargeResponse{Outcome: "executed"})
}

func (f *fakeTool) got() (deliveries, crashes []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deliveries...), append([]string(nil), f.crashes...)
}

// firstEpisode finds an episode of class under seed whose plan satisfies
// ok.
func firstEpisode(t *testing.T, seed uint64, class Class, ok func(Plan) bool) (int, Plan) {
	t.Helper()
	for n := 0; n < 1000; n++ {
		if p := NewPlan(seed, class, n); ok(p) {
			return n, p
		}
	}
	t.Fatalf("no %s episode found", class)
	return 0, Plan{}
}

func TestProxyAppliesThePlan(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tool := &fakeTool{}
	ts := httptest.NewServer(tool)
	defer ts.Close()
	b := newBook()
	px := &proxy{book: b, tool: ts.URL, hc: newHTTPClient(4), ctx: ctx}
	ps := httptest.NewServer(px)
	defer ps.Close()
	send := func(label, delivery string) (status int, err error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ps.URL+"/charge", strings.NewReader(`{"key":"k","amount":1}`))
		req.Header.Set(HeaderEpisode, label)
		req.Header.Set(HeaderDelivery, delivery)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	const seed = 5

	t.Run("lost-ack", func(t *testing.T) {
		n, plan := firstEpisode(t, seed, LostAck, func(p Plan) bool { return p.LostAcks == 2 })
		label := episodeLabel(seed, LostAck, n)
		for a := 0; a < plan.LostAcks; a++ {
			if _, err := send(label, fmt.Sprintf("a%d", a)); err == nil {
				t.Fatalf("a%d: the agent got an answer; the plan drops it", a)
			}
		}
		if status, err := send(label, "a2"); err != nil || status != http.StatusOK {
			t.Fatalf("a2: %d %v, want the tool's 200", status, err)
		}
		rec := b.get(label)
		planned, outcomes, _ := rec.snapshot()
		if rec.acksLost != 2 || len(outcomes) != 3 || planned[0] != "a0 deliver, ack lost" || planned[2] != "a2 deliver" {
			t.Fatalf("acks lost %d, outcomes %v, planned %v", rec.acksLost, outcomes, planned)
		}
	})
	t.Run("duplicate", func(t *testing.T) {
		n, plan := firstEpisode(t, seed, Duplicate, func(p Plan) bool { return p.Dups == 2 })
		label := episodeLabel(seed, Duplicate, n)
		before, _ := tool.got()
		if status, err := send(label, "a0"); err != nil || status != http.StatusOK {
			t.Fatalf("a0: %d %v", status, err)
		}
		rec := b.get(label)
		rec.bg.Wait()
		after, _ := tool.got()
		if got := len(after) - len(before); got != 1+plan.Dups {
			t.Fatalf("the tool got %d deliveries, want %d", got, 1+plan.Dups)
		}
		if !strings.Contains(strings.Join(after, ","), "a0.dup2") {
			t.Fatalf("deliveries %v lack the copies", after)
		}
	})
	t.Run("reorder", func(t *testing.T) {
		n, _ := firstEpisode(t, seed, Reorder, func(Plan) bool { return true })
		label := episodeLabel(seed, Reorder, n)
		if status, err := send(label, "a0"); err != nil || status != http.StatusGatewayTimeout {
			t.Fatalf("a0: %d %v, want 504 at once", status, err)
		}
		if status, err := send(label, "a1"); err != nil || status != http.StatusOK {
			t.Fatalf("a1: %d %v", status, err)
		}
		rec := b.get(label)
		rec.bg.Wait()
		_, outcomes, _ := rec.snapshot()
		if len(outcomes) != 2 {
			t.Fatalf("outcomes %v: the held delivery never reached the tool", outcomes)
		}
	})
	t.Run("crash", func(t *testing.T) {
		n, plan := firstEpisode(t, seed, Crash, func(p Plan) bool { return p.CrashAfterEffect })
		label := episodeLabel(seed, Crash, n)
		if _, err := send(label, "a0"); err == nil {
			t.Fatal("a0: the agent got an answer from a crashed tool")
		}
		_, crashes := tool.got()
		if len(crashes) != 1 || crashes[0] != "after" || !plan.CrashAfterEffect {
			t.Fatalf("crash instructions %v", crashes)
		}
		_, outcomes, _ := b.get(label).snapshot()
		if len(outcomes) != 1 || outcomes[0] != "crashed" {
			t.Fatalf("outcomes %v, want crashed", outcomes)
		}
	})
	t.Run("bad headers", func(t *testing.T) {
		for _, h := range [][2]string{{"", "a0"}, {"1/nope/0001", "a0"}, {episodeLabel(1, LostAck, 1), "x"}, {episodeLabel(1, LostAck, 1), ""}} {
			if status, err := send(h[0], h[1]); err != nil || status != http.StatusBadRequest {
				t.Fatalf("%v: %d %v, want 400", h, status, err)
			}
		}
	})
}

func TestParseLabel(t *testing.T) {
	for _, c := range AllClasses {
		s, class, n, err := parseLabel(episodeLabel(17, c, 42))
		if err != nil || s != 17 || class != c || n != 42 {
			t.Fatalf("round trip of %s: %d %v %d %v", c, s, class, n, err)
		}
	}
	for _, bad := range []string{"", "x", "1", "1/lost-ack", "1/lost-ack/x", "1/nope/3", "a/lost-ack/3"} {
		if _, _, _, err := parseLabel(bad); err == nil {
			t.Fatalf("parseLabel(%q) accepted it", bad)
		}
	}
}

// TestToolProcessCrashIsAKill starts a real tool process without a ledger
// and checks that a crash after the effect kills it with SIGKILL once the
// provider has the effect, and a crash before it leaves none.
func TestToolProcessCrashIsAKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes: integration tier")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := newBook()
	prov := httptest.NewServer(newProvider(b))
	defer prov.Close()
	for _, where := range []string{"before", "after"} {
		tp, err := startToolProcess(ctx, []string{os.Args[0]}, toolProcessArgs{provider: prov.URL, crashLease: time.Second, noLedger: true})
		if err != nil {
			t.Fatal(err)
		}
		label := episodeLabel(1, Crash, map[string]int{"before": 1, "after": 2}[where])
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tp.url+"/charge", bytes.NewReader([]byte(`{"key":"k","amount":3}`)))
		req.Header.Set(HeaderEpisode, label)
		req.Header.Set(HeaderDelivery, "a0")
		req.Header.Set(HeaderCrash, where)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			t.Fatalf("%s: the crashing tool answered %s", where, resp.Status)
		}
		how := tp.reap()
		tp.stop()
		if !strings.Contains(how, "signal: killed") {
			t.Fatalf("%s: %s, want a SIGKILL", where, how)
		}
		_, _, effects := b.get(label).snapshot()
		if want := map[string]int{"before": 0, "after": 1}[where]; len(effects) != want {
			t.Fatalf("crash %s the effect: %d effects, want %d", where, len(effects), want)
		}
	}
}

func TestToolServiceRefusesBadCalls(t *testing.T) {
	ts := httptest.NewServer(NewToolService(ToolConfig{Provider: "http://127.0.0.1:1"}))
	defer ts.Close()
	for _, body := range []string{``, `{`, `{"key":""}`, `{"key":"k","amount":"x"}`, `{"key":"k","extra":1}`} {
		resp, err := http.Post(ts.URL+"/charge", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var cr ChargeResponse
		_ = json.NewDecoder(resp.Body).Decode(&cr)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || cr.Outcome != "error" {
			t.Fatalf("%q: %s %+v, want 400", body, resp.Status, cr)
		}
	}
}
