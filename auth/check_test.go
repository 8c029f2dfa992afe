package auth

import (
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
			var fe *ForbiddenError
			if errors.Is(err, ErrForbidden) && (!errors.As(err, &fe) || fe.Principal.Name != tc.wantAs || fe.Role != tc.role) {
				t.Fatalf("Check = %#v, want a ForbiddenError naming %q and %s", err, tc.wantAs, tc.role)
			}
			if err != nil && strings.Contains(err.Error(), admin) {
				t.Fatal("the error echoes the key")
			}
		})
	}
}
