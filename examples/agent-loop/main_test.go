package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

// tool is a stand-in for examples/charge-tool: with a ledger it charges
// through client.Do; without one it charges every delivery, as a tool
// without the gate does.
type tool struct {
	ledger  *client.Client
	mu      sync.Mutex
	charges []map[string]string
}

func (tl *tool) pay(order string) map[string]string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	c := map[string]string{"id": fmt.Sprintf("ch_%d", len(tl.charges)+1), "order_id": order}
	tl.charges = append(tl.charges, c)
	return c
}

func (tl *tool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"charges": tl.charges})
		return
	}
	var req chargeRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	if tl.ledger == nil {
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "executed", "charge": tl.pay(req.OrderID)})
		return
	}
	res, err := tl.ledger.Do(context.WithoutCancel(r.Context()), client.Effect{
		Key: client.Key("stripe.charge", req.OrderID, ""), Tool: "stripe.charge", Payload: req,
	}, func(context.Context, *client.Grant) (any, error) { return tl.pay(req.OrderID), nil })
	if err != nil {
		w.WriteHeader(http.StatusUnprocessableEntity)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "refused", "error": err.Error()})
		return
	}
	var c map[string]string
	_ = res.Decode(&c)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": res.Status, "charge": c})
}

func testConfig(url string) config {
	return config{tool: url, orders: 4, run: "t", impatience: time.Millisecond, attempts: 10}
}

func TestAgentLoopChargesEachOrderOnceThroughTheLedger(t *testing.T) {
	mem := clienttest.NewMemory(t)
	lc, err := client.New([]string{mem.URL}, client.WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&tool{ledger: lc})
	t.Cleanup(srv.Close)
	var out strings.Builder
	if err := run(context.Background(), testConfig(srv.URL), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "every order charged exactly once") || !strings.Contains(out.String(), "changed-amount") {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestAgentLoopCatchesDoubleChargesWithoutTheLedger(t *testing.T) {
	srv := httptest.NewServer(&tool{})
	t.Cleanup(srv.Close)
	var out strings.Builder
	if err := run(context.Background(), testConfig(srv.URL), &out); err == nil || !strings.Contains(out.String(), "VIOLATION") {
		t.Fatalf("err = %v\n%s", err, out.String())
	}
}
