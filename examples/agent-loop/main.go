// Command agent-loop plays an AI agent that charges a list of orders through
// the charge tool (examples/charge-tool) the way agent runtimes really
// deliver tool calls: each order is sent twice in parallel (two subagents),
// one of the two gives up before the answer arrives and retries (a lost
// ACK), every order is sent again later (a re-poll after context
// compaction), and one retry changes the amount (a divergent retry). It then
// reads the tool's charges and checks that every order was charged exactly
// once, exiting 1 otherwise.
//
//	go run ./examples/agent-loop --tool http://127.0.0.1:8090 --orders 5
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	tool       string
	orders     int
	run        string        // tags this run's order IDs, so runs do not collide
	impatience time.Duration // the impatient delivery's timeout
	attempts   int
}

type chargeRequest struct {
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

type answer struct {
	Status string `json:"status"`
	Charge struct {
		ID string `json:"id"`
	} `json:"charge"`
	Error string `json:"error"`
}

// agent delivers tool calls and prints what happened.
type agent struct {
	cfg  config
	hc   *http.Client
	sent atomic.Int64 // requests sent to the tool
	mu   sync.Mutex
	out  io.Writer
}

func (a *agent) logf(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	fmt.Fprintf(a.out, format+"\n", args...)
}

// send delivers one call once, within timeout.
func (a *agent) send(ctx context.Context, req chargeRequest, timeout time.Duration) (int, answer, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	a.sent.Add(1)
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.tool+"/charge", bytes.NewReader(body))
	if err != nil {
		return 0, answer{}, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(hreq)
	if err != nil {
		return 0, answer{}, err
	}
	defer resp.Body.Close()
	var ans answer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return resp.StatusCode, answer{}, err
	}
	return resp.StatusCode, ans, nil
}

// deliver sends the same call until it gets a definite answer, as an agent
// runtime retries a tool call: same arguments every time. The first try
// waits only first; later ones wait normally.
func (a *agent) deliver(ctx context.Context, label string, req chargeRequest, first time.Duration) {
	timeout := first
	for attempt := 1; attempt <= a.cfg.attempts; attempt++ {
		code, ans, err := a.send(ctx, req, timeout)
		timeout = time.Minute
		switch {
		case err != nil:
			a.logf("%-22s %-14s try %d: no answer (%v), retrying", req.OrderID, label, attempt, shortErr(err))
		case code == http.StatusServiceUnavailable || code == http.StatusConflict:
			a.logf("%-22s %-14s try %d: %s, retrying", req.OrderID, label, attempt, ans.Status)
		case code == http.StatusOK:
			a.logf("%-22s %-14s try %d: %-9s charge %s", req.OrderID, label, attempt, ans.Status, ans.Charge.ID)
			return
		default:
			a.logf("%-22s %-14s try %d: refused %d %s", req.OrderID, label, attempt, code, ans.Status)
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
	a.logf("%-22s %-14s gave up after %d tries", req.OrderID, label, a.cfg.attempts)
}

func shortErr(err error) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out"
	}
	return err.Error()
}

func run(ctx context.Context, cfg config, out io.Writer) error {
	a := &agent{cfg: cfg, hc: &http.Client{}, out: out}
	orders := make([]chargeRequest, cfg.orders)
	for i := range orders {
		orders[i] = chargeRequest{OrderID: fmt.Sprintf("order-%s-%d", cfg.run, i+1), Amount: int64(1000 + 100*i), Currency: "usd"}
	}

	// Two subagents charge every order at once; one of them is impatient.
	var wg sync.WaitGroup
	for _, o := range orders {
		wg.Go(func() { a.deliver(ctx, "subagent-1", o, cfg.impatience) })
		wg.Go(func() { a.deliver(ctx, "subagent-2", o, time.Minute) })
	}
	wg.Wait()
	// After a context compaction the agent has forgotten it charged them.
	for _, o := range orders {
		a.deliver(ctx, "re-poll", o, time.Minute)
	}
	// A retry with a changed argument must be refused, not executed.
	if len(orders) > 0 {
		changed := orders[0]
		changed.Amount += 1
		a.deliver(ctx, "changed-amount", changed, time.Minute)
	}

	counts, err := a.charges(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintln(out)
	bad := 0
	for _, o := range orders {
		verdict := "ok"
		if counts[o.OrderID] != 1 {
			verdict, bad = "VIOLATION", bad+1
		}
		fmt.Fprintf(out, "%-22s charged %d time(s)  %s\n", o.OrderID, counts[o.OrderID], verdict)
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d orders were not charged exactly once", bad, len(orders))
	}
	fmt.Fprintf(out, "every order charged exactly once (%d orders, %d requests to the tool)\n", len(orders), a.sent.Load())
	return nil
}

// charges counts the tool's charges per order.
func (a *agent) charges(ctx context.Context) (map[string]int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.cfg.tool+"/charges", nil)
	if err != nil {
		return nil, err
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the charges: %w", err)
	}
	defer resp.Body.Close()
	var list struct {
		Charges []struct {
			OrderID string `json:"order_id"`
		} `json:"charges"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("reading the charges: %w", err)
	}
	counts := map[string]int{}
	for _, c := range list.Charges {
		counts[c.OrderID]++
	}
	return counts, nil
}

func main() {
	var cfg config
	flag.StringVar(&cfg.tool, "tool", "http://127.0.0.1:8090", "charge tool base URL")
	flag.IntVar(&cfg.orders, "orders", 5, "how many orders to charge")
	flag.StringVar(&cfg.run, "run", strconv.FormatInt(time.Now().Unix(), 36), "tag of this run's order IDs")
	flag.DurationVar(&cfg.impatience, "impatience", 50*time.Millisecond, "how long the impatient subagent waits before retrying")
	flag.IntVar(&cfg.attempts, "attempts", 10, "tries per delivery")
	flag.Parse()
	if err := run(context.Background(), cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "agent-loop:", err)
		os.Exit(1)
	}
}
