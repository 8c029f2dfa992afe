package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/ledger"
)

// wireWhoami is the body of GET /v1/whoami.
type wireWhoami struct {
	Auth      string   `json:"auth"`
	Name      string   `json:"name"`
	Namespace string   `json:"namespace"`
	Roles     []string `json:"roles"`
	Acts      []string `json:"acts"`
}

func whoamiOf(t *testing.T, r reply) wireWhoami {
	t.Helper()
	var w wireWhoami
	if r.status != http.StatusOK || json.Unmarshal(r.body, &w) != nil {
		t.Fatalf("GET /v1/whoami = %s", r)
	}
	return w
}

// TestWhoami: the key's name, namespace and roles, and what it may do by
// auth's rule; no key is 401 with auth on; with auth off anyone is
// everything in the default namespace.
func TestWhoami(t *testing.T) {
	e, keys := authEnv(t)
	problemOf(t, e.do(t, http.MethodGet, "/v1/whoami", nil), http.StatusUnauthorized, CodeUnauthenticated)
	problemOf(t, e.do(t, http.MethodGet, "/v1/whoami", nil, bearer("ik_wrong")...), http.StatusUnauthorized, CodeUnauthenticated)

	w := whoamiOf(t, e.do(t, http.MethodGet, "/v1/whoami", nil, bearer(keys["approver-a"])...))
	want := wireWhoami{Auth: "required", Name: "approver-a", Namespace: "alpha", Roles: []string{"approver"},
		Acts: []string{"approver", "reader", "resolve"}}
	if !slices.Equal(w.Acts, want.Acts) || !slices.Equal(w.Roles, want.Roles) || w.Auth != want.Auth || w.Name != want.Name ||
		w.Namespace != want.Namespace {
		t.Errorf("approver-a: %+v, want %+v", w, want)
	}
	if w := whoamiOf(t, e.do(t, http.MethodGet, "/v1/whoami", nil, bearer(keys["tool-a"])...)); !slices.Equal(w.Acts, []string{"tool"}) {
		t.Errorf("tool-a acts as %v, want [tool] (a tool key reads nothing)", w.Acts)
	}
	if w := whoamiOf(t, e.do(t, http.MethodGet, "/v1/whoami", nil, bearer(keys["admin"])...)); len(w.Acts) != len(whoamiRequirements) {
		t.Errorf("admin acts as %v, want every requirement", w.Acts)
	}

	off := whoamiOf(t, newEnv(t).do(t, http.MethodGet, "/v1/whoami", nil))
	if off.Auth != "off" || off.Name != "" || off.Namespace != "default" || len(off.Acts) != len(whoamiRequirements) ||
		len(off.Roles) != len(auth.Roles()) {
		t.Errorf("auth off: %+v", off)
	}
}

// TestAuditLongPoll: GET /v1/audit?since=N&wait= answers at once when
// event N is there, else when the namespace's next event is appended;
// a bad wait, or one on an export, is 400.
func TestAuditLongPoll(t *testing.T) {
	e, r, svc := envWithLimits(t, ledger.Limits{})
	e.claimOK(t, "k1", "o")

	var page struct {
		Head struct {
			LastSeq uint64 `json:"last_seq"`
		} `json:"head"`
		Events []struct {
			Seq uint64 `json:"seq"`
		} `json:"events"`
	}
	decode := func(rep reply) {
		t.Helper()
		page.Events = nil
		if rep.status != http.StatusOK || json.Unmarshal(rep.body, &page) != nil {
			t.Fatalf("audit page: %s", rep)
		}
	}
	decode(e.do(t, http.MethodGet, "/v1/audit?since=1&wait=30s", nil))
	if page.Head.LastSeq != 1 || len(page.Events) != 1 {
		t.Fatalf("a poll for an event already there: %+v", page)
	}

	reads := r.Count()
	next := getAsync(t, e.srv.URL, "/v1/audit?since=2&wait=30s")
	r.Await(t, reads+1)
	if svc.Waiting() != 1 {
		t.Fatalf("Waiting() = %d, want 1", svc.Waiting())
	}
	e.claimOK(t, "k2", "o")
	decode(replyOf(t, next))
	if page.Head.LastSeq != 2 || len(page.Events) != 1 || page.Events[0].Seq != 2 {
		t.Fatalf("woke with %+v", page)
	}

	decode(e.do(t, http.MethodGet, "/v1/audit?since=3&wait=0s", nil))
	if page.Head.LastSeq != 2 || len(page.Events) != 0 {
		t.Fatalf("wait=0s: %+v", page)
	}
	for _, path := range []string{"/v1/audit?wait=soon", "/v1/audit?wait=61s", "/v1/audit?wait=-1s", "/v1/audit?wait=1s&format=jsonl"} {
		problemOf(t, e.do(t, http.MethodGet, path, nil), http.StatusBadRequest, CodeBadRequest)
	}
}
