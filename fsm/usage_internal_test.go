package fsm

import "testing"

func TestNumStateCodes(t *testing.T) {
	if numStateCodes != len(stateCodes) {
		t.Fatalf("numStateCodes is %d, but there are %d state codes", numStateCodes, len(stateCodes))
	}
}
