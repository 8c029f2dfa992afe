package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
)

// runnerLimit bounds one SDK's whole run: a hang guard.
const runnerLimit = 5 * time.Minute

// scenario is one entry of scenarios.json; each uses the fields it needs.
type scenario struct {
	ID             string `json:"id"`
	Does           string `json:"does"`
	Tool           string `json:"tool"`
	Callers        int    `json:"callers"`
	Calls          int    `json:"calls"`
	FnMS           int    `json:"fn_ms"`
	LeaseMS        int    `json:"lease_ms"`
	WaitMS         int    `json:"wait_ms"`
	ApproveAfterMS int    `json:"approve_after_ms"`
	KillAfterMS    int    `json:"kill_after_ms"`
	Waiters        int    `json:"waiters"`
	SettleMS       int    `json:"settle_ms"`
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func loadScenarios(t *testing.T) []scenario {
	t.Helper()
	b, err := os.ReadFile("scenarios.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Scenarios []scenario `json:"scenarios"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Scenarios
}

// TestConformance runs every scenario with each SDK against one real
// cluster: Go in-process, Python and TypeScript through their runners.
func TestConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of real processes: integration tier")
	}
	h := startHarness(t)
	scenarios := loadScenarios(t)
	t.Run("go", func(t *testing.T) { runGo(t, h, scenarios) })
	t.Run("python", func(t *testing.T) {
		runExternal(t, h, scenarios, "python", "python3", "sdk/python/tests/conformance.py")
	})
	t.Run("typescript", func(t *testing.T) {
		runExternal(t, h, scenarios, "typescript", "node", "sdk/typescript/test/conformance.mjs")
	})
}

// outcome is one line a runner prints.
type outcome struct {
	Scenario string `json:"scenario"`
	OK       bool   `json:"ok"`
	Detail   string `json:"detail"`
}

// runExternal runs an SDK's runner from the repository root and reports
// each scenario it printed as a subtest; a scenario it did not print, a
// line that is not an outcome, or a non-zero exit fails.
func runExternal(t *testing.T, h *harness, scenarios []scenario, sdk, interpreter, runner string) {
	if _, err := exec.LookPath(interpreter); err != nil {
		t.Fatalf("%s is not installed (.ci/run installs it): %v", interpreter, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runnerLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, interpreter, runner)
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), h.env(runID(sdk))...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	seen := map[string]outcome{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var o outcome
		if jerr := json.Unmarshal([]byte(line), &o); jerr != nil || o.Scenario == "" {
			t.Errorf("%s runner printed a line that is not an outcome: %q", sdk, line)
			continue
		}
		seen[o.Scenario] = o
	}
	for _, s := range scenarios {
		t.Run(s.ID, func(t *testing.T) {
			o, ok := seen[s.ID]
			switch {
			case !ok:
				t.Errorf("the %s runner did not report %s", sdk, s.ID)
			case !o.OK:
				t.Errorf("%s: %s", s.ID, o.Detail)
			default:
				t.Logf("%s", o.Detail)
			}
		})
	}
	if err != nil || t.Failed() {
		t.Errorf("%s runner: %v\nstderr:\n%s", sdk, err, stderr.String())
	}
}

// goRunner runs the scenarios with the Go SDK.
type goRunner struct {
	h                *harness
	run              string
	agent, approver  *client.Client
	scenarioByID     map[string]scenario
	sequence         atomic.Int64
	controlHTTP      *http.Client
	rateLimitedCount func() (int, error)
}

func runGo(t *testing.T, h *harness, scenarios []scenario) {
	agent, err := client.New(h.addrs, client.WithAPIKey(h.agentKey))
	if err != nil {
		t.Fatal(err)
	}
	approver, err := client.New(h.addrs, client.WithAPIKey(h.approverKey))
	if err != nil {
		t.Fatal(err)
	}
	r := &goRunner{h: h, run: runID("go"), agent: agent, approver: approver, controlHTTP: &http.Client{Timeout: startLimit + 10*time.Second}}
	checks := map[string]func(context.Context, scenario) (string, error){
		"key-vectors":                   r.keyVectors,
		"bad-input-local":               r.badInput,
		"granted-executed":              r.grantedExecuted,
		"duplicate":                     r.duplicate,
		"divergent":                     r.divergent,
		"concurrent-one-effect":         r.concurrent,
		"waiters-claim-once-per-change": r.waitersClaimOnce,
		"effect-unknown-in-doubt":       r.effectUnknown,
		"lease-renewal":                 r.leaseRenewal,
		"approval":                      r.approval,
		"rate-limited-waited-out":       r.rateLimited,
		"leader-kill":                   r.leaderKill,
	}
	for _, s := range scenarios {
		t.Run(s.ID, func(t *testing.T) {
			check, ok := checks[s.ID]
			if !ok {
				t.Fatalf("the Go runner has no scenario %s", s.ID)
			}
			ctx, cancel := context.WithTimeout(context.Background(), runnerLimit)
			defer cancel()
			detail, err := check(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(detail)
		})
	}
}

// key is a fresh key of this run.
func (r *goRunner) key(name string) string {
	return client.KeyOf(r.run, name, fmt.Sprint(r.sequence.Add(1)))
}

// counted returns an fn that counts its runs, takes d and returns result.
func counted(runs *atomic.Int64, d time.Duration, result any) func(context.Context, *client.Grant) (any, error) {
	return func(ctx context.Context, g *client.Grant) (any, error) {
		runs.Add(1)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return result, nil
	}
}

func (r *goRunner) keyVectors(context.Context, scenario) (string, error) {
	b, err := os.ReadFile("key-vectors.json")
	if err != nil {
		return "", err
	}
	var vs []keyVector
	if err := json.Unmarshal(b, &vs); err != nil {
		return "", err
	}
	for _, v := range vs {
		if got := client.KeyOf(v.Parts...); got != v.Key {
			return "", fmt.Errorf("KeyOf(%q) = %q, want %q", v.Parts, got, v.Key)
		}
	}
	return fmt.Sprintf("%d vectors", len(vs)), nil
}

func (r *goRunner) badInput(ctx context.Context, s scenario) (string, error) {
	var runs atomic.Int64
	fn := counted(&runs, 0, "never")
	good := r.key("bad-input")
	cases := []client.Effect{
		{Key: good, Tool: "conformance.charge", Payload: func() {}},
		{Key: strings.Repeat("k", client.MaxKeyBytes+1), Tool: "conformance.charge", Payload: 1},
		{Key: "", Tool: "conformance.charge", Payload: 1},
		{Key: good, Tool: "", Payload: 1},
	}
	for _, e := range cases {
		if _, err := r.agent.Do(ctx, e, fn); !errors.Is(err, client.ErrBadRequest) {
			return "", fmt.Errorf("Do(key %d bytes, tool %q): %v, want ErrBadRequest", len(e.Key), e.Tool, err)
		}
	}
	if runs.Load() != 0 {
		return "", fmt.Errorf("fn ran %d times on bad input", runs.Load())
	}
	if _, err := r.agent.Get(ctx, good, client.GetOptions{}); !errors.Is(err, client.ErrNotFound) {
		return "", fmt.Errorf("after refused input the key exists (or the read failed): %v", err)
	}
	return "4 bad inputs refused locally; nothing written", nil
}

// executed runs one Do on key and checks fn ran once with its result.
func (r *goRunner) executed(ctx context.Context, key, tool string, payload, result any, lease time.Duration, d time.Duration) error {
	var runs atomic.Int64
	res, err := r.agent.Do(ctx, client.Effect{Key: key, Tool: tool, Payload: payload, Lease: lease}, counted(&runs, d, result))
	if err != nil {
		return fmt.Errorf("Do: %w", err)
	}
	want, _ := json.Marshal(result)
	if !res.Ran || runs.Load() != 1 || res.Status != client.EffectExecuted || !bytes.Equal(res.Result, want) {
		return fmt.Errorf("Do = ran %v (fn ran %d), status %q, result %s; want one run, executed, %s", res.Ran, runs.Load(), res.Status, res.Result, want)
	}
	in, err := r.agent.Get(ctx, key, client.GetOptions{})
	if err != nil {
		return fmt.Errorf("get: %w", err)
	}
	if in.State != client.StateExecuted && in.State != client.StateCommitted {
		return fmt.Errorf("state %s after Do, want executed or committed", in.State)
	}
	return nil
}

var charge = map[string]any{"amount": 4200, "currency": "EUR"}

func (r *goRunner) grantedExecuted(ctx context.Context, s scenario) (string, error) {
	return "fn ran once; executed", r.executed(ctx, r.key("executed"), s.Tool, charge, map[string]string{"charge": "ch_1"}, 0, 0)
}

func (r *goRunner) duplicate(ctx context.Context, s scenario) (string, error) {
	key := r.key("duplicate")
	result := map[string]string{"charge": "ch_dup"}
	if err := r.executed(ctx, key, s.Tool, charge, result, 0, 0); err != nil {
		return "", err
	}
	var runs atomic.Int64
	res, err := r.agent.Do(ctx, client.Effect{Key: key, Tool: s.Tool, Payload: charge}, counted(&runs, 0, "again"))
	want, _ := json.Marshal(result)
	if err != nil || res.Ran || runs.Load() != 0 || res.Status != client.EffectDuplicate || !bytes.Equal(res.Result, want) {
		return "", fmt.Errorf("second Do: %+v, %v (fn ran %d); want duplicate with %s and no run", res, err, runs.Load(), want)
	}
	return "second Do returned the recorded result; fn ran 0 times", nil
}

func (r *goRunner) divergent(ctx context.Context, s scenario) (string, error) {
	key := r.key("divergent")
	if err := r.executed(ctx, key, s.Tool, charge, "ok", 0, 0); err != nil {
		return "", err
	}
	var runs atomic.Int64
	_, err := r.agent.Do(ctx, client.Effect{Key: key, Tool: s.Tool, Payload: map[string]any{"amount": 9900, "currency": "EUR"}}, counted(&runs, 0, "x"))
	if !errors.Is(err, client.ErrDivergent) || runs.Load() != 0 {
		return "", fmt.Errorf("Do with another payload: %v (fn ran %d), want ErrDivergent and no run", err, runs.Load())
	}
	return "refused as divergent; fn ran 0 times", nil
}

func (r *goRunner) concurrent(ctx context.Context, s scenario) (string, error) {
	key := r.key("concurrent")
	var runs atomic.Int64
	fn := counted(&runs, ms(s.FnMS), map[string]string{"charge": "ch_once"})
	want, _ := json.Marshal(map[string]string{"charge": "ch_once"})
	errs := make(chan error, s.Callers)
	var wg sync.WaitGroup
	for i := 0; i < s.Callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := r.agent.Do(ctx, client.Effect{Key: key, Tool: s.Tool, Payload: charge}, fn)
			switch {
			case err != nil:
				errs <- err
			case !bytes.Equal(res.Result, want):
				errs <- fmt.Errorf("a caller got %s, want %s", res.Result, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return "", err
	}
	if runs.Load() != 1 {
		return "", fmt.Errorf("fn ran %d times for %d concurrent callers", runs.Load(), s.Callers)
	}
	return fmt.Sprintf("%d callers, fn ran once, every caller got its result", s.Callers), nil
}

// claimWatch is a RoundTripper that watches the claim answers (POST
// /v1/intents) its client receives: how many the ledger answered (2xx, or
// a 409 in_flight refusal) and which owners were refused in_flight.
type claimWatch struct {
	base     http.RoundTripper
	mu       sync.Mutex
	answered int
	refused  map[string]int // owner -> in_flight answers
	changed  chan struct{}  // closed and replaced on every refusal
}

func newClaimWatch() *claimWatch {
	return &claimWatch{base: http.DefaultTransport, refused: map[string]int{}, changed: make(chan struct{})}
}

func (w *claimWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/intents" || req.GetBody == nil {
		return w.base.RoundTrip(req)
	}
	var claim struct {
		Owner string `json:"owner"`
	}
	if body, err := req.GetBody(); err == nil {
		_ = json.NewDecoder(body).Decode(&claim)
		body.Close()
	}
	resp, err := w.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	b, rerr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if rerr != nil {
		return resp, nil
	}
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(b, &p)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case resp.StatusCode/100 == 2:
		w.answered++
	case resp.StatusCode == http.StatusConflict && p.Code == "in_flight":
		w.answered++
		w.refused[claim.Owner]++
		close(w.changed)
		w.changed = make(chan struct{})
	}
	return resp, nil
}

// state returns the answers seen, the owners refused and a channel closed
// at the next refusal.
func (w *claimWatch) state() (answered, owners int, next <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.answered, len(w.refused), w.changed
}

// refusalNote matches the reason of a coalesced refusal note
// (fsm.refusalReason): its count is the claims it stands for.
var refusalNote = regexp.MustCompile(`^(\d+) (in_flight|in_doubt) refusals of fencing token \d+ by owners `)

// trailClaims counts the claims a key's audit trail records: an op claim
// event counts 1, a refusal note its N.
type trailClaims struct {
	total, granted, duplicate, refusedEvents, refusedNoted, notes int
}

func countClaims(t *client.AuditTrail) (trailClaims, error) {
	var c trailClaims
	for _, e := range t.Events {
		if e.Op != "claim" {
			continue
		}
		n := 1
		if m := refusalNote.FindStringSubmatch(e.Reason); m != nil {
			v, err := strconv.Atoi(m[1])
			if err != nil {
				return c, fmt.Errorf("refusal note %q: %w", e.Reason, err)
			}
			n = v
			c.notes++
			c.refusedNoted += n
		} else {
			switch e.Status {
			case "granted":
				c.granted++
			case "duplicate":
				c.duplicate++
			case "in_flight":
				c.refusedEvents++
			}
		}
		c.total += n
	}
	return c, nil
}

func (c trailClaims) String() string {
	return fmt.Sprintf("%d claims (%d granted, %d duplicate, %d refused as events, %d refused in %d notes)",
		c.total, c.granted, c.duplicate, c.refusedEvents, c.refusedNoted, c.notes)
}

func (r *goRunner) waitersClaimOnce(ctx context.Context, s scenario) (string, error) {
	key := r.key("waiters")
	watch := newClaimWatch()
	c, err := client.New(r.h.addrs, client.WithAPIKey(r.h.agentKey),
		client.WithHTTPClient(&http.Client{Timeout: client.DefaultHTTPTimeout, Transport: watch}))
	if err != nil {
		return "", err
	}
	wait := ms(s.WaitMS)
	result := map[string]string{"charge": "ch_waited"}
	want, _ := json.Marshal(result)
	var runs atomic.Int64
	granted, release := make(chan struct{}), make(chan struct{})
	fn := func(ctx context.Context, g *client.Grant) (any, error) {
		if runs.Add(1) == 1 {
			close(granted)
		}
		select {
		case <-release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return result, nil
	}
	type done struct {
		res *client.EffectResult
		err error
	}
	holder := make(chan done, 1)
	go func() {
		res, err := c.Do(ctx, client.Effect{Key: key, Tool: s.Tool, Payload: charge}, fn)
		holder <- done{res, err}
	}()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	select {
	case <-granted:
	case d := <-holder:
		return "", fmt.Errorf("the holder's Do ended before fn ran: %+v %v", d.res, d.err)
	case <-time.After(wait):
		return "", fmt.Errorf("the holder was not granted within %v", wait)
	}
	waiters := make(chan done, s.Waiters)
	for range s.Waiters {
		go func() {
			res, err := c.Do(ctx, client.Effect{Key: key, Tool: s.Tool, Payload: charge}, fn)
			waiters <- done{res, err}
		}()
	}
	// Release once every waiter's first claim was answered in_flight.
	deadline := time.After(wait)
	for {
		_, owners, next := watch.state()
		if owners >= s.Waiters {
			break
		}
		select {
		case <-next:
		case <-deadline:
			return "", fmt.Errorf("only %d of %d waiters were refused in_flight within %v", owners, s.Waiters, wait)
		}
	}
	close(release)
	released = true
	h := <-holder
	if h.err != nil || !h.res.Ran || h.res.Status != client.EffectExecuted || !bytes.Equal(h.res.Result, want) {
		return "", fmt.Errorf("the holder's Do: %+v %v, want executed with %s", h.res, h.err, want)
	}
	for range s.Waiters {
		d := <-waiters
		if d.err != nil || d.res.Ran || d.res.Status != client.EffectDuplicate || !bytes.Equal(d.res.Result, want) {
			return "", fmt.Errorf("a waiter's Do: %+v %v, want the duplicate with %s", d.res, d.err, want)
		}
	}
	if n := runs.Load(); n != 1 {
		return "", fmt.Errorf("fn ran %d times", n)
	}
	// Count the trail once it holds every answer the client saw and has
	// not changed for settle_ms (the leader notes refusals every second).
	answered, _, _ := watch.state()
	var counted trailClaims
	stable := time.Now()
	end := time.Now().Add(wait)
	for {
		t, err := r.agent.Audit(ctx, key)
		if err != nil {
			return "", fmt.Errorf("audit: %w", err)
		}
		got, err := countClaims(t)
		if err != nil {
			return "", err
		}
		if got != counted {
			counted, stable = got, time.Now()
		}
		if counted.total >= answered && time.Since(stable) >= ms(s.SettleMS) {
			break
		}
		if time.Now().After(end) {
			return "", fmt.Errorf("the trail did not settle within %v: %v, the client saw %d claim answers", wait, counted, answered)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if bound := 1 + 2*s.Waiters; counted.total > bound {
		return "", fmt.Errorf("the trail counts %v, more than 1 + 2 x %d = %d", counted, s.Waiters, bound)
	}
	return fmt.Sprintf("%d waiters returned the duplicate, fn ran once; the client saw %d claim answers; the trail counts %v (bound %d)",
		s.Waiters, answered, counted, 1+2*s.Waiters), nil
}

func (r *goRunner) effectUnknown(ctx context.Context, s scenario) (string, error) {
	key := r.key("unknown")
	_, err := r.agent.Do(ctx, client.Effect{Key: key, Tool: s.Tool, Payload: charge, Lease: ms(s.LeaseMS)},
		func(context.Context, *client.Grant) (any, error) { return nil, client.ErrEffectUnknown })
	if !errors.Is(err, client.ErrEffectUnknown) {
		return "", fmt.Errorf("Do: %v, want ErrEffectUnknown", err)
	}
	deadline := time.Now().Add(ms(s.WaitMS))
	for {
		in, err := r.agent.Get(ctx, key, client.GetOptions{})
		if err == nil && in.State == client.StateInDoubt {
			return "in_doubt after the lease passed", nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("not in_doubt within %v: %+v %v", ms(s.WaitMS), in, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (r *goRunner) leaseRenewal(ctx context.Context, s scenario) (string, error) {
	err := r.executed(ctx, r.key("renewal"), s.Tool, charge, "kept", ms(s.LeaseMS), ms(s.FnMS))
	return fmt.Sprintf("fn of %v under a %v lease ran once", ms(s.FnMS), ms(s.LeaseMS)), err
}

func (r *goRunner) approval(ctx context.Context, s scenario) (string, error) {
	key := r.key("approval")
	var runs atomic.Int64
	type done struct {
		res *client.EffectResult
		err error
	}
	ch := make(chan done, 1)
	go func() {
		res, err := r.agent.Do(ctx, client.Effect{Key: key, Tool: s.Tool, Payload: charge, ApprovalWait: ms(s.WaitMS)},
			counted(&runs, 0, map[string]string{"refund": "re_1"}))
		ch <- done{res, err}
	}()
	time.Sleep(ms(s.ApproveAfterMS)) // the scenario: a human decides a while later
	if runs.Load() != 0 {
		return "", errors.New("fn ran before the approval")
	}
	deadline := time.Now().Add(ms(s.WaitMS))
	for {
		_, err := r.approver.Approve(ctx, client.DecisionRequest{Key: key, Reason: "conformance"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) || !errors.Is(err, client.ErrNotFound) {
			return "", fmt.Errorf("approve: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	d := <-ch
	if d.err != nil || !d.res.Ran || runs.Load() != 1 {
		return "", fmt.Errorf("Do after the approval: %+v %v (fn ran %d)", d.res, d.err, runs.Load())
	}
	return "Do waited in pending_approval; approved; fn ran once", nil
}

func (r *goRunner) rateLimited(ctx context.Context, s scenario) (string, error) {
	key := r.key("rate")
	if err := r.executed(ctx, key, s.Tool, charge, "ok", 0, 0); err != nil {
		return "", err
	}
	before, err := r.controlCount(ctx)
	if err != nil {
		return "", err
	}
	errs := make(chan error, s.Callers)
	var wg sync.WaitGroup
	for i := 0; i < s.Callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := r.agent.Get(ctx, key, client.GetOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return "", fmt.Errorf("a get failed: %w", err)
	}
	after, err := r.controlCount(ctx)
	if err != nil {
		return "", err
	}
	if after <= before {
		return "", fmt.Errorf("%d concurrent gets of one key drew no 429 (count %d -> %d): the scenario proves nothing", s.Callers, before, after)
	}
	return fmt.Sprintf("%d gets all succeeded; the cluster answered %d 429s meanwhile", s.Callers, after-before), nil
}

func (r *goRunner) controlCount(ctx context.Context) (int, error) {
	var out struct {
		Count int `json:"count"`
	}
	return out.Count, r.control(ctx, http.MethodGet, "/rate-limited", &out)
}

func (r *goRunner) control(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, r.h.control.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := r.controlHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("control %s %s: %s", method, path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (r *goRunner) leaderKill(ctx context.Context, s scenario) (string, error) {
	type call struct {
		key  string
		runs atomic.Int64
		res  *client.EffectResult
		err  error
	}
	calls := make([]*call, s.Calls)
	var wg sync.WaitGroup
	for i := range calls {
		c := &call{key: r.key("kill")}
		calls[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.res, c.err = r.agent.Do(ctx, client.Effect{Key: c.key, Tool: s.Tool, Payload: charge}, counted(&c.runs, ms(s.FnMS), "ok"))
		}()
	}
	time.Sleep(ms(s.KillAfterMS))
	var killed struct {
		Killed string `json:"killed"`
	}
	if err := r.control(ctx, http.MethodPost, "/kill-leader", &killed); err != nil {
		return "", err
	}
	wg.Wait()
	var restarted map[string]bool
	if err := r.control(ctx, http.MethodPost, "/restart", &restarted); err != nil {
		return "", err
	}
	ok, failed := 0, 0
	var reasons []string
	for _, c := range calls {
		switch n := c.runs.Load(); {
		case n > 1:
			return "", fmt.Errorf("%s: fn ran %d times", c.key, n)
		case c.err == nil && (n != 1 || !c.res.Ran):
			return "", fmt.Errorf("%s: Do returned a result but fn ran %d times", c.key, n)
		case c.err == nil:
			ok++
		default:
			failed++
			if !slices.Contains(reasons, c.err.Error()) && len(reasons) < 3 {
				reasons = append(reasons, c.err.Error())
			}
		}
	}
	return fmt.Sprintf("killed %s: %d calls ran fn once and returned, %d ended with an error (%s); none ran twice",
		killed.Killed, ok, failed, strings.Join(reasons, "; ")), nil
}
