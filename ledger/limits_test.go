package ledger

import (
	"testing"

	"github.com/intentledger/intentd/fsm"
)

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name   string
		limits Limits
		ok     bool
	}{
		{"defaults", Limits{}, true},
		{"at the ledger's cap", Limits{MaxPayloadBytes: fsm.MaxBlobBytes, MaxResultBytes: fsm.MaxBlobBytes}, true},
		{"payload over it", Limits{MaxPayloadBytes: fsm.MaxBlobBytes + 1}, false},
		{"result over it", Limits{MaxResultBytes: fsm.MaxBlobBytes + 1}, false},
	}
	for _, tc := range tests {
		if err := tc.limits.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
