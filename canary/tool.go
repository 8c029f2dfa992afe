package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/intentledger/intentd/client"
)

// ChargeRequest is the body of a tool call: the charge's arguments. The
// episode's identity travels in the HeaderEpisode and HeaderDelivery
// headers.
type ChargeRequest struct {
	Key    string `json:"key"`
	Amount int    `json:"amount"`
}

// ChargeResponse is the tool's answer. Outcome is executed, duplicate,
// divergent, in_doubt, in_flight or error.
type ChargeResponse struct {
	Outcome string          `json:"outcome"`
	Result  json.RawMessage `json:"result,omitempty"`
	Detail  string          `json:"detail,omitempty"`
}

// ToolConfig configures a tool service.
type ToolConfig struct {
	// Ledger guards every effect; nil runs effects without the ledger
	// (the no-ledger broken mode).
	Ledger *client.Client
	// Provider is the base URL of the downstream provider whose effect log
	// is the ground truth.
	Provider string
	// Lease is the lease of a grant (default 10 s). The tool renews it
	// while the effect runs, but a machine too slow to renew in time would
	// turn a live holder's key in_doubt: safe, yet the replay would differ.
	Lease time.Duration
	// CrashLease is the lease of a grant for a delivery the plan crashes
	// (default 1 s): how soon the dead tool's key turns in_doubt.
	CrashLease time.Duration
	// Die, if set, is called at a crash point and does not return: a tool
	// process kills itself there. Unset, the tool crashes in-process: it
	// reports nothing to the ledger and drops the connection without an
	// answer, which is what its caller and the ledger see of a dead
	// process.
	Die func()
	// HTTP reaches the provider (default: a client with a 30 s timeout).
	HTTP *http.Client
}

// maxToolBody bounds a tool call's body.
const maxToolBody = 64 << 10

// errCrashed is what the effect function returns at an in-process crash
// point: the ledger records nothing, as with a dead process.
var errCrashed = fmt.Errorf("canary: tool crashed: %w", client.ErrEffectUnknown)

// NewToolService returns the tool service: POST /charge performs a charge
// at the provider at most once per key, guarded by the ledger with
// client.Do, and answers a ChargeResponse.
func NewToolService(cfg ToolConfig) http.Handler {
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{Timeout: 30 * time.Second}
	}
	if cfg.Lease <= 0 {
		cfg.Lease = grantLease
	}
	if cfg.CrashLease <= 0 {
		cfg.CrashLease = time.Second
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charge", func(w http.ResponseWriter, req *http.Request) {
		var call ChargeRequest
		if err := decodeStrict(req.Body, &call); err != nil || call.Key == "" {
			writeJSON(w, http.StatusBadRequest, ChargeResponse{Outcome: "error", Detail: fmt.Sprintf("bad charge request: %v", err)})
			return
		}
		label, delivery := req.Header.Get(HeaderEpisode), req.Header.Get(HeaderDelivery)
		crash := req.Header.Get(HeaderCrash)
		crashPoint := func(where string) error {
			if crash != where {
				return nil
			}
			if cfg.Die != nil {
				cfg.Die()
			}
			return errCrashed
		}
		perform := func(ctx context.Context) (any, error) {
			if err := crashPoint("before"); err != nil {
				return nil, err
			}
			txn, err := cfg.charge(ctx, label, delivery, call.Amount)
			if err != nil {
				// The provider may or may not have charged.
				return nil, fmt.Errorf("provider: %w: %w", client.ErrEffectUnknown, err)
			}
			if err := crashPoint("after"); err != nil {
				return nil, err
			}
			return map[string]string{"txn": txn}, nil
		}
		var resp ChargeResponse
		var crashed bool
		if cfg.Ledger == nil {
			v, err := perform(req.Context())
			crashed = errors.Is(err, errCrashed)
			if err == nil {
				raw, _ := json.Marshal(v)
				resp = ChargeResponse{Outcome: "executed", Result: raw}
			} else {
				resp = ChargeResponse{Outcome: "error", Detail: err.Error()}
			}
		} else {
			payload, _ := json.Marshal(map[string]int{"amount": call.Amount})
			lease := cfg.Lease
			if crash != "" {
				lease = cfg.CrashLease
			}
			res, err := cfg.Ledger.Do(req.Context(), client.Effect{Key: call.Key, Tool: toolName, Payload: payload, Lease: lease},
				func(ctx context.Context, _ *client.Grant) (any, error) { return perform(ctx) })
			crashed = errors.Is(err, errCrashed)
			resp = chargeResponse(res, err)
		}
		if crashed {
			// The in-process crash: no answer, the connection just dies.
			panic(http.ErrAbortHandler)
		}
		writeJSON(w, statusOf(resp.Outcome), resp)
	})
	return mux
}

// chargeResponse maps client.Do's answer to the tool's.
func chargeResponse(res *client.EffectResult, err error) ChargeResponse {
	switch {
	case err == nil && res != nil:
		return ChargeResponse{Outcome: string(res.Status), Result: res.Result}
	case errors.Is(err, client.ErrDivergent):
		return ChargeResponse{Outcome: "divergent", Detail: err.Error()}
	case errors.Is(err, client.ErrInDoubt):
		return ChargeResponse{Outcome: "in_doubt", Detail: err.Error()}
	case errors.Is(err, client.ErrInFlight):
		return ChargeResponse{Outcome: "in_flight", Detail: err.Error()}
	case err != nil:
		return ChargeResponse{Outcome: "error", Detail: err.Error()}
	}
	return ChargeResponse{Outcome: "error", Detail: "no result"}
}

func statusOf(outcome string) int {
	switch outcome {
	case "executed", "duplicate":
		return http.StatusOK
	case "divergent":
		return http.StatusUnprocessableEntity
	case "in_doubt", "in_flight":
		return http.StatusConflict
	}
	return http.StatusBadGateway
}

// charge asks the provider to perform the effect and returns its
// transaction id.
func (cfg ToolConfig) charge(ctx context.Context, label, delivery string, amount int) (string, error) {
	body, _ := json.Marshal(providerCharge{Label: label, Delivery: delivery, Amount: amount})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Provider+"/effects", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := cfg.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var out struct {
		Txn string `json:"txn"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("provider answered %s", resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxToolBody)).Decode(&out); err != nil {
		return "", fmt.Errorf("provider answer: %w", err)
	}
	return out.Txn, nil
}

// providerCharge is one effect as the provider receives it.
type providerCharge struct {
	Label    string `json:"label"`
	Delivery string `json:"delivery"`
	Amount   int    `json:"amount"`
}

// newProvider returns the downstream provider: POST /effects appends a
// real effect to the episode's ground-truth log.
func newProvider(b *book) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /effects", func(w http.ResponseWriter, req *http.Request) {
		var c providerCharge
		if err := decodeStrict(req.Body, &c); err != nil || c.Label == "" {
			http.Error(w, "bad effect", http.StatusBadRequest)
			return
		}
		rec := b.get(c.Label)
		rec.mu.Lock()
		rec.effects = append(rec.effects, effect{delivery: c.Delivery, amount: c.Amount})
		rec.mu.Unlock()
		rec.add("%s: provider performs the effect (amount=%d)", c.Delivery, c.Amount)
		writeJSON(w, http.StatusOK, map[string]string{"txn": c.Label + "/" + c.Delivery})
	})
	return mux
}

// ServeTool serves the tool service on ln until ctx ends.
func ServeTool(ctx context.Context, ln net.Listener, cfg ToolConfig) error {
	srv := &http.Server{Handler: NewToolService(cfg), ReadHeaderTimeout: 10 * time.Second, ErrorLog: quietLog()}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(io.LimitReader(r, maxToolBody))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
