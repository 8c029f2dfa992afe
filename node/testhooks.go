package node

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/httpapi"
)

// withTestHooks adds the fault suite's endpoints in front of the API:
//
//	GET /debug/digest         {"digest": hex SHA-256 of the state machine, "applied_index": N}
//	GET|PUT /debug/clock-offset {"offset_ms": N}  skews the clock this node stamps proposals with
//
// With auth on they need an admin API key, checked exactly as the API
// checks keys (httpapi.Require); with --auth=off, as the fault suite runs,
// they are open like the rest of the API.
func (n *Node) withTestHooks(api http.Handler, keys *auth.Keyset) http.Handler {
	admin := func(h http.HandlerFunc) http.Handler { return httpapi.Require(keys, auth.RoleAdmin, h) }
	mux := http.NewServeMux()
	mux.Handle("GET /debug/digest", admin(func(w http.ResponseWriter, _ *http.Request) {
		digest, applied := n.cluster.Digest()
		writeHookJSON(w, map[string]any{"node_id": n.cfg.ID, "digest": digest, "applied_index": applied})
	}))
	mux.Handle("GET /debug/clock-offset", admin(func(w http.ResponseWriter, _ *http.Request) {
		writeHookJSON(w, map[string]any{"offset_ms": time.Duration(n.clockOffset.Load()).Milliseconds()})
	}))
	mux.Handle("PUT /debug/clock-offset", admin(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			OffsetMS *int64 `json:"offset_ms"`
		}
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&body); err != nil || body.OffsetMS == nil {
			http.Error(w, `want {"offset_ms": N}`, http.StatusBadRequest)
			return
		}
		n.clockOffset.Store(int64(time.Duration(*body.OffsetMS) * time.Millisecond))
		n.log.Warn("clock offset changed by the test hooks", "offset_ms", *body.OffsetMS)
		writeHookJSON(w, map[string]any{"offset_ms": *body.OffsetMS})
	}))
	mux.Handle("/", api)
	return mux
}

func writeHookJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
