package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

type wirePolicy struct {
	Status string     `json:"status"`
	Policy fsm.Policy `json:"policy"`
}

func (e *testEnv) putPolicy(t *testing.T, name string, body string, want int) reply {
	t.Helper()
	r := e.do(t, http.MethodPut, "/v1/policies/"+name, body)
	if r.status != want {
		t.Fatalf("PUT policy %s = %s, want %d", name, r, want)
	}
	return r
}

func TestPolicyEndpoints(t *testing.T) {
	e := newEnv(t)
	r := e.putPolicy(t, "payments", `{"tools":["payments.*"],"require_approval":true,"approvals_required":2,"approvers":["alice","bob"]}`, http.StatusOK)
	var p wirePolicy
	if err := json.Unmarshal(r.body, &p); err != nil || p.Policy.Version == 0 || p.Policy.Name != "payments" {
		t.Fatalf("put answered %s", r.body)
	}
	// Compare-and-set.
	problemOf(t, e.do(t, http.MethodPut, "/v1/policies/payments", fmt.Sprintf(`{"tools":["x"],"expect_version":%d}`, p.Policy.Version+5)),
		http.StatusConflict, string(fsm.StatusVersionMismatch))
	// Bad input changes nothing and writes nothing.
	before := proposed(e.mem)
	for _, bad := range []struct{ name, body, code string }{
		{"payments", `{"tools":["pay[ments"]}`, CodeUnprocessable},
		{"payments", `{"tools":[]}`, CodeUnprocessable},
		{"Bad Name", `{"tools":["x"]}`, CodeUnprocessable},
		{"payments", `{"name":"other","tools":["x"]}`, CodeBadRequest},
		{"payments", `{"tools":["x"],"lease_ms":5}`, CodeUnprocessable},
		{"payments", `{"tools":["x"],"nope":1}`, CodeBadRequest},
	} {
		status := http.StatusUnprocessableEntity
		if bad.code == CodeBadRequest {
			status = http.StatusBadRequest
		}
		problemOf(t, e.do(t, http.MethodPut, "/v1/policies/"+strings.ReplaceAll(bad.name, " ", "%20"), bad.body), status, bad.code)
	}
	if n := proposed(e.mem) - before; n != 0 {
		t.Fatalf("bad policies proposed %d commands", n)
	}
	var list struct {
		Policies []fsm.Policy `json:"policies"`
	}
	if err := json.Unmarshal(e.do(t, http.MethodGet, "/v1/policies", nil).body, &list); err != nil ||
		len(list.Policies) != 2 || list.Policies[0].Name != "default" || list.Policies[1].Name != "payments" {
		t.Fatalf("list = %+v (%v)", list, err)
	}
	problemOf(t, e.do(t, http.MethodGet, "/v1/policies/nope", nil), http.StatusNotFound, CodePolicyNotFound)
	problemOf(t, e.do(t, http.MethodDelete, "/v1/policies/default", nil), http.StatusUnprocessableEntity, CodeUnprocessable)
	answer(t, e.do(t, http.MethodDelete, "/v1/policies/payments", nil), http.StatusOK)
	problemOf(t, e.do(t, http.MethodDelete, "/v1/policies/payments", nil), http.StatusNotFound, CodePolicyNotFound)
}
