// Command charge-api is a plain payment API that knows nothing of intentd:
// every POST creates a charge, however often the same request arrives. It
// is the upstream of the intent-proxy example (docker-compose.proxy.yml,
// docs/proxy.md): put intent-proxy in front of it and a request with an
// Idempotency-Key charges once, its retries get the first answer
// replayed.
//
//	go run ./examples/charge-api --listen 127.0.0.1:9000
//
//	POST /v1/charges {"amount":1299,"currency":"usd"}
//	  201 {"id":"ch_0001","amount":1299,"currency":"usd",...}
//	GET  /v1/charges  every charge made (the provider's records)
//	GET  /healthz
//
// The Idempotency-Key and the Intent-Fencing-Token the proxy adds are
// recorded with each charge, so the list shows which request made it.
// --listen can also be set as CHARGE_API_LISTEN.
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
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// ChargeRequest is the body of POST /v1/charges.
type ChargeRequest struct {
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Charge is one charge the API made.
type Charge struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
	// IdempotencyKey and FencingToken are the request's headers, as sent
	// (empty when it came without the proxy).
	IdempotencyKey string    `json:"idempotency_key,omitempty"`
	FencingToken   uint64    `json:"fencing_token,omitempty"`
	Created        time.Time `json:"created"`
}

// api is the payment API: an in-memory list of charges.
type api struct {
	mu      sync.Mutex
	charges []Charge
}

func (a *api) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/charges", a.create)
	mux.HandleFunc("GET /v1/charges", a.list)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	return mux
}

func (a *api) create(w http.ResponseWriter, r *http.Request) {
	var req ChargeRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Amount <= 0 || req.Currency == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "want {\"amount\": > 0, \"currency\": \"usd\"}"})
		return
	}
	fence, _ := strconv.ParseUint(r.Header.Get("Intent-Fencing-Token"), 10, 64)
	a.mu.Lock()
	c := Charge{ID: fmt.Sprintf("ch_%04d", len(a.charges)+1), Amount: req.Amount, Currency: req.Currency,
		IdempotencyKey: r.Header.Get("Idempotency-Key"), FencingToken: fence, Created: time.Now().UTC()}
	a.charges = append(a.charges, c)
	a.mu.Unlock()
	w.Header().Set("Location", "/v1/charges/"+c.ID)
	writeJSON(w, http.StatusCreated, c)
}

func (a *api) list(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"charges": append([]Charge{}, a.charges...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func main() {
	listen := flag.String("listen", "127.0.0.1:9000", "address to serve on (also CHARGE_API_LISTEN)")
	flag.Parse()
	if v := os.Getenv("CHARGE_API_LISTEN"); v != "" && !flagSet("listen") {
		*listen = v
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{Addr: *listen, Handler: (&api{}).routes(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Printf("charge-api: serving on http://%s", *listen)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatalf("charge-api: %v", err)
	}
}

// flagSet reports whether the flag was given on the command line.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
