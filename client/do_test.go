package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// testCtx bounds a test's calls: a hang guard, not a performance threshold.
func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type charge struct {
	Order    string `json:"order"`
	Amount   int    `json:"amount"`
	Currency string `json:"currency"`
}

func chargeEffect(order string) client.Effect {
	return client.Effect{
		Key:     client.Key("stripe.charge", order, ""),
		Tool:    "stripe.charge",
		Payload: charge{Order: order, Amount: 1299, Currency: "usd"},
	}
}

// counter counts runs of an effect function per key.
type counter struct {
	mu   sync.Mutex
	runs map[string]int
}

func newCounter() *counter { return &counter{runs: map[string]int{}} }

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.runs[key]++
	return c.runs[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[key]
}

// charger is an effect function that "charges" once per call.
func (c *counter) charger(ctx context.Context, g *client.Grant) (any, error) {
	n := c.inc(g.Key)
	return map[string]any{"charge_id": fmt.Sprintf("ch_%s_%d", g.Key, n), "fencing_token": g.FencingToken}, nil
}

func auditOps(t *testing.T, c *client.Client, key string) string {
	t.Helper()
	trail, err := c.Audit(testCtx(t), key)
	if err != nil {
		t.Fatalf("audit %s: %v", key, err)
	}
	var ops []string
	for _, ev := range trail.Events {
		ops = append(ops, ev.Op+"/"+ev.Status)
	}
	return strings.Join(ops, ",")
}

func TestDoGrantedRunsOnceRecordsAndCommits(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	e := chargeEffect("order-91")
	var grant *client.Grant
	res, err := c.Do(ctx, e, func(ctx context.Context, g *client.Grant) (any, error) {
		grant = g
		return map[string]string{"charge_id": "ch_1"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if grant == nil || grant.Key != "stripe.charge:order-91" || grant.Owner == "" || grant.FencingToken == 0 ||
		!strings.HasPrefix(grant.ExecutionToken, "gex_") || grant.Intent == nil || grant.Intent.State != client.StateDeclared {
		t.Fatalf("grant = %+v", grant)
	}
	if res.Status != client.EffectExecuted || !res.Ran || string(res.Result) != `{"charge_id":"ch_1"}` ||
		res.Owner != grant.Owner || res.FencingToken != grant.FencingToken || res.Intent.State != client.StateCommitted {
		t.Errorf("result = %+v", res)
	}
	if v, ok := res.Value.(map[string]string); !ok || v["charge_id"] != "ch_1" {
		t.Errorf("value = %#v", res.Value)
	}
	var got struct {
		ChargeID string `json:"charge_id"`
	}
	if err := res.Decode(&got); err != nil || got.ChargeID != "ch_1" {
		t.Errorf("decode = %+v, %v", got, err)
	}
	if ops := auditOps(t, c, e.Key); ops != "claim/granted,complete/ok,commit/ok" {
		t.Errorf("audit = %s", ops)
	}
}

func TestDoWithoutAutoCommitLeavesExecuted(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL}, client.WithAutoCommit(false))
	res, err := c.Do(testCtx(t), chargeEffect("order-1"), newCounter().charger)
	if err != nil || res.Intent.State != client.StateExecuted || mem.Requests("commit") != 0 {
		t.Fatalf("result = %+v, %v; commits %d", res, err, mem.Requests("commit"))
	}
}

func TestDoDuplicateReturnsRecordedResultWithoutRunning(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	runs := newCounter()
	first, err := c.Do(ctx, chargeEffect("order-7"), runs.charger)
	if err != nil {
		t.Fatal(err)
	}
	// A second delivery of the same logical call, from another process: the
	// payload's keys in another order make no difference.
	other := newClient(t, []string{mem.URL})
	e := chargeEffect("order-7")
	e.Payload = json.RawMessage(`{"currency":"usd","amount":1299,"order":"order-7"}`)
	dup, err := other.Do(ctx, e, runs.charger)
	if err != nil {
		t.Fatal(err)
	}
	if runs.get(e.Key) != 1 {
		t.Fatalf("fn ran %d times", runs.get(e.Key))
	}
	if dup.Status != client.EffectDuplicate || dup.Ran || dup.Value != nil || dup.FencingToken != 0 ||
		!bytes.Equal(dup.Result, first.Result) || dup.Intent == nil || dup.Intent.Duplicates != 1 {
		t.Errorf("duplicate = %+v, first = %+v", dup, first)
	}
	var a, b map[string]any
	if first.Decode(&a) != nil || dup.Decode(&b) != nil || a["charge_id"] != b["charge_id"] {
		t.Errorf("decoded results differ: %v vs %v", a, b)
	}
}

func TestDoConcurrentSameKeyRunsOnce(t *testing.T) {
	mem := clienttest.NewMemory(t)
	ctx := testCtx(t)
	const callers = 8
	runs := newCounter()
	started := make(chan struct{})
	release := make(chan struct{})
	fn := func(ctx context.Context, g *client.Grant) (any, error) {
		if runs.inc(g.Key) == 1 {
			close(started)
		}
		<-release
		return map[string]string{"charge_id": "ch_only"}, nil
	}
	results := make([]*client.EffectResult, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		// One client per caller, as separate agent processes would have; and
		// the same key and payload, as duplicate deliveries carry.
		c := newClient(t, []string{mem.URL})
		wg.Go(func() { results[i], errs[i] = c.Do(ctx, chargeEffect("order-5"), fn) })
	}
	<-started
	// The others now long-poll the in-flight key: wait until each has
	// claimed and is waiting, then let the effect finish.
	if err := mem.WaitRequests(ctx, "get", callers-1); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()

	statuses := map[client.EffectStatus]int{}
	for i := range callers {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		statuses[results[i].Status]++
		if string(results[i].Result) != `{"charge_id":"ch_only"}` {
			t.Errorf("caller %d result %s", i, results[i].Result)
		}
	}
	if runs.get("stripe.charge:order-5") != 1 || statuses[client.EffectExecuted] != 1 || statuses[client.EffectDuplicate] != callers-1 {
		t.Errorf("runs %d, statuses %v", runs.get("stripe.charge:order-5"), statuses)
	}
	if !strings.Contains(auditOps(t, newClient(t, []string{mem.URL}), "stripe.charge:order-5"), "claim/in_flight") {
		t.Error("no caller saw the key in flight")
	}
}

func TestDoDivergentPayloadIsRefusedWithoutRunning(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	runs := newCounter()
	if _, err := c.Do(ctx, chargeEffect("order-3"), runs.charger); err != nil {
		t.Fatal(err)
	}
	e := chargeEffect("order-3")
	e.Payload = charge{Order: "order-3", Amount: 9999, Currency: "usd"}
	res, err := c.Do(ctx, e, runs.charger)
	if !errors.Is(err, client.ErrDivergent) || res != nil {
		t.Fatalf("divergent retry = %+v, %v", res, err)
	}
	var p *client.Problem
	if !errors.As(err, &p) || p.Intent == nil || p.Fingerprint == p.RequestFingerprint || p.Intent.Divergent != 1 {
		t.Errorf("problem = %+v", p)
	}
	if runs.get(e.Key) != 1 {
		t.Errorf("fn ran %d times", runs.get(e.Key))
	}
}

func TestDoFailedEffectIsRecordedAndALaterCallRunsANewGeneration(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	errDeclined := errors.New("card declined")
	e := chargeEffect("order-4")
	res, err := c.Do(ctx, e, func(context.Context, *client.Grant) (any, error) { return nil, errDeclined })
	if !errors.Is(err, errDeclined) {
		t.Fatalf("err = %v, want the function's error", err)
	}
	if res == nil || res.Status != client.EffectFailed || !res.Ran || string(res.Result) != `{"error":"card declined"}` ||
		res.Intent.State != client.StateFailed {
		t.Fatalf("result = %+v", res)
	}
	first := res.FencingToken

	runs := newCounter()
	res, err = c.Do(ctx, e, runs.charger)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != client.EffectExecuted || runs.get(e.Key) != 1 || res.Intent.Generation != 2 || res.FencingToken <= first {
		t.Errorf("second call = %+v (runs %d)", res, runs.get(e.Key))
	}
}

// claimOwners records the owner of every claim that reaches the node.
type claimOwners struct {
	mu     sync.Mutex
	owners []string
}

func (co *claimOwners) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if clienttest.Op(r) == "claim" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var c struct {
				Owner string `json:"owner"`
			}
			_ = json.Unmarshal(body, &c)
			co.mu.Lock()
			co.owners = append(co.owners, c.Owner)
			co.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (co *claimOwners) get() []string {
	co.mu.Lock()
	defer co.mu.Unlock()
	return append([]string(nil), co.owners...)
}

func TestDoRetriesAnUnknownClaimWithTheSameOwner(t *testing.T) {
	var owners claimOwners
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(owners.middleware))
	// Fewer retries inside each call than failures: Do itself keeps
	// re-sending the claim.
	c := newClient(t, []string{mem.URL}, client.WithRetries(1))
	for range 5 {
		mem.Ledger.FailNext(ledger.ErrOutcomeUnknown)
	}
	runs := newCounter()
	res, err := c.Do(testCtx(t), chargeEffect("order-8"), runs.charger)
	if err != nil {
		t.Fatal(err)
	}
	got := owners.get()
	if len(got) != 6 || res.Status != client.EffectExecuted || runs.get("stripe.charge:order-8") != 1 {
		t.Fatalf("claims by %v, result %+v, runs %d", got, res, runs.get("stripe.charge:order-8"))
	}
	for _, o := range got {
		if o != res.Owner {
			t.Errorf("claim owners %v: not all %q", got, res.Owner)
			break
		}
	}
}

// dropFirst applies the first request of operation op to the node and then
// cuts the connection, so its answer is lost after the effect. before runs
// after applying and before cutting.
func dropFirst(op string, before func()) func(http.Handler) http.Handler {
	var dropped atomic.Bool
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if clienttest.Op(r) != op || dropped.Swap(true) {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r)
			if before != nil {
				before()
			}
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				panic(err)
			}
			conn.Close()
		})
	}
}

func TestDoLostGrantAnswerIsRetriedToTheSameGrant(t *testing.T) {
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(dropFirst("claim", nil)))
	c := newClient(t, []string{mem.URL})
	runs := newCounter()
	res, err := c.Do(testCtx(t), chargeEffect("order-9"), runs.charger)
	if err != nil || res.Status != client.EffectExecuted || runs.get("stripe.charge:order-9") != 1 {
		t.Fatalf("result %+v, %v, runs %d", res, err, runs.get("stripe.charge:order-9"))
	}
	if ops := auditOps(t, c, "stripe.charge:order-9"); ops != "claim/granted,claim/granted,complete/ok,commit/ok" {
		t.Errorf("audit = %s", ops)
	}
}

func TestDoOwnGrantThatPassedUnusedIsReleasedAndClaimedAgain(t *testing.T) {
	// The grant's answer is lost and, before the retry arrives, its lease
	// passes: the retry finds the key in doubt under this call's own owner.
	var mem *clienttest.Memory
	mem = clienttest.NewMemory(t, clienttest.WithMiddleware(dropFirst("claim", func() { mem.Ledger.Advance(time.Hour) })))
	c := newClient(t, []string{mem.URL})
	runs := newCounter()
	res, err := c.Do(testCtx(t), chargeEffect("order-10"), runs.charger)
	if err != nil || res.Status != client.EffectExecuted || runs.get("stripe.charge:order-10") != 1 || res.Intent.Generation != 2 {
		t.Fatalf("result %+v, %v, runs %d", res, err, runs.get("stripe.charge:order-10"))
	}
	want := "claim/granted,expire/lease_expired,claim/in_doubt,complete/ok,claim/granted,complete/ok,commit/ok"
	if ops := auditOps(t, c, "stripe.charge:order-10"); ops != want {
		t.Errorf("audit = %s, want %s", ops, want)
	}

	// With an owner the caller chose, Do cannot know the grant is unused:
	// it reports in_doubt.
	var mem2 *clienttest.Memory
	mem2 = clienttest.NewMemory(t, clienttest.WithMiddleware(dropFirst("claim", func() { mem2.Ledger.Advance(time.Hour) })))
	e := chargeEffect("order-11")
	e.Owner = client.NewOwner()
	res, err = newClient(t, []string{mem2.URL}).Do(testCtx(t), e, runs.charger)
	if !errors.Is(err, client.ErrInDoubt) || res != nil || runs.get(e.Key) != 0 {
		t.Errorf("caller-chosen owner: %+v, %v", res, err)
	}
}

func TestDoGivesUpOnAnUnknownClaimWithoutRunning(t *testing.T) {
	unknown := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"title":"t","status":503,"code":"outcome_unknown"}`)
		})
	}
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(unknown))
	c := newClient(t, []string{mem.URL}, client.WithMaxWait(20*time.Millisecond), client.WithDiscovery(false))
	runs := newCounter()
	res, err := c.Do(testCtx(t), chargeEffect("order-12"), runs.charger)
	if !errors.Is(err, client.ErrOutcomeUnknown) || res != nil || runs.get("stripe.charge:order-12") != 0 {
		t.Fatalf("result %+v, err %v, runs %d", res, err, runs.get("stripe.charge:order-12"))
	}

	// The caller's context ending stops it the same way.
	c = newClient(t, []string{mem.URL}, client.WithDiscovery(false))
	ctx, cancel := context.WithCancel(testCtx(t))
	go func() {
		_ = mem.WaitRequests(ctx, "claim", mem.Requests("claim")+3)
		cancel()
	}()
	res, err = c.Do(ctx, chargeEffect("order-12"), runs.charger)
	if !errors.Is(err, client.ErrOutcomeUnknown) || !errors.Is(err, context.Canceled) || res != nil || runs.get("stripe.charge:order-12") != 0 {
		t.Fatalf("canceled: result %+v, err %v", res, err)
	}
}

func TestDoInFlightPastMaxWaitIsErrInFlight(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL}, client.WithMaxWait(20*time.Millisecond))
	ctx := testCtx(t)
	e := chargeEffect("order-13")
	payload, _ := json.Marshal(e.Payload)
	if _, err := c.Claim(ctx, client.ClaimRequest{Key: e.Key, Tool: e.Tool, Payload: payload, Owner: "someone-else"}); err != nil {
		t.Fatal(err)
	}
	runs := newCounter()
	res, err := c.Do(ctx, e, runs.charger)
	if !errors.Is(err, client.ErrInFlight) || res != nil || runs.get(e.Key) != 0 {
		t.Fatalf("result %+v, err %v", res, err)
	}
	var p *client.Problem
	if !errors.As(err, &p) || p.Intent == nil || p.Intent.Owner != "someone-else" {
		t.Errorf("problem = %+v", p)
	}
}

func TestDoInFlightHolderFailsThenThisCallIsGranted(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	e := chargeEffect("order-14")
	payload, _ := json.Marshal(e.Payload)
	held, err := c.Claim(ctx, client.ClaimRequest{Key: e.Key, Tool: e.Tool, Payload: payload, Owner: "holder"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// Once Do has seen the key in flight, the holder reports failure.
		if mem.WaitRequests(ctx, "claim", 3) == nil {
			_, _ = c.Complete(ctx, client.CompleteRequest{Key: e.Key, Owner: "holder", FencingToken: held.FencingToken, Outcome: client.OutcomeFailed})
		}
	}()
	runs := newCounter()
	res, err := c.Do(ctx, e, runs.charger)
	if err != nil || res.Status != client.EffectExecuted || runs.get(e.Key) != 1 || res.Intent.Generation != 2 {
		t.Fatalf("result %+v, err %v, runs %d", res, err, runs.get(e.Key))
	}
}

func TestDoRefusalsAreTypedAndNothingRuns(t *testing.T) {
	ctx := testCtx(t)
	runs := newCounter()

	// in_doubt: a holder vanished.
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	e := chargeEffect("order-15")
	payload, _ := json.Marshal(e.Payload)
	if _, err := c.Claim(ctx, client.ClaimRequest{Key: e.Key, Tool: e.Tool, Payload: payload, Owner: "vanished"}); err != nil {
		t.Fatal(err)
	}
	mem.Ledger.Advance(time.Hour)
	res, err := c.Do(ctx, e, runs.charger)
	var p *client.Problem
	if !errors.Is(err, client.ErrInDoubt) || res != nil || !errors.As(err, &p) || p.Intent.Owner != "vanished" {
		t.Errorf("in_doubt: %+v, %v", res, err)
	}

	// rejected and pending approval come from policies; fake them.
	for _, tc := range []struct {
		status int
		body   string
		want   error
	}{
		{http.StatusForbidden, `{"title":"t","status":403,"code":"rejected","intent":{"key":"k","state":"rejected"}}`, client.ErrRejected},
		{http.StatusAccepted, `{"status":"pending_approval","intent":{"key":"k","state":"pending_approval"}}`, client.ErrPendingApproval},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			fmt.Fprint(w, tc.body)
		}))
		t.Cleanup(srv.Close)
		res, err := newClient(t, []string{srv.URL}, client.WithDiscovery(false)).Do(ctx, e, runs.charger)
		var p *client.Problem
		if !errors.Is(err, tc.want) || res != nil || !errors.As(err, &p) || p.Intent == nil || p.Intent.Key != "k" {
			t.Errorf("%d: %+v, %v (problem %+v)", tc.status, res, err, p)
		}
	}
	if runs.get(e.Key) != 0 {
		t.Errorf("fn ran %d times", runs.get(e.Key))
	}
}

func TestDoRefusesBadInputBeforeSending(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	fn := newCounter().charger
	for name, e := range map[string]client.Effect{
		"empty key":       {Tool: "t"},
		"long key":        {Key: strings.Repeat("k", 257), Tool: "t"},
		"unprintable key": {Key: "a\x00b", Tool: "t"},
		"no tool":         {Key: "k"},
		"raw not JSON":    {Key: "k", Tool: "t", Payload: json.RawMessage(`{"a":`)},
		"not marshalable": {Key: "k", Tool: "t", Payload: func() {}},
	} {
		if _, err := c.Do(testCtx(t), e, fn); !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("%s: err = %v, want ErrBadRequest", name, err)
		}
	}
	if _, err := c.Do(testCtx(t), chargeEffect("o"), nil); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("nil fn: err = %v", err)
	}
	if n := mem.Requests("claim"); n != 0 {
		t.Errorf("%d claims sent", n)
	}
}

func TestDoRenewsTheLeaseWhileTheEffectRuns(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	e := chargeEffect("order-16")
	e.Lease = 600 * time.Millisecond // renewed every 200 ms
	other := newClient(t, []string{mem.URL})
	payload, _ := json.Marshal(e.Payload)
	res, err := c.Do(ctx, e, func(ctx context.Context, g *client.Grant) (any, error) {
		// Two thirds of the lease pass on the ledger's clock; renewals
		// arrive; two thirds more pass: the original lease is over, the
		// renewed one is not.
		for range 2 {
			mem.Ledger.Advance(400 * time.Millisecond)
			if err := mem.WaitRequests(ctx, "renew", mem.Requests("renew")+2); err != nil {
				return nil, err
			}
		}
		_, err := other.Claim(ctx, client.ClaimRequest{Key: e.Key, Tool: e.Tool, Payload: payload, Owner: "other"})
		if !errors.Is(err, client.ErrInFlight) {
			return nil, fmt.Errorf("claim by another owner past the first lease: %v, want in_flight", err)
		}
		return "done", nil
	})
	if err != nil || res.Status != client.EffectExecuted {
		t.Fatalf("result %+v, err %v", res, err)
	}
	// Renewal stops with the effect: nothing renews a finished intent.
	if ops := auditOps(t, c, e.Key); strings.Contains(ops, "renew/invalid_state") || strings.Contains(ops, "renew/fenced") ||
		!strings.Contains(ops, "renew/ok") {
		t.Errorf("audit = %s", ops)
	}
}

func TestDoCancelsTheEffectWhenTheLeaseIsLost(t *testing.T) {
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, mem *clienttest.Memory, admin *client.Client, e client.Effect)
		want error
	}{
		{"in_doubt", func(t *testing.T, mem *clienttest.Memory, admin *client.Client, e client.Effect) {
			mem.Ledger.Advance(time.Hour)
		}, client.ErrInDoubt},
		{"fenced", func(t *testing.T, mem *clienttest.Memory, admin *client.Client, e client.Effect) {
			// The lease passed, an operator settled it as failed and another
			// owner was granted the key.
			ctx := testCtx(t)
			mem.Ledger.Advance(time.Hour)
			payload, _ := json.Marshal(e.Payload)
			if _, err := admin.Claim(ctx, client.ClaimRequest{Key: e.Key, Tool: e.Tool, Payload: payload, Owner: "probe"}); !errors.Is(err, client.ErrInDoubt) {
				t.Errorf("probe claim: %v", err)
			}
			if _, err := admin.Resolve(ctx, client.ResolveRequest{Key: e.Key, Outcome: client.OutcomeFailed, Actor: "ops", Reason: "checked"}); err != nil {
				t.Error(err)
			}
			if _, err := admin.Claim(ctx, client.ClaimRequest{Key: e.Key, Tool: e.Tool, Payload: payload, Owner: "next"}); err != nil {
				t.Error(err)
			}
		}, client.ErrFenced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := clienttest.NewMemory(t)
			c := newClient(t, []string{mem.URL})
			admin := newClient(t, []string{mem.URL})
			e := chargeEffect("order-17")
			e.Lease = 300 * time.Millisecond
			var cause error
			res, err := c.Do(testCtx(t), e, func(ctx context.Context, g *client.Grant) (any, error) {
				tc.lose(t, mem, admin, e)
				<-ctx.Done() // the next renewal is refused
				cause = context.Cause(ctx)
				return nil, cause // stopped before charging
			})
			if !errors.Is(cause, tc.want) {
				t.Fatalf("cause = %v, want %v", cause, tc.want)
			}
			if !errors.Is(err, tc.want) || res == nil || !res.Ran {
				t.Fatalf("result %+v, err %v", res, err)
			}
			switch tc.want {
			case client.ErrInDoubt:
				// The holder's late report is accepted: the effect did not
				// happen, so the key is free again.
				if res.Status != client.EffectFailed || res.Intent.State != client.StateFailed {
					t.Errorf("late failed report: %+v", res)
				}
			case client.ErrFenced:
				// The report is refused: the key moved on.
				if res.Status != "" {
					t.Errorf("fenced report: %+v", res)
				}
			}
		})
	}
}

func TestDoEffectUnknownRecordsNothing(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	e := chargeEffect("order-18")
	res, err := c.Do(ctx, e, func(context.Context, *client.Grant) (any, error) {
		return nil, fmt.Errorf("provider timed out: %w", client.ErrEffectUnknown)
	})
	if !errors.Is(err, client.ErrEffectUnknown) || res == nil || !res.Ran || res.Status != "" {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if mem.Requests("complete") != 0 {
		t.Error("an unknown effect was reported")
	}
	in, err := c.Get(ctx, e.Key, client.GetOptions{})
	if err != nil || in.State != client.StateDeclared {
		t.Fatalf("intent = %+v, %v", in, err)
	}
	// Once the lease passes the key is in doubt; nobody runs it again.
	mem.Ledger.Advance(time.Hour)
	runs := newCounter()
	if _, err := c.Do(ctx, e, runs.charger); !errors.Is(err, client.ErrInDoubt) || runs.get(e.Key) != 0 {
		t.Errorf("after the lease: %v, runs %d", err, runs.get(e.Key))
	}
}

func TestDoPanicStopsRenewingAndRecordsNothing(t *testing.T) {
	mem := clienttest.NewMemory(t)
	c := newClient(t, []string{mem.URL})
	e := chargeEffect("order-19")
	e.Lease = 150 * time.Millisecond
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_, _ = c.Do(testCtx(t), e, func(ctx context.Context, g *client.Grant) (any, error) {
			if err := mem.WaitRequests(ctx, "renew", 1); err != nil {
				return nil, err
			}
			panic("boom")
		})
	}()
	if mem.Requests("complete") != 0 {
		t.Error("a panicked effect was reported")
	}
	in, err := c.Get(testCtx(t), e.Key, client.GetOptions{})
	if err != nil || in.State != client.StateDeclared {
		t.Fatalf("intent = %+v, %v", in, err)
	}
}

func TestDoRetriesALostReportAndReportsAfterTheCallerGaveUp(t *testing.T) {
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(dropFirst("complete", nil)))
	c := newClient(t, []string{mem.URL})
	ctx, cancel := context.WithCancel(testCtx(t))
	runs := newCounter()
	res, err := c.Do(ctx, chargeEffect("order-20"), func(ctx context.Context, g *client.Grant) (any, error) {
		v, err := runs.charger(ctx, g)
		cancel() // the caller gives up right after the effect happened
		return v, err
	})
	if err != nil || res.Status != client.EffectExecuted || res.Intent.State != client.StateCommitted {
		t.Fatalf("result %+v, err %v", res, err)
	}
	if n := mem.Requests("complete"); n != 2 {
		t.Errorf("%d completes, want 2 (the lost one and its retry)", n)
	}
}

func TestDoRecordsAnEffectWhoseResultTheLedgerRefuses(t *testing.T) {
	mem := clienttest.NewMemory(t, clienttest.WithLimits(ledger.Limits{MaxResultBytes: 64}))
	c := newClient(t, []string{mem.URL})
	ctx := testCtx(t)
	e := chargeEffect("order-21")
	res, err := c.Do(ctx, e, func(context.Context, *client.Grant) (any, error) {
		return strings.Repeat("x", 100), nil
	})
	if !errors.Is(err, client.ErrBadRequest) || res == nil || res.Status != client.EffectExecuted || len(res.Result) != 0 {
		t.Fatalf("result %+v, err %v", res, err)
	}
	// Never run again: a later delivery is a duplicate (without a result).
	runs := newCounter()
	dup, err := c.Do(ctx, e, runs.charger)
	if err != nil || dup.Status != client.EffectDuplicate || runs.get(e.Key) != 0 {
		t.Fatalf("duplicate %+v, %v", dup, err)
	}
	if err := dup.Decode(new(any)); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("decode of no result: %v", err)
	}
}

func TestDoResumesAnUnknownClaimWithTheCallersOwner(t *testing.T) {
	// Every claim is applied, but its answer says the outcome is unknown,
	// until the network heals.
	var lossy atomic.Bool
	lossy.Store(true)
	mem := clienttest.NewMemory(t, clienttest.WithMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if clienttest.Op(r) != "claim" || !lossy.Load() {
				next.ServeHTTP(w, r)
				return
			}
			next.ServeHTTP(httptest.NewRecorder(), r)
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"title":"t","status":503,"code":"outcome_unknown"}`)
		})
	}))
	c := newClient(t, []string{mem.URL}, client.WithMaxWait(20*time.Millisecond))
	e := chargeEffect("order-22")
	e.Owner = client.NewOwner()
	runs := newCounter()
	if res, err := c.Do(testCtx(t), e, runs.charger); !errors.Is(err, client.ErrOutcomeUnknown) || res != nil || runs.get(e.Key) != 0 {
		t.Fatalf("lossy: %+v, %v", res, err)
	}
	lossy.Store(false)
	res, err := c.Do(testCtx(t), e, runs.charger)
	if err != nil || res.Status != client.EffectExecuted || runs.get(e.Key) != 1 || res.Intent.Generation != 1 || res.Owner != e.Owner {
		t.Fatalf("resumed: %+v, %v, runs %d", res, err, runs.get(e.Key))
	}
}

// TestDoNamespaceQuotas: a claim answered 429 namespace_rate_limited is
// claimed again and runs once, like rate_limited; one answered 507
// namespace_full is a clean refusal, ErrNamespaceFull, sent once, and the
// effect does not run; so is ledger_full (ErrLedgerFull) (a claim sent again would be granted here).
func TestDoNamespaceQuotas(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		code   string
		want   error // nil: executed
		claims int64
	}{
		{"namespace_rate_limited", http.StatusTooManyRequests, "namespace_rate_limited", nil, 2},
		{"rate_limited (control)", http.StatusTooManyRequests, "rate_limited", nil, 2},
		{"namespace_full", http.StatusInsufficientStorage, "namespace_full", client.ErrNamespaceFull, 1},
		{"ledger_full", http.StatusInsufficientStorage, "ledger_full", client.ErrLedgerFull, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var claims atomic.Int64
			refuseFirst := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if clienttest.Op(r) != "claim" || claims.Add(1) > 1 {
						next.ServeHTTP(w, r)
						return
					}
					w.Header().Set("Content-Type", "application/problem+json")
					w.WriteHeader(tc.status)
					fmt.Fprintf(w, `{"title":"t","status":%d,"code":%q,"retry_after_ms":5}`, tc.status, tc.code)
				})
			}
			mem := clienttest.NewMemory(t, clienttest.WithMiddleware(refuseFirst))
			c := newClient(t, []string{mem.URL}, client.WithDiscovery(false))
			runs := newCounter()
			e := chargeEffect("order-quota")
			res, err := c.Do(testCtx(t), e, runs.charger)
			if tc.want == nil {
				if err != nil || res.Status != client.EffectExecuted || runs.get(e.Key) != 1 {
					t.Fatalf("%+v, %v, runs %d; want executed once", res, err, runs.get(e.Key))
				}
			} else {
				var p *client.Problem
				if !errors.Is(err, tc.want) || res != nil || !errors.As(err, &p) || p.Status != tc.status || runs.get(e.Key) != 0 {
					t.Fatalf("%+v, %v, runs %d; want %v and nothing run", res, err, runs.get(e.Key), tc.want)
				}
				if _, err := c.Get(testCtx(t), e.Key, client.GetOptions{}); !errors.Is(err, client.ErrNotFound) {
					t.Errorf("the refused key: %v, want not found (nothing written)", err)
				}
			}
			if n := claims.Load(); n != tc.claims {
				t.Errorf("%d claims sent, want %d", n, tc.claims)
			}
		})
	}
}
