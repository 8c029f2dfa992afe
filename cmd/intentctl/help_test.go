package main

import (
	"strings"
	"testing"

	"github.com/intentledger/intentd/auth"
)

// TestHelpCertsAndRoles: "intentctl help" documents the certs flags and
// subcommands, and the apikey entry names every role a key may hold
// (it once left out reconciler and certs --cluster).
func TestHelpCertsAndRoles(t *testing.T) {
	r := runCLI(t, "help")
	cases := []struct{ name, want string }{
		{"dev PKI cluster name", "certs [--dir certs] [--nodes n1,n2,n3] [--hosts h,...] [--cluster NAME]"},
		{"node certificate", "certs node --id ID [--ca-dir certs] [--cluster NAME]"},
		{"client certificate", "certs client --name N [--ca-dir certs]"},
		{"TLS refusal is exit 10", "refused the client's TLS"},
	}
	for _, tt := range cases {
		if !strings.Contains(r.stdout, tt.want) {
			t.Errorf("%s: help lacks %q", tt.name, tt.want)
		}
	}
	_, apikey, ok := strings.Cut(r.stdout, "  apikey new ")
	if !ok {
		t.Fatal("help has no apikey new")
	}
	apikey, _, _ = strings.Cut(apikey, "\n  kek new")
	for _, role := range auth.Roles() {
		if !strings.Contains(apikey, string(role)) {
			t.Errorf("apikey new's help does not name role %s:\n%s", role, apikey)
		}
	}
}
