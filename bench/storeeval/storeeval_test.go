package storeeval

import (
	"bytes"
	"testing"
)

// TestRunSmall runs every candidate and the in-memory fsm at a tiny size:
// the workload applies (every claim granted, every complete accepted, the
// due intents purged), reads find every live intent, and a restart comes
// back at the applied index it left.
func TestRunSmall(t *testing.T) {
	for _, engine := range append([]string{EngineMemory}, Engines...) {
		t.Run(engine, func(t *testing.T) {
			const n, steady = 2000, 2000
			rep, err := Run(Config{Engine: engine, N: n, Steady: steady, Reads: 200, Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			// Intent j is due n ms after its complete: by the last batch
			// about steady intents are, less at most a batch's worth.
			if rep.Purged < steady-lag-64 || rep.Purged > steady {
				t.Errorf("purged %d, want about %d", rep.Purged, steady)
			}
			if rep.Live != n+steady-rep.Purged {
				t.Errorf("live %d, want %d", rep.Live, n+steady-rep.Purged)
			}
			if rep.AppliedBefore == 0 || rep.AppliedAfter != rep.AppliedBefore {
				t.Errorf("applied index %d after restart, %d before", rep.AppliedAfter, rep.AppliedBefore)
			}
			if engine != EngineMemory && rep.DiskBytes == 0 {
				t.Error("nothing on disk")
			}
		})
	}
}

// TestTemplatesAreTheFsmEncoding checks that a record built for intent i
// differs from the template exactly where intent i's fields go, and keeps
// its size.
func TestTemplatesAreTheFsmEncoding(t *testing.T) {
	tm, err := NewTemplates()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tm.DeclaredRecord(0), tm.Declared) || !bytes.Equal(tm.ExecutedRecord(0), tm.Executed) {
		t.Error("intent 0's records are not the templates")
	}
	r := tm.ExecutedRecord(7)
	if len(r) != len(tm.Executed) || bytes.Equal(r, tm.Executed) {
		t.Errorf("intent 7's record: %d bytes, template %d", len(r), len(tm.Executed))
	}
	for _, field := range [][]byte{[]byte(Key(7)), Payload(7), Result(7)} {
		if !bytes.Contains(r, field) {
			t.Errorf("intent 7's record lacks %q", field)
		}
	}
}

// TestRunStateSmall runs every phase of a state run on each engine at a
// tiny size: the fill's claims are granted and completes accepted (RunState
// checks each), the snapshot restores to the same count, a clean restart
// replays nothing, and a restart from the last sync replays the whole tail.
func TestRunStateSmall(t *testing.T) {
	tests := []struct {
		engine     string
		disk       bool // a store on disk
		cleanStart bool // a clean restart of its own
	}{
		{engine: EngineMemory},
		{engine: EngineFsmPebble, disk: true, cleanStart: true},
	}
	for _, tt := range tests {
		t.Run(tt.engine, func(t *testing.T) {
			const n, tail = 3000, 700
			dir := t.TempDir()
			got := map[string]*StateReport{}
			for _, phase := range StatePhases {
				rep, err := RunState(StateConfig{Engine: tt.engine, Phase: phase, N: n, Tail: tail, Reads: 100, Batch: 64, Dir: dir})
				if err != nil {
					t.Fatal(err)
				}
				got[phase] = rep
			}
			fill := got[PhaseFill]
			if fill.FillIntentsPerSec <= 0 || fill.SnapshotBytes <= 0 || fill.ReadColdP50us <= 0 {
				t.Errorf("fill: %d intents/s, snapshot %d bytes, cold read %.1f µs", int(fill.FillIntentsPerSec), fill.SnapshotBytes, fill.ReadColdP50us)
			}
			if want := uint64(2*n + tail); fill.AppliedAtClose != want {
				t.Errorf("applied %d at close, want %d", fill.AppliedAtClose, want)
			}
			if (fill.DiskBytes > 0) != tt.disk || (fill.CheckpointSec > 0) != tt.disk {
				t.Errorf("disk %d bytes, checkpoint %.3f s; a store on disk: %v", fill.DiskBytes, fill.CheckpointSec, tt.disk)
			}
			if got[PhaseRestore].RestoreSec <= 0 {
				t.Error("no restore")
			}
			if (got[PhaseRestart].RestartOpenSec > 0) != tt.cleanStart {
				t.Errorf("clean restart %.3f s; want one: %v", got[PhaseRestart].RestartOpenSec, tt.cleanStart)
			}
			replayed := got[PhaseRestartTail].TailRestartReplayed + got[PhaseRestore].TailRestartReplayed
			if replayed != tail {
				t.Errorf("the restart replayed %d entries, want the tail's %d", replayed, tail)
			}
		})
	}
}
