package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// verifyAuditChain pages through a namespace's audit log over HTTP and
// checks it like an external verifier would; it returns the events.
func verifyAuditChain(t *testing.T, e *testEnv, namespace string, header ...string) []fsm.ChainBody {
	t.Helper()
	var out []fsm.ChainBody
	var prev string
	since, first := uint64(0), true
	for {
		path := fmt.Sprintf("/v1/audit?since=%d&limit=5", since)
		if namespace != "" {
			path += "&namespace=" + namespace
		}
		r := e.do(t, http.MethodGet, path, nil, header...)
		var page struct {
			Head   fsm.ChainHead     `json:"head"`
			Events []*fsm.ChainEvent `json:"events"`
			Next   uint64            `json:"next"`
		}
		if r.status != http.StatusOK || json.Unmarshal(r.body, &page) != nil {
			t.Fatalf("GET %s = %s", path, r)
		}
		if first {
			prev, first = page.Head.Anchor, false
		}
		for _, ev := range page.Events {
			sum := sha256.Sum256(ev.Body)
			var b fsm.ChainBody
			if err := json.Unmarshal(ev.Body, &b); err != nil || b.Prev != prev || hex.EncodeToString(sum[:]) != ev.Hash {
				t.Fatalf("chain breaks at seq %d: %s", ev.Seq, ev.Body)
			}
			prev = ev.Hash
			out = append(out, b)
		}
		if page.Next == 0 {
			return out
		}
		since = page.Next
	}
}
