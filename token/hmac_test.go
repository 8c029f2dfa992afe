package token

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

func TestHMACIssueVerify(t *testing.T) {
	iss, err := NewHMACIssuer([]byte("secret"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	iss.now = func() time.Time { return now }
	in := &fsm.Intent{Namespace: "default", Key: "charge:1", Fingerprint: "ab", FencingToken: 42, Owner: "o"}
	tok, err := iss.Issue(in)
	if err != nil || !strings.HasPrefix(tok, Prefix) {
		t.Fatalf("issue = %q, %v", tok, err)
	}
	c, err := iss.Verify(tok)
	if err != nil || c.Key != "charge:1" || c.FencingToken != 42 || c.Expires != now.Add(time.Minute).Unix() {
		t.Fatalf("verify = %+v, %v", c, err)
	}
	other, _ := NewHMACIssuer([]byte("other"), time.Minute)
	if _, err := other.Verify(tok); !errors.Is(err, ErrSignature) {
		t.Fatalf("other secret: %v", err)
	}
	tampered := tok[:len(Prefix)+2] + "x" + tok[len(Prefix)+3:]
	if _, err := iss.Verify(tampered); err == nil {
		t.Fatal("tampered token verified")
	}
	for _, bad := range []string{"", "gex_", "nope.x", "gex_abc", "gex_!!.??"} {
		if _, err := iss.Verify(bad); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrSignature) {
			t.Fatalf("Verify(%q) = %v", bad, err)
		}
	}
	now = now.Add(2 * time.Minute)
	if _, err := iss.Verify(tok); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
}
