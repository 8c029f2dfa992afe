package idemproxy

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/intentledger/intentd/client"
)

func TestParseIdempotencyKey(t *testing.T) {
	long := strings.Repeat("k", MaxIdempotencyKeyBytes)
	for _, tc := range []struct {
		name   string
		values []string
		want   string
		err    error
	}{
		{"quoted", []string{`"8e03978e-40d5-43e8-bc93-6894a57f9324"`}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"bare uuid", []string{`8e03978e-40d5-43e8-bc93-6894a57f9324`}, "8e03978e-40d5-43e8-bc93-6894a57f9324", nil},
		{"bare token", []string{`order-91:charge/1`}, "order-91:charge/1", nil},
		{"bare base64", []string{`q1w2e3+/r4==`}, "q1w2e3+/r4==", nil},
		{"quoted and bare are one key", []string{`"abc"`}, "abc", nil},
		{"space inside quotes", []string{`"a b"`}, "a b", nil},
		{"escaped quote and backslash", []string{`"a\"b\\c"`}, `a"b\c`, nil},
		{"surrounding whitespace", []string{" \t\"k\" "}, "k", nil},
		{"parameters are ignored", []string{`"k";a=1;b;c="x";d=?0;e=:AAE=:;f=tok`}, "k", nil},
		{"parameter after bare", []string{`k;x=1`}, "k", nil},
		{"255 bytes", []string{`"` + long + `"`}, long, nil},

		{"no header", nil, "", ErrMissingKey},
		{"empty header", []string{""}, "", ErrMissingKey},
		{"blank header", []string{"  "}, "", ErrMissingKey},
		{"empty string", []string{`""`}, "", ErrMissingKey},

		{"256 bytes", []string{`"` + long + `k"`}, "", ErrInvalidKey},
		{"256 bytes bare", []string{long + "k"}, "", ErrInvalidKey},
		{"unterminated", []string{`"abc`}, "", ErrInvalidKey},
		{"bad escape", []string{`"a\nb"`}, "", ErrInvalidKey},
		{"trailing backslash", []string{`"a\`}, "", ErrInvalidKey},
		{"non-ASCII in string", []string{"\"caf\u00e9\""}, "", ErrInvalidKey},
		{"control byte", []string{"\"a\x01b\""}, "", ErrInvalidKey},
		{"tab inside string", []string{"\"a\tb\""}, "", ErrInvalidKey},
		{"non-ASCII bare", []string{"caf\u00e9"}, "", ErrInvalidKey},
		{"a list", []string{`"a", "b"`}, "", ErrInvalidKey},
		{"two field lines", []string{`"a"`, `"b"`}, "", ErrInvalidKey},
		{"junk after string", []string{`"a"b`}, "", ErrInvalidKey},
		{"space inside bare", []string{`a b`}, "", ErrInvalidKey},
		{"bad parameter key", []string{`"a";X=1`}, "", ErrInvalidKey},
		{"bad boolean parameter", []string{`"a";x=?2`}, "", ErrInvalidKey},
		{"unterminated bytes parameter", []string{`"a";x=:AAE=`}, "", ErrInvalidKey},
		{"inner list", []string{`("a")`}, "", ErrInvalidKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIdempotencyKey(tc.values)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want %v", tc.values, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseIdempotencyKey(%q) = %q, %v; want %q", tc.values, got, err, tc.want)
			}
		})
	}
}

func TestLedgerKey(t *testing.T) {
	long := strings.Repeat("x", MaxIdempotencyKeyBytes)
	for _, tc := range []struct {
		name, scope, tenant, key, want string
	}{
		{"plain", "stripe.charge", "", "k-1", "idem:stripe.charge:k-1"},
		{"colons escaped", "a:b", "", "c:d", "idem:a%3Ab:c%3Ad"},
		{"tenant", "t", "0123", "k", "idem:t:0123:k"},
	} {
		if got := LedgerKey(tc.scope, tc.tenant, tc.key); got != tc.want {
			t.Errorf("%s: LedgerKey = %q, want %q", tc.name, got, tc.want)
		}
	}
	// Keys longer than the ledger takes are shortened with a hash: valid,
	// stable, distinct.
	a, b := LedgerKey("scope", "", long), LedgerKey("scope", "", long[1:]+"y")
	for _, k := range []string{a, b, LedgerKey(strings.Repeat("s", 256), "", "k")} {
		if err := client.ValidateKey(k); err != nil {
			t.Errorf("LedgerKey gave an invalid ledger key %q: %v", k, err)
		}
	}
	if a == b || a != LedgerKey("scope", "", long) {
		t.Errorf("long keys: %q and %q", a, b)
	}
	// ':' and '%' in the key never make two scopes meet.
	if LedgerKey("a", "", "b:c") == LedgerKey("a:b", "", "c") {
		t.Error("scope and key ran into each other")
	}
}

func TestScopeDigest(t *testing.T) {
	h1 := http.Header{"Authorization": {"Bearer a"}}
	h2 := http.Header{"Authorization": {"Bearer b"}}
	names := []string{"Authorization"}
	if ScopeDigest(h1, nil) != "" {
		t.Error("no scope headers: want no digest")
	}
	d1, d2 := ScopeDigest(h1, names), ScopeDigest(h2, names)
	if d1 == d2 || len(d1) != 32 || d1 != ScopeDigest(h1.Clone(), names) {
		t.Errorf("digests %q %q", d1, d2)
	}
	if ScopeDigest(http.Header{"A": {"x"}, "B": {""}}, []string{"A", "B"}) == ScopeDigest(http.Header{"A": {""}, "B": {"x"}}, []string{"A", "B"}) {
		t.Error("values moved between headers give the same digest")
	}
}
