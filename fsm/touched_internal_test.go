package fsm

import "testing"

// Every command type this version decodes is classified by Touched: a new
// type must say which intents it changes, or every long-poll wakes for it.
func TestTouchedKnowsEveryCommandType(t *testing.T) {
	for ty := 0; ty < 256; ty++ {
		cmd := newCommand(CommandType(ty))
		if cmd == nil {
			continue
		}
		if _, all := Touched(nil, cmd); all {
			t.Errorf("Touched does not know command type %d (%T)", ty, cmd)
		}
	}
	if _, all := Touched(nil, nil); !all {
		t.Error("an unknown command is not reported as touching everything")
	}
}
