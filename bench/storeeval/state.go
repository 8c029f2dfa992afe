package storeeval

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/fsm/pebblestate"
)

// EngineFsmPebble is the real fsm.Machine over the on-disk store
// (fsm/pebblestate), as a node with --state-engine pebble runs it.
const EngineFsmPebble = "fsm-pebble"

// StateEngines are the engines RunState measures: the Machine over the
// in-memory store (EngineMemory) and over pebble.
var StateEngines = []string{EngineMemory, EngineFsmPebble}

// Phases of RunState, each meant for a process of its own so that each
// resident set is its own. They run in this order on one Dir.
const (
	// PhaseFill fills the ledger, reads, snapshots (and checkpoints), applies
	// the tail after the last sync and closes cleanly.
	PhaseFill = "fill"
	// PhaseRestore restores the snapshot into a fresh store.
	PhaseRestore = "restore"
	// PhaseRestart reopens the cleanly closed store and skips the tail,
	// which it holds already (fsm-pebble only).
	PhaseRestart = "restart"
	// PhaseRestartTail reopens the store as of the last sync (a crash
	// that lost every write after it) and replays the tail: fsm-pebble
	// from the checkpoint taken at that sync, fsm-memory from the snapshot.
	PhaseRestartTail = "restart-tail"
)

// StatePhases are the phases in order.
var StatePhases = []string{PhaseFill, PhaseRestore, PhaseRestart, PhaseRestartTail}

// DefaultStateBatch is entries per apply batch: the cluster's raft
// MaxAppendEntries (cluster.RaftTuning's default), the most one
// ApplyBatch receives.
const DefaultStateBatch = 256

// dayMS is the dedupe window of the state runs: 24 h, so nothing filled
// is due for a purge, and no purge is applied in any case.
const dayMS = 24 * 3600 * 1000

// StateConfig is one phase of one state run.
type StateConfig struct {
	Engine string // EngineMemory or EngineFsmPebble
	Phase  string // one of StatePhases
	// N intents are claimed and completed by the fill and retained.
	N int
	// Tail entries are applied after the last sync (and the snapshot), for
	// a restart to replay.
	Tail int
	// Reads point reads of random intents, cold and hot each.
	Reads int
	// Batch entries per apply batch (default DefaultStateBatch).
	Batch int
	// Dir holds the stores, the snapshot and the tail of one run; every
	// phase of the run gets the same Dir.
	Dir string
	// Progress, if set, receives a line every ProgressEvery during a fill.
	Progress      io.Writer
	ProgressEvery time.Duration
}

// StateReport is what one phase measured; the phases of one run fill in
// different fields (the rest are omitted from JSON, so the lines of a
// run merge into one report by decoding them in turn into one value).
// Times are seconds, sizes bytes.
type StateReport struct {
	Build  string `json:"build,omitempty"` // set by the caller: which build ran it
	Engine string `json:"engine"`
	N      int    `json:"n"`
	Phase  string `json:"phase,omitempty"`
	Batch  int    `json:"batch,omitempty"`
	Tail   int    `json:"tail,omitempty"`
	// InProcess: restore ran in the fill's process (the base build), so
	// its resident set is not its own.
	InProcess bool `json:"restore_in_process,omitempty"`

	FillLoad             string  `json:"fill_load,omitempty"` // load average before the fill
	FillSec              float64 `json:"fill_s,omitempty"`
	FillIntentsPerSec    float64 `json:"fill_intents_per_s,omitempty"`       // over the wall time
	FillApplyPerSec      float64 `json:"fill_apply_entries_per_s,omitempty"` // entries over the time in Apply and Commit
	FillBatchP50us       float64 `json:"fill_batch_p50_us,omitempty"`
	FillBatchP99us       float64 `json:"fill_batch_p99_us,omitempty"`
	HeapBytes            uint64  `json:"heap_bytes,omitempty"`
	HeapPerIntent        float64 `json:"heap_per_intent,omitempty"`
	RssBytes             uint64  `json:"rss_bytes,omitempty"`
	RssAnonBytes         uint64  `json:"rss_anon_bytes,omitempty"`
	RssFileBytes         uint64  `json:"rss_file_bytes,omitempty"`
	PeakRssBytes         uint64  `json:"peak_rss_bytes,omitempty"` // VmHWM at the end of the fill
	DiskBytes            int64   `json:"disk_bytes,omitempty"`
	DiskPerIntent        float64 `json:"disk_per_intent,omitempty"`
	ReadColdP50us        float64 `json:"read_cold_p50_us,omitempty"`
	ReadColdP99us        float64 `json:"read_cold_p99_us,omitempty"`
	ReadHotP50us         float64 `json:"read_hot_p50_us,omitempty"`
	ReadHotP99us         float64 `json:"read_hot_p99_us,omitempty"`
	SnapshotSyncSec      float64 `json:"snapshot_sync_s,omitempty"` // the Sync before the Clone
	SnapshotSec          float64 `json:"snapshot_s,omitempty"`      // Sync, Clone, WriteSnapshot, fsync
	SnapshotBytes        int64   `json:"snapshot_bytes,omitempty"`
	SnapshotPeakExtra    int64   `json:"snapshot_peak_extra_rss,omitempty"` // VmHWM during it less RSS before
	CheckpointSec        float64 `json:"checkpoint_s,omitempty"`            // Sync and Checkpoint
	TailSec              float64 `json:"tail_s,omitempty"`
	CloseSec             float64 `json:"close_s,omitempty"`
	AppliedAtClose       uint64  `json:"applied_at_close,omitempty"`
	RestoreLoad          string  `json:"restore_load,omitempty"`
	RestoreSec           float64 `json:"restore_s,omitempty"` // RestoreInto and Sync
	RestorePeakRss       uint64  `json:"restore_peak_rss_bytes,omitempty"`
	RestoreRss           uint64  `json:"restore_rss_bytes,omitempty"`
	RestartOpenSec       float64 `json:"restart_open_s,omitempty"` // OpenDir and fsm.Open
	RestartSkipSec       float64 `json:"restart_skip_s,omitempty"` // the tail read and skipped
	RestartRss           uint64  `json:"restart_rss_bytes,omitempty"`
	TailRestartOpenSec   float64 `json:"tail_restart_open_s,omitempty"`
	TailRestartReplaySec float64 `json:"tail_restart_replay_s,omitempty"`
	TailRestartReplayed  int     `json:"tail_restart_replayed,omitempty"`
	TailRestartRss       uint64  `json:"tail_restart_rss_bytes,omitempty"`
	TailRestartPeakRss   uint64  `json:"tail_restart_peak_rss_bytes,omitempty"`
}

// Paths inside a run's Dir.
func (c StateConfig) statePath() string    { return filepath.Join(c.Dir, "state") }
func (c StateConfig) snapshotPath() string { return filepath.Join(c.Dir, "snapshot.bin") }
func (c StateConfig) tailPath() string     { return filepath.Join(c.Dir, "tail.bin") }
func (c StateConfig) ckptPath() string     { return filepath.Join(c.Dir, "checkpoint") }
func (c StateConfig) crashPath() string    { return filepath.Join(c.Dir, "crashed") }
func (c StateConfig) restorePath() string  { return filepath.Join(c.Dir, "restored") }

// RunState runs one phase of a state run.
func RunState(cfg StateConfig) (*StateReport, error) {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultStateBatch
	}
	if cfg.Engine != EngineMemory && cfg.Engine != EngineFsmPebble {
		return nil, fmt.Errorf("state run: unknown engine %q (want %s or %s)", cfg.Engine, EngineMemory, EngineFsmPebble)
	}
	rep := &StateReport{Engine: cfg.Engine, N: cfg.N, Phase: cfg.Phase, Batch: cfg.Batch, Tail: cfg.Tail}
	var err error
	switch cfg.Phase {
	case PhaseFill:
		err = stateFill(cfg, rep)
	case PhaseRestore:
		err = stateRestore(cfg, rep)
	case PhaseRestart:
		err = stateRestart(cfg, rep)
	case PhaseRestartTail:
		err = stateRestartTail(cfg, rep)
	default:
		err = fmt.Errorf("unknown phase %q", cfg.Phase)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", cfg.Engine, cfg.Phase, err)
	}
	return rep, nil
}

// openDir opens a pebblestate Dir with the defaults a node of 640 MiB
// or more runs with (node.SizeStateMemory).
func openDir(path string) (*pebblestate.Dir, error) {
	return pebblestate.OpenDir(path, pebblestate.Options{})
}

// ---- the entries a leader would have replicated ----

// logEntry is one raft log entry of the workload.
type logEntry struct {
	index uint64
	data  []byte
	claim bool
	i     int
}

// generator makes the workload's log entries in log order: per batch,
// half claims of new intents and half completes of intents claimed lag
// intents earlier. Indexes are assigned here, so a complete's fencing
// token (its claim's index) is known without applying anything.
type generator struct {
	batch      int
	index      uint64
	next, done int
	fences     [4 * lag]uint64
}

// nextBatch returns the next batch, claiming no intent at or past limit;
// nil once every intent below limit is claimed and completed.
func (g *generator) nextBatch(limit int) ([]logEntry, error) {
	half := g.batch / 2
	bound := g.next - lag
	if g.next >= limit {
		bound = g.next
	}
	var es []logEntry
	for len(es) < half && g.next < limit {
		i := g.next
		data, err := ClaimEntry(i, claimTime(i), dayMS)
		if err != nil {
			return nil, err
		}
		g.index++
		g.fences[i%len(g.fences)] = g.index
		es = append(es, logEntry{index: g.index, data: data, claim: true, i: i})
		g.next++
	}
	for len(es) < g.batch && g.done < bound {
		i := g.done
		data, err := CompleteEntry(i, g.fences[i%len(g.fences)], completeTime(i))
		if err != nil {
			return nil, err
		}
		g.index++
		es = append(es, logEntry{index: g.index, data: data, i: i})
		g.done++
	}
	return es, nil
}

// stream runs the generator in a goroutine (a replica receives its
// entries encoded, from the network) until limit, or until maxEntries
// entries if that is positive.
func (g *generator) stream(limit, maxEntries int) <-chan genBatch {
	out := make(chan genBatch, 16)
	go func() {
		defer close(out)
		n := 0
		for maxEntries <= 0 || n < maxEntries {
			es, err := g.nextBatch(limit)
			if err != nil {
				out <- genBatch{err: err}
				return
			}
			if len(es) == 0 {
				return
			}
			if maxEntries > 0 && n+len(es) > maxEntries {
				es = es[:maxEntries-n]
			}
			n += len(es)
			out <- genBatch{es: es}
		}
	}()
	return out
}

type genBatch struct {
	es  []logEntry
	err error
}

// applyBatch applies es as cluster/fsm.go's ApplyBatch does: every entry
// past the stored index, then a Commit of the last index. It checks each
// claim is granted and each complete accepted.
func applyBatch(m *fsm.Machine, es []logEntry) (int, error) {
	applied := 0
	stored := m.StoredIndex()
	last := uint64(0)
	for _, e := range es {
		last = max(last, e.index)
		if e.index <= stored {
			continue
		}
		r := m.Apply(e.index, e.data)
		applied++
		if e.claim && r.Status != fsm.StatusGranted {
			return applied, fmt.Errorf("claim %d at %d: %s %s", e.i, e.index, r.Status, r.Detail)
		}
		if !e.claim && r.Status != fsm.StatusOK {
			return applied, fmt.Errorf("complete %d at %d: %s %s", e.i, e.index, r.Status, r.Detail)
		}
	}
	if last > stored {
		m.Commit(last)
	}
	return applied, nil
}

// ---- fill ----

func stateFill(cfg StateConfig, rep *StateReport) error {
	for _, p := range []string{cfg.statePath(), cfg.snapshotPath(), cfg.tailPath(), cfg.ckptPath(), cfg.crashPath(), cfg.restorePath()} {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s exists: the fill wants an empty directory", p)
		}
	}
	rep.FillLoad = loadAvg()
	heap0 := heapLive()
	var dir *pebblestate.Dir
	var m *fsm.Machine
	if cfg.Engine == EngineFsmPebble {
		var err error
		if dir, err = openDir(cfg.statePath()); err != nil {
			return err
		}
		defer func() {
			if dir != nil {
				dir.Close()
			}
		}()
		if m, err = fsm.Open(dir.Current()); err != nil {
			return err
		}
	} else {
		m = fsm.New()
	}

	g := &generator{batch: cfg.Batch}
	var lat []time.Duration
	start := time.Now()
	lastProgress := start
	entries, completed := 0, 0
	for b := range g.stream(cfg.N, 0) {
		if b.err != nil {
			return b.err
		}
		t := time.Now()
		n, err := applyBatch(m, b.es)
		if err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		lat = append(lat, time.Since(t))
		entries += n
		for _, e := range b.es {
			if !e.claim {
				completed++
			}
		}
		if cfg.Progress != nil && cfg.ProgressEvery > 0 && time.Since(lastProgress) >= cfg.ProgressEvery {
			lastProgress = time.Now()
			el := time.Since(start).Seconds()
			fmt.Fprintf(cfg.Progress, "%s %s fill: %d/%d intents completed (%.0f%%), %.0f intents/s, %.0f s, RSS %d MiB, load %s\n",
				time.Now().UTC().Format("15:04:05"), cfg.Engine, completed, cfg.N, 100*float64(completed)/float64(max(cfg.N, 1)),
				float64(completed)/el, el, procStatus()["VmRSS"]>>20, loadAvg())
		}
	}
	rep.FillSec = time.Since(start).Seconds()
	rep.FillIntentsPerSec = float64(cfg.N) / rep.FillSec
	rep.FillApplyPerSec = float64(entries) / sum(lat).Seconds()
	rep.FillBatchP50us, rep.FillBatchP99us = pct(lat, 50), pct(lat, 99)
	if m.Len() != cfg.N {
		return fmt.Errorf("fill: %d intents held, want %d", m.Len(), cfg.N)
	}

	// Reads: cold (any intent) and hot (the newest 1%), keys made first.
	rng := rand.New(rand.NewPCG(1, 2))
	read := func(from int) ([]time.Duration, error) {
		keys := make([]string, cfg.Reads)
		for j := range keys {
			keys[j] = Key(from + rng.IntN(cfg.N-from))
		}
		out := make([]time.Duration, 0, cfg.Reads)
		for _, k := range keys {
			t := time.Now()
			in := m.Get(Namespace, k)
			out = append(out, time.Since(t))
			if in == nil {
				return nil, fmt.Errorf("intent %s not found", k)
			}
		}
		return out, nil
	}
	if cfg.Reads > 0 && cfg.N > 0 {
		cold, err := read(0)
		if err != nil {
			return fmt.Errorf("cold reads: %w", err)
		}
		hot, err := read(max(0, cfg.N-max(cfg.N/100, 1)))
		if err != nil {
			return fmt.Errorf("hot reads: %w", err)
		}
		rep.ReadColdP50us, rep.ReadColdP99us = pct(cold, 50), pct(cold, 99)
		rep.ReadHotP50us, rep.ReadHotP99us = pct(hot, 50), pct(hot, 99)
	}

	// Memory and disk after the fill and the reads, with the store synced.
	m.Sync()
	rep.HeapBytes = heapLive()
	rep.HeapPerIntent = float64(int64(rep.HeapBytes)-int64(heap0)) / float64(max(cfg.N, 1))
	ps := procStatus()
	rep.RssBytes, rep.RssAnonBytes, rep.RssFileBytes, rep.PeakRssBytes = ps["VmRSS"], ps["RssAnon"], ps["RssFile"], ps["VmHWM"]
	if dir != nil {
		rep.DiskBytes = dirBytes(cfg.statePath())
		rep.DiskPerIntent = float64(rep.DiskBytes) / float64(max(cfg.N, 1))
	}

	// Snapshot: what FSM.Snapshot and Persist do, into a file.
	resetPeak()
	before := procStatus()["VmRSS"]
	start = time.Now()
	m.Sync()
	rep.SnapshotSyncSec = time.Since(start).Seconds()
	n, err := writeSnapshotFile(m, cfg.snapshotPath())
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	rep.SnapshotSec = time.Since(start).Seconds()
	rep.SnapshotBytes = n
	rep.SnapshotPeakExtra = int64(procStatus()["VmHWM"]) - int64(before)

	// Checkpoint: Sync and hard links, into a new directory.
	if dir != nil {
		start = time.Now()
		m.Sync()
		if err := dir.Current().Checkpoint(cfg.ckptPath()); err != nil {
			return err
		}
		rep.CheckpointSec = time.Since(start).Seconds()
	}

	// The tail: entries applied after the last sync, kept as the raft log
	// keeps them.
	if cfg.Tail > 0 {
		start = time.Now()
		f, err := os.Create(cfg.tailPath())
		if err != nil {
			return err
		}
		bw := bufio.NewWriterSize(f, 1<<20)
		for b := range g.stream(cfg.N+cfg.Tail, cfg.Tail) {
			if b.err != nil {
				f.Close()
				return b.err
			}
			for _, e := range b.es {
				if err := writeTailEntry(bw, e); err != nil {
					f.Close()
					return err
				}
			}
			if _, err := applyBatch(m, b.es); err != nil {
				f.Close()
				return fmt.Errorf("tail: %w", err)
			}
		}
		if err := bw.Flush(); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		rep.TailSec = time.Since(start).Seconds()
	}
	rep.AppliedAtClose = m.AppliedIndex()

	// A clean close (Dir.Close flushes), then the checkpoint taken at the
	// last sync made into a Dir of its own: the store a crash right after
	// the tail would have left if none of the tail had been flushed.
	if dir != nil {
		start = time.Now()
		err := dir.Close()
		dir = nil
		if err != nil {
			return err
		}
		rep.CloseSec = time.Since(start).Seconds()
		if err := dirFromCheckpoint(cfg.ckptPath(), cfg.crashPath()); err != nil {
			return err
		}
	}
	return nil
}

// writeSnapshotFile syncs nothing itself: it clones m, writes the clone's
// snapshot to path and fsyncs the file, returning its size.
func writeSnapshotFile(m *fsm.Machine, path string) (int64, error) {
	c := m.Clone()
	defer c.Release()
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	cw := &countWriter{w: f}
	err = c.WriteSnapshot(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return cw.n, err
}

// dirFromCheckpoint makes ckpt, a pebble checkpoint, the only generation
// of a pebblestate Dir at dir (the layout pebblestate documents: CURRENT
// naming gen-NNNNNN).
func dirFromCheckpoint(ckpt, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Rename(ckpt, filepath.Join(dir, "gen-000001")); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "CURRENT"), []byte("gen-000001\n"), 0o644)
}

// The tail file: per entry, the index (8 bytes), a claim flag and the
// intent (8 bytes), the length (4 bytes) and the data.
func writeTailEntry(w io.Writer, e logEntry) error {
	var h [21]byte
	binary.BigEndian.PutUint64(h[0:], e.index)
	if e.claim {
		h[8] = 1
	}
	binary.BigEndian.PutUint64(h[9:], uint64(e.i))
	binary.BigEndian.PutUint32(h[17:], uint32(len(e.data)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(e.data)
	return err
}

func readTail(path string) ([]logEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []logEntry
	for len(b) > 0 {
		if len(b) < 21 {
			return nil, errors.New("tail file: truncated header")
		}
		e := logEntry{index: binary.BigEndian.Uint64(b), claim: b[8] == 1, i: int(binary.BigEndian.Uint64(b[9:]))}
		n := int(binary.BigEndian.Uint32(b[17:]))
		b = b[21:]
		if len(b) < n {
			return nil, errors.New("tail file: truncated entry")
		}
		e.data, b = b[:n], b[n:]
		out = append(out, e)
	}
	return out, nil
}

// replay applies the tail in batches, as raft hands a restarted node the
// entries after its snapshot; it returns the entries applied.
func replay(m *fsm.Machine, tail []logEntry, batch int) (int, error) {
	n := 0
	for len(tail) > 0 {
		k := min(batch, len(tail))
		a, err := applyBatch(m, tail[:k])
		n += a
		if err != nil {
			return n, err
		}
		tail = tail[k:]
	}
	return n, nil
}

// ---- restore, restart ----

func stateRestore(cfg StateConfig, rep *StateReport) error {
	rep.RestoreLoad = loadAvg()
	resetPeak()
	start := time.Now()
	f, err := os.Open(cfg.snapshotPath())
	if err != nil {
		return err
	}
	defer f.Close()
	var m *fsm.Machine
	if cfg.Engine == EngineFsmPebble {
		dir, err := openDir(cfg.restorePath())
		if err != nil {
			return err
		}
		defer dir.Close()
		if m, err = fsm.RestoreInto(dir.Current(), f); err != nil {
			return err
		}
		m.Commit(m.AppliedIndex())
		m.Sync()
	} else if m, err = fsm.Restore(f); err != nil {
		return err
	}
	rep.RestoreSec = time.Since(start).Seconds()
	if m.Len() != cfg.N {
		return fmt.Errorf("restored %d intents, want %d", m.Len(), cfg.N)
	}
	runtime.GC()
	ps := procStatus()
	rep.RestorePeakRss, rep.RestoreRss = ps["VmHWM"], ps["VmRSS"]
	if cfg.Engine == EngineMemory {
		// Today's restart is this restore, then the log after the
		// snapshot: the tail.
		tail, err := readTail(cfg.tailPath())
		if err != nil {
			return err
		}
		start = time.Now()
		n, err := replay(m, tail, cfg.Batch)
		if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		rep.TailRestartOpenSec = rep.RestoreSec
		rep.TailRestartReplaySec = time.Since(start).Seconds()
		rep.TailRestartReplayed = n
		ps := procStatus()
		rep.TailRestartRss, rep.TailRestartPeakRss = ps["VmRSS"], ps["VmHWM"]
	}
	return nil
}

// reopen opens the Dir at path and the Machine in it, reads the tail
// (the raft log's entries after the snapshot) and applies what the store
// lacks; it returns the Machine's Dir (to close) and the times.
func reopen(path, tailPath string, batch int) (dir *pebblestate.Dir, m *fsm.Machine, open, apply time.Duration, n int, err error) {
	tail, err := readTail(tailPath)
	if err != nil {
		return nil, nil, 0, 0, 0, err
	}
	start := time.Now()
	if dir, err = openDir(path); err != nil {
		return nil, nil, 0, 0, 0, err
	}
	if m, err = fsm.Open(dir.Current()); err != nil {
		dir.Close()
		return nil, nil, 0, 0, 0, err
	}
	open = time.Since(start)
	start = time.Now()
	n, err = replay(m, tail, batch)
	apply = time.Since(start)
	if err != nil {
		dir.Close()
		return nil, nil, 0, 0, 0, fmt.Errorf("replay: %w", err)
	}
	if len(tail) > 0 && m.AppliedIndex() < tail[len(tail)-1].index {
		dir.Close()
		return nil, nil, 0, 0, 0, fmt.Errorf("applied %d after the replay, want %d", m.AppliedIndex(), tail[len(tail)-1].index)
	}
	return dir, m, open, apply, n, nil
}

func stateRestart(cfg StateConfig, rep *StateReport) error {
	if cfg.Engine != EngineFsmPebble {
		return nil // today's restart is a restore (PhaseRestore)
	}
	dir, m, open, skip, n, err := reopen(cfg.statePath(), cfg.tailPath(), cfg.Batch)
	if err != nil {
		return err
	}
	defer dir.Close()
	if n != 0 {
		return fmt.Errorf("a clean restart replayed %d entries, want none", n)
	}
	if m.Len() < cfg.N {
		return fmt.Errorf("restarted with %d intents, want %d or more", m.Len(), cfg.N)
	}
	rep.RestartOpenSec, rep.RestartSkipSec = open.Seconds(), skip.Seconds()
	rep.RestartRss = procStatus()["VmRSS"]
	return nil
}

func stateRestartTail(cfg StateConfig, rep *StateReport) error {
	if cfg.Engine != EngineFsmPebble {
		return nil // measured with the restore
	}
	dir, m, open, apply, n, err := reopen(cfg.crashPath(), cfg.tailPath(), cfg.Batch)
	if err != nil {
		return err
	}
	defer dir.Close()
	if m.Len() < cfg.N {
		return fmt.Errorf("restarted with %d intents, want %d or more", m.Len(), cfg.N)
	}
	rep.TailRestartOpenSec, rep.TailRestartReplaySec, rep.TailRestartReplayed = open.Seconds(), apply.Seconds(), n
	ps := procStatus()
	rep.TailRestartRss, rep.TailRestartPeakRss = ps["VmRSS"], ps["VmHWM"]
	return nil
}

// FromLegacy is the StateReport of a line from storebench's plain run
// (Run), as the base build prints it, run with -steady 0: its checkpoint
// is the snapshot, its restart the restore of it, in the same process.
func FromLegacy(r *Report) *StateReport {
	return &StateReport{
		Engine: r.Engine, N: r.N, Batch: r.Batch, InProcess: true,
		FillLoad:          r.LoadStart,
		FillIntentsPerSec: r.FillEntriesPerSec / 2, // a claim and a complete per intent
		FillApplyPerSec:   r.FillApplyPerSec,
		FillBatchP50us:    r.FillBatchP50us, FillBatchP99us: r.FillBatchP99us,
		HeapBytes: r.HeapBytes, HeapPerIntent: r.HeapPerIntent,
		RssBytes: r.RssBytes, RssAnonBytes: r.RssAnonBytes, RssFileBytes: r.RssFileBytes, PeakRssBytes: r.PeakRssBytes,
		ReadColdP50us: r.ReadColdP50us, ReadColdP99us: r.ReadColdP99us, ReadHotP50us: r.ReadHotP50us, ReadHotP99us: r.ReadHotP99us,
		SnapshotSec: r.CheckpointSec, SnapshotBytes: r.CheckpointBytes, SnapshotPeakExtra: r.CheckpointPeak,
		RestoreSec: r.RestartSec, RestoreRss: r.RestartRss, RestoreLoad: r.LoadEnd,
	}
}
