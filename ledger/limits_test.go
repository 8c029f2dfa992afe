package ledger

import (
	"testing"
	"time"

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
		// A window no snapshot could hold would make the ledger write
		// snapshots it cannot restore.
		{"longest window", Limits{MaxLease: time.Duration(fsm.MaxWindowMS) * time.Millisecond}, true},
		{"lease over it", Limits{MaxLease: time.Duration(fsm.MaxWindowMS+1) * time.Millisecond}, false},
		{"default lease over it", Limits{DefaultLease: time.Duration(fsm.MaxWindowMS+1) * time.Millisecond}, false},
		{"dedupe window over it", Limits{DedupeWindow: time.Duration(fsm.MaxWindowMS+1) * time.Millisecond}, false},
	}
	for _, tc := range tests {
		if err := tc.limits.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}
