package fsm

import (
	"errors"
	"path"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func TestValidTool(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"payments.refund", true},
		{"stripe.charge", true},
		{"web__charge", true},
		{"github.create-issue.v2", true},
		{"http", true},
		{"0day.x", true},
		{"", false},
		{"Payments.Refund", false},
		{"DANGER.rm", false},
		{"payments.refund ", false},
		{" payments.refund", false},
		{"payments.refund/x", false},
		{"payments..refund", false},
		{".payments", false},
		{"payments.", false},
		{"payments._x", false},
		{"payments.-x", false},
		{"payments.re fund", false},
		{"payménts.refund", false},
		{"payments\x00.refund", false},
		{strings.Repeat("a", MaxToolBytes), true},
		{strings.Repeat("a", MaxToolBytes+1), false},
	} {
		err := ValidTool(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidTool(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrBadTool) {
			t.Errorf("ValidTool(%q) = %v, want ErrBadTool", tc.name, err)
		}
	}
	if err := ValidTool("Payments.Refund"); err == nil || !strings.Contains(err.Error(), `did you mean "payments.refund"`) {
		t.Errorf("no hint: %v", err)
	}
}

func TestValidToolPattern(t *testing.T) {
	for p, ok := range map[string]bool{
		"payments.*": true, "danger.*": true, "pay?ents.refund": true, "[a-c]*.x": true, "*": true,
		"Payments.*": false, "payments/*": false, "payments .*": false,
	} {
		if err := ValidToolPattern(p); (err == nil) != ok {
			t.Errorf("ValidToolPattern(%q) = %v, want ok %v", p, err, ok)
		}
	}
}

// TestNoSpellingEscapesAPattern: whatever a caller sends as a tool, either
// it is refused at the edge or it is one spelling the grammar allows, and
// a valid pattern that matches the lowercased, trimmed name matches the
// name itself: case, padding and path tails cannot slip past a policy.
func TestNoSpellingEscapesAPattern(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		base := rapid.StringMatching(`[a-z][a-z0-9_]{0,6}(\.[a-z][a-z0-9_-]{0,6}){0,2}`).Draw(t, "base")
		variant := rapid.SampledFrom([]func(string) string{
			strings.ToUpper, strings.Title, //nolint:staticcheck // any casing will do
			func(s string) string { return s + " " },
			func(s string) string { return " " + s },
			func(s string) string { return s + "/x" },
			func(s string) string { return s + "\t" },
			func(s string) string { return strings.Replace(s, ".", "..", 1) },
			func(s string) string { return s },
		}).Draw(t, "variant")(base)
		if ValidTool(variant) != nil {
			return // refused: 400 at the edge
		}
		if variant != base {
			t.Fatalf("%q is a second valid spelling of %q", variant, base)
		}
		if ok, _ := path.Match(base, variant); !ok {
			t.Fatalf("pattern %q does not match %q", base, variant)
		}
	})
}
