// Command charge-tool is a tool service that charges orders through the
// intentd ledger. Every charge runs inside client.Do under a key derived
// from the order ID, so duplicate deliveries, retries after lost answers and
// parallel agents charge an order at most once; a retry that changes the
// amount is refused as divergent.
//
//	go run ./examples/charge-tool --ledger http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103
//
//	POST /charge {"order_id":"order-1","amount":1299,"currency":"usd"}
//	  200 {"status":"executed"|"duplicate","charge":{...}}
//	  409 in_flight / in_doubt, 422 divergent, 503 retry later
//	GET /charges   every charge this process made (the "provider's" records)
//
// The payment provider is faked in memory; --latency makes each charge take
// a while, so concurrent deliveries overlap.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/intentledger/intentd/client"
)

// ChargeRequest is what an agent sends. It is also the ledger payload: the
// same order must always come with the same amount and currency.
type ChargeRequest struct {
	OrderID  string `json:"order_id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Charge is one charge the fake provider made.
type Charge struct {
	ID           string    `json:"id"`
	OrderID      string    `json:"order_id"`
	Amount       int64     `json:"amount"`
	Currency     string    `json:"currency"`
	FencingToken uint64    `json:"fencing_token"`
	At           time.Time `json:"at"`
}

// service charges orders through the ledger.
type service struct {
	ledger  *client.Client
	latency time.Duration

	mu      sync.Mutex
	charges []Charge
}

func (s *service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charge", s.charge)
	mux.HandleFunc("GET /charges", s.list)
	return mux
}

func (s *service) charge(w http.ResponseWriter, r *http.Request) {
	var req ChargeRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.OrderID == "" || req.Amount <= 0 || req.Currency == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {order_id, amount > 0, currency}"})
		return
	}
	// Finish what was started even if the agent hangs up: its retry then
	// finds the recorded charge instead of an unfinished one.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), time.Minute)
	defer cancel()

	res, err := s.ledger.Do(ctx, client.Effect{
		Key:     client.Key("stripe.charge", req.OrderID, ""), // the business entity, never per attempt
		Tool:    "stripe.charge",
		Payload: req,
	}, func(ctx context.Context, g *client.Grant) (any, error) {
		return s.pay(ctx, req, g.FencingToken)
	})
	switch {
	case err == nil:
		var c Charge
		if err := res.Decode(&c); err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"status": res.Status, "charge": c})
	case res != nil && res.Status == client.EffectFailed:
		writeJSON(w, http.StatusPaymentRequired, map[string]string{"status": "failed", "error": err.Error()})
	case errors.Is(err, client.ErrDivergent):
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"status": "divergent", "error": err.Error()})
	case errors.Is(err, client.ErrInFlight), errors.Is(err, client.ErrInDoubt):
		writeJSON(w, http.StatusConflict, map[string]string{"status": "not_charged", "error": err.Error()})
	case errors.Is(err, client.ErrOutcomeUnknown), errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrNoLeader):
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "retry", "error": err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
	}
}

// pay is the side effect: the fake provider records a charge. It stops
// before charging if its grant is lost (ctx done).
func (s *service) pay(ctx context.Context, req ChargeRequest, fence uint64) (Charge, error) {
	select {
	case <-time.After(s.latency):
	case <-ctx.Done():
		return Charge{}, fmt.Errorf("not charged: %w", context.Cause(ctx))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := Charge{ID: fmt.Sprintf("ch_%04d", len(s.charges)+1), OrderID: req.OrderID, Amount: req.Amount,
		Currency: req.Currency, FencingToken: fence, At: time.Now().UTC()}
	s.charges = append(s.charges, c)
	return c, nil
}

func (s *service) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"charges": append([]Charge{}, s.charges...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func main() {
	ledgerAddrs := flag.String("ledger", "http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103", "intentd node addresses (comma-separated)")
	listen := flag.String("listen", "127.0.0.1:8090", "address to serve the tool on")
	latency := flag.Duration("latency", 200*time.Millisecond, "how long the fake provider takes per charge")
	flag.Parse()

	lc, err := client.New(strings.Split(*ledgerAddrs, ","))
	if err != nil {
		log.Fatal(err)
	}
	s := &service{ledger: lc, latency: *latency}
	log.Printf("charge-tool on http://%s (ledger %s)", *listen, *ledgerAddrs)
	srv := &http.Server{Addr: *listen, Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second}
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
