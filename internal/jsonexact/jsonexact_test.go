package jsonexact

import "testing"

func TestInexact(t *testing.T) {
	cases := []struct {
		text string
		want string // "" when every integer is exact
	}{
		{`{"a":1,"b":[2,3.5e300]}`, ""},
		{`{"id":9007199254740992}`, ""},                 // 2^53: a double holds it
		{`{"id":9007199254740993}`, "9007199254740993"}, // 2^53+1: it does not
		{`[1, -12345678901234567890]`, "-12345678901234567890"},
		{`{"s":"12345678901234567890"}`, ""}, // a string, not a number
		{`{"f":12345678901234567890.5}`, ""}, // not an integer: JCS's rounding is the ledger's to apply
		{`{"broken":`, ""},                   // syntax is JCS's to report
		{`1000000000000000000000`, ""},       // 1e21 is exact as a double and JCS writes 1e+21, read back as itself
	}
	for _, tt := range cases {
		got, bad := Inexact([]byte(tt.text))
		if bad != (tt.want != "") || string(got) != tt.want {
			t.Errorf("Inexact(%s) = %q, %v; want %q", tt.text, got, bad, tt.want)
		}
	}
}
