package client_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"

	"github.com/intentledger/intentd/client"
)

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		got, want string
	}{
		{client.Key("stripe.charge", "order-91", "step-1"), "stripe.charge:order-91:step-1"},
		{client.Key("stripe.charge", "order-91", ""), "stripe.charge:order-91"},
		{client.Key("email.send", "ticket 4412", "step_1"), "email.send:ticket 4412:step_1"},
		{client.Key("a:b", "c", ""), "a%3Ab:c"},
		{client.Key("a", "b:c", ""), "a:b%3Ac"},
		{client.Key("t", "50%", ""), "t:50%25"},
		{client.Key("t", "é/ü", ""), "t:é/ü"},
		{client.Key("t", "a\x00b\tc", ""), "t:a%00b%09c"},
		{client.Key("t", "\xff", ""), "t:%FF"},
		{client.Key("t", "a\u00a0b", ""), "t:a%C2%A0b"},
		{client.KeyOf("refund", "ord_98231"), "refund:ord_98231"},
		{client.KeyOf("a", "", "b"), "a::b"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestLongKeysKeepAStableHashedTail(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	k := client.Key("tool", long, "step-1")
	if err := client.ValidateKey(k); err != nil || len(k) > client.MaxKeyBytes {
		t.Fatalf("key %q (%d bytes): %v", k, len(k), err)
	}
	if k != client.Key("tool", long, "step-1") {
		t.Error("not stable")
	}
	if !strings.HasPrefix(k, "tool:éé") || !strings.Contains(k, "~") {
		t.Errorf("key %q", k)
	}
	if k == client.Key("tool", long, "step-2") {
		t.Error("keys differing past the cut collide")
	}
}

func TestValidateKey(t *testing.T) {
	for _, ok := range []string{"k", "refund:ord_98231", "a b", strings.Repeat("x", 256), "é"} {
		if err := client.ValidateKey(ok); err != nil {
			t.Errorf("ValidateKey(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("x", 257), "a\nb", "\xff", "a\u00a0b"} {
		if err := client.ValidateKey(bad); !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("ValidateKey(%q) = %v, want ErrBadRequest", bad, err)
		}
	}
}

// Any parts give a valid, stable key, and different parts different keys.
func TestKeyOfProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.SliceOfN(rapid.OneOf(rapid.String(), rapid.StringMatching(`[a-z:%]{0,6}`),
			rapid.StringN(0, 300, -1)), 1, 4)
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		ka := client.KeyOf(a...)
		if len(a) > 1 || a[0] != "" {
			if err := client.ValidateKey(ka); err != nil {
				t.Fatalf("KeyOf(%q) = %q: %v", a, ka, err)
			}
		}
		if !utf8.ValidString(ka) || ka != client.KeyOf(a...) {
			t.Fatalf("KeyOf(%q) = %q: invalid or unstable", a, ka)
		}
		if kb := client.KeyOf(b...); !slices.Equal(a, b) && ka == kb {
			t.Fatalf("KeyOf(%q) == KeyOf(%q) == %q", a, b, ka)
		}
	})
}
