package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
)

// fakeSteps is a ledger for Hold's unit tests: it records what it is
// asked, refuses results longer than maxResult as a bad request, and
// refuses (or lets run) renewals as told.
type fakeSteps struct {
	maxResult int
	loseWith  error // KeepAlive reports this lost at once, if set

	mu        sync.Mutex
	renew     client.RenewRequest
	reports   []client.CompleteRequest
	deadlines []bool // whether each report's context had a deadline and was live
	commits   []client.CommitRequest
	abandons  []client.ClaimRequest
	fail      error // what Commit and Abandon answer
}

func (f *fakeSteps) KeepAlive(ctx context.Context, req client.RenewRequest, stop <-chan struct{}, lost func(error)) {
	f.mu.Lock()
	f.renew = req
	f.mu.Unlock()
	if f.loseWith != nil {
		lost(f.loseWith)
		return
	}
	select {
	case <-stop:
	case <-ctx.Done():
	}
}

func (f *fakeSteps) Report(ctx context.Context, req client.CompleteRequest) (*client.IntentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, bounded := ctx.Deadline()
	f.reports = append(f.reports, req)
	f.deadlines = append(f.deadlines, bounded && ctx.Err() == nil)
	if len(req.Result) > f.maxResult {
		return nil, fmt.Errorf("result of %d bytes: %w", len(req.Result), client.ErrBadRequest)
	}
	return &client.IntentResponse{Status: client.Status("ok"), Intent: &client.Intent{Key: req.Key, Result: req.Result}}, nil
}

func (f *fakeSteps) Commit(_ context.Context, req client.CommitRequest) (*client.IntentResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits = append(f.commits, req)
	return &client.IntentResponse{Intent: &client.Intent{Key: req.Key}}, f.fail
}

func (f *fakeSteps) Abandon(_ context.Context, req client.ClaimRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.abandons = append(f.abandons, req)
	return f.fail
}

// testHold holds a grant of k:1 to o-1 (fencing token 7) claimed with
// lease and granted with leaseMS.
func testHold(f *fakeSteps, lease time.Duration, leaseMS int64, opts client.HoldOptions) *client.Held {
	req := client.ClaimRequest{Key: "k:1", Tool: "t", Owner: "o-1", Lease: lease}
	resp := &client.ClaimResponse{Status: client.StatusGranted, FencingToken: 7, Owner: "o-1", Intent: &client.Intent{Key: "k:1", LeaseMS: leaseMS}}
	return client.Hold(context.Background(), f, req, resp, opts)
}

func TestHoldRenewsTheLeaseTheGrantHolds(t *testing.T) {
	cases := []struct {
		name    string
		leaseMS int64
		opt     time.Duration
		want    time.Duration
	}{
		{"the grant's", 2000, time.Second, 2 * time.Second},
		{"the claim's when the grant names none", 0, time.Second, time.Second},
		{"the default", 0, 0, client.DefaultLease},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSteps{}
			h := testHold(f, tc.opt, tc.leaseMS, client.HoldOptions{})
			h.Stop()
			h.Stop() // a second Stop is harmless
			want := client.RenewRequest{Key: "k:1", Owner: "o-1", FencingToken: 7, Lease: tc.want}
			if f.renew != want || h.Lease() != tc.want || h.Grant().Owner != "o-1" || h.Grant().FencingToken != 7 {
				t.Errorf("renewed %+v (lease %v), want %+v", f.renew, h.Lease(), want)
			}
			if !errors.Is(h.Context().Err(), context.Canceled) || context.Cause(h.Context()) != context.Canceled {
				t.Errorf("after Stop the context is %v (cause %v)", h.Context().Err(), context.Cause(h.Context()))
			}
		})
	}
}

func TestHoldCancelsTheEffectWhenTheLeaseIsLost(t *testing.T) {
	lostErr := fmt.Errorf("renew: %w", client.ErrFenced)
	f := &fakeSteps{loseWith: lostErr}
	var onLost error
	h := testHold(f, 0, 0, client.HoldOptions{OnLost: func(err error) { onLost = err }})
	defer h.Stop()
	<-h.Context().Done()
	if !errors.Is(context.Cause(h.Context()), client.ErrFenced) || onLost != lostErr {
		t.Errorf("cause %v, OnLost got %v", context.Cause(h.Context()), onLost)
	}
}

func TestHeldRecordFallsBackToASmallerResult(t *testing.T) {
	big := json.RawMessage(`{"body":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`)
	small := json.RawMessage(`{"omitted":true}`)
	cases := []struct {
		name      string
		result    json.RawMessage
		smaller   func() json.RawMessage
		max       int
		sent      []json.RawMessage // the results of each report, in order
		recorded  json.RawMessage
		refused   bool
		wantError bool
	}{
		{"fits", big, nil, 100, []json.RawMessage{big}, big, false, false},
		{"the smaller one", big, func() json.RawMessage { return small }, 20, []json.RawMessage{big, small}, small, true, false},
		{"none when the smaller is refused too", big, func() json.RawMessage { return small }, 5, []json.RawMessage{big, small, nil}, nil, true, false},
		{"none when there is no smaller", big, nil, 20, []json.RawMessage{big, nil}, nil, true, false},
		{"none when smaller makes none", big, func() json.RawMessage { return nil }, 20, []json.RawMessage{big, nil}, nil, true, false},
		{"no result refused is an error", nil, nil, -1, []json.RawMessage{nil}, nil, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSteps{maxResult: tc.max}
			h := testHold(f, 0, 0, client.HoldOptions{})
			h.Stop()
			rec, err := h.Record(context.Background(), client.OutcomeExecuted, tc.result, tc.smaller)
			if (err != nil) != tc.wantError {
				t.Fatalf("err %v", err)
			}
			if len(f.reports) != len(tc.sent) {
				t.Fatalf("%d reports, want %d: %+v", len(f.reports), len(tc.sent), f.reports)
			}
			for i, r := range f.reports {
				if string(r.Result) != string(tc.sent[i]) || r.Outcome != client.OutcomeExecuted || r.FencingToken != 7 || r.Owner != "o-1" {
					t.Errorf("report %d: %+v, want result %s", i, r, tc.sent[i])
				}
			}
			if err != nil {
				return
			}
			if string(rec.Result) != string(tc.recorded) || (rec.Refused != nil) != tc.refused ||
				(tc.refused && !errors.Is(rec.Refused, client.ErrBadRequest)) {
				t.Errorf("recorded %s (refused %v), want %s", rec.Result, rec.Refused, tc.recorded)
			}
		})
	}
}

func TestHeldRecordOutlivesItsCaller(t *testing.T) {
	f := &fakeSteps{maxResult: 100}
	h := testHold(f, 0, 0, client.HoldOptions{ReportTimeout: time.Minute})
	h.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller left
	if _, err := h.Record(ctx, client.OutcomeFailed, json.RawMessage(`{"error":"x"}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if len(f.deadlines) != 1 || !f.deadlines[0] || f.reports[0].Outcome != client.OutcomeFailed {
		t.Errorf("reports %+v, bounded and live: %v", f.reports, f.deadlines)
	}
	if len(f.commits) != 1 || f.commits[0] != (client.CommitRequest{Key: "k:1", Owner: "o-1"}) {
		t.Errorf("commits %+v", f.commits)
	}
}

func TestBackgroundCommitsAndReleases(t *testing.T) {
	for _, fail := range []error{nil, client.ErrUnavailable} {
		t.Run(fmt.Sprint(fail), func(t *testing.T) {
			f := &fakeSteps{fail: fail}
			var bg client.Background
			var mu sync.Mutex
			var failed []error
			onFail := func(err error) { mu.Lock(); failed = append(failed, err); mu.Unlock() }
			h := testHold(f, 0, 0, client.HoldOptions{})
			h.Stop()
			h.CommitLater(&bg, onFail)
			claim := client.ClaimRequest{Key: "k:2", Tool: "t", Owner: "o-2"}
			bg.Release(f, claim, time.Minute, onFail)
			if err := bg.Wait(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(f.commits) != 1 || f.commits[0].Key != "k:1" || len(f.abandons) != 1 || f.abandons[0].Key != claim.Key {
				t.Errorf("commits %+v, abandons %+v", f.commits, f.abandons)
			}
			if want := map[bool]int{false: 0, true: 2}[fail != nil]; len(failed) != want {
				t.Errorf("failed got %v, want %d errors", failed, want)
			}
		})
	}
}
