package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/testkit/clienttest"
)

func post(t *testing.T, url string, req ChargeRequest) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(req)
	resp, err := http.Post(url+"/charge", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, nil
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestDuplicateDeliveriesChargeOnce(t *testing.T) {
	mem := clienttest.NewMemory(t)
	lc, err := client.New([]string{mem.URL}, client.WithBackoff(time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	s := &service{ledger: lc, latency: 20 * time.Millisecond}
	tool := httptest.NewServer(s.routes())
	t.Cleanup(tool.Close)

	req := ChargeRequest{OrderID: "order-1", Amount: 1299, Currency: "usd"}
	var mu sync.Mutex
	statuses := map[string]int{}
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			code, out := post(t, tool.URL, req)
			mu.Lock()
			defer mu.Unlock()
			if code != http.StatusOK {
				t.Errorf("delivery: %d %v", code, out)
			}
			statuses[out["status"].(string)]++
		})
	}
	wg.Wait()
	if statuses["executed"] != 1 || statuses["duplicate"] != 5 {
		t.Errorf("statuses %v", statuses)
	}
	if code, out := post(t, tool.URL, ChargeRequest{OrderID: "order-1", Amount: 9999, Currency: "usd"}); code != http.StatusUnprocessableEntity {
		t.Errorf("divergent retry: %d %v", code, out)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.charges) != 1 || s.charges[0].OrderID != "order-1" || s.charges[0].Amount != 1299 {
		t.Errorf("charges %+v", s.charges)
	}
}
