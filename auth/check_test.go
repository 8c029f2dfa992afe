package auth

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	admin, hAdmin := testKey(t, 1)
	reader, hReader := testKey(t, 2)
	unknown, _ := testKey(t, 3)
	ks, err := ParseEnv("root:ops:admin:" + hAdmin + ",dash:ops:reader:" + hReader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		ks     *Keyset
		authz  []string
		role   Role
		want   error  // nil: passes
		wantAs string // the principal's name, also with ErrForbidden
	}{
		{"no key", ks, nil, RoleAdmin, ErrNoCredentials, ""},
		{"basic scheme", ks, []string{"Basic eDp5"}, RoleAdmin, ErrNoCredentials, ""},
		{"unknown key", ks, []string{"Bearer " + unknown}, RoleAdmin, ErrInvalidCredentials, ""},
		{"two headers", ks, []string{"Bearer " + admin, "Bearer " + admin}, RoleAdmin, ErrInvalidCredentials, ""},
		{"without the role", ks, []string{"Bearer " + reader}, RoleAdmin, ErrForbidden, "dash"},
		{"with the role", ks, []string{"Bearer " + reader}, RoleReader, nil, "dash"},
		{"admin", ks, []string{"bearer " + admin}, RoleTool, nil, "root"},
		{"development mode", Disabled(), nil, RoleAdmin, nil, "dev"},
		{"nil keyset", nil, nil, RoleAdmin, nil, "dev"},
		{"zero keyset", &Keyset{}, []string{"Bearer " + admin}, RoleAdmin, ErrInvalidCredentials, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			for _, a := range tc.authz {
				r.Header.Add("Authorization", a)
			}
			p, err := tc.ks.Check(r, tc.role)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Check = %v, want %v", err, tc.want)
			}
			if p.Name != tc.wantAs {
				t.Fatalf("principal %q, want %q", p.Name, tc.wantAs)
			}
			if err != nil && strings.Contains(err.Error(), admin) {
				t.Fatal("the error echoes the key")
			}
		})
	}
}

func TestRequire(t *testing.T) {
	admin, hAdmin := testKey(t, 1)
	reader, hReader := testKey(t, 2)
	ks, err := ParseEnv("root:ops:admin:" + hAdmin + ",dash:ops:reader:" + hReader)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	served := 0
	mux.Handle("PUT /debug/thing", Require(ks, RoleAdmin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served++
		w.WriteHeader(http.StatusNoContent)
	})))
	dev := Require(Disabled(), RoleAdmin, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	for _, tc := range []struct {
		name      string
		h         http.Handler
		authz     string
		status    int
		code      string
		challenge string
	}{
		{"no key", mux, "", http.StatusUnauthorized, CodeUnauthenticated, `Bearer realm="intentd"`},
		{"bad key", mux, "Bearer ik_nope", http.StatusUnauthorized, CodeUnauthenticated, `Bearer realm="intentd", error="invalid_token"`},
		{"reader", mux, "Bearer " + reader, http.StatusForbidden, CodeForbidden, `Bearer realm="intentd", error="insufficient_scope", scope="admin"`},
		{"admin", mux, "Bearer " + admin, http.StatusNoContent, "", ""},
		{"development mode", dev, "", http.StatusNoContent, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPut, "/debug/thing", nil)
			if tc.authz != "" {
				r.Header.Set("Authorization", tc.authz)
			}
			rec := httptest.NewRecorder()
			tc.h.ServeHTTP(rec, r)
			if rec.Code != tc.status || rec.Header().Get("WWW-Authenticate") != tc.challenge {
				t.Fatalf("answer %d %q %s", rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body)
			}
			if tc.code == "" {
				return
			}
			var p problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Code != tc.code || p.Status != tc.status ||
				rec.Header().Get("Content-Type") != contentTypeProblem {
				t.Fatalf("problem %s (%v)", rec.Body, err)
			}
			if tc.code == CodeForbidden && !strings.Contains(p.Detail, "PUT /debug/thing needs admin") {
				t.Errorf("detail %q does not name the call", p.Detail)
			}
		})
	}
	if served != 1 {
		t.Fatalf("the handler ran %d times, want once (for the admin)", served)
	}
}
