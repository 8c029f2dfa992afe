package main

import (
	"encoding/json"
	"net/http"
	"time"
)

// Seeded bugs for the fault suite's positive controls (--test-bug).
const (
	bugStaleReads     = "stale-reads"
	bugLeadershipLost = "leadership-lost-is-failure"
	bugCheckThenClaim = "check-then-claim"
)

var testBugs = []string{bugStaleReads, bugLeadershipLost, bugCheckThenClaim}

// withTestHooks adds the fault suite's endpoints in front of the API:
//
//	GET /debug/digest         {"digest": hex SHA-256 of the state machine, "applied_index": N}
//	GET|PUT /debug/clock-offset {"offset_ms": N}  skews the clock this node stamps proposals with
func (m *Main) withTestHooks(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/digest", func(w http.ResponseWriter, _ *http.Request) {
		digest, applied := m.node.Digest()
		writeHookJSON(w, map[string]any{"node_id": m.cfg.ID, "digest": digest, "applied_index": applied})
	})
	mux.HandleFunc("GET /debug/clock-offset", func(w http.ResponseWriter, _ *http.Request) {
		writeHookJSON(w, map[string]any{"offset_ms": time.Duration(m.clockOffset.Load()).Milliseconds()})
	})
	mux.HandleFunc("PUT /debug/clock-offset", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			OffsetMS *int64 `json:"offset_ms"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&body); err != nil || body.OffsetMS == nil {
			http.Error(w, `want {"offset_ms": N}`, http.StatusBadRequest)
			return
		}
		m.clockOffset.Store(int64(time.Duration(*body.OffsetMS) * time.Millisecond))
		m.log.Warn("clock offset changed by the test hooks", "offset_ms", *body.OffsetMS)
		writeHookJSON(w, map[string]any{"offset_ms": *body.OffsetMS})
	})
	mux.Handle("/", api)
	return mux
}

func writeHookJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
