package storeeval

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// Config is one run: one engine, one size.
type Config struct {
	Engine string
	// N intents are claimed and completed (the fill); the dedupe window is
	// N ms of command time at 1,000 intents/s, so in the steady phase the
	// ledger holds about N intents.
	N int
	// Steady more intents are claimed, completed and purged once due.
	Steady int
	// Reads point reads of random live keys, hot and cold each.
	Reads int
	// Dir is an empty directory for the store, checkpoints and snapshots.
	Dir string
	// Batch is entries per apply batch (raft's MaxAppendEntries is 64).
	Batch int
	// ScanFromStart: the engines' sweeps scan each time index from its
	// start (over the tombstones), not from a low-water mark.
	ScanFromStart bool
}

// Report is what one run measured. Times are seconds unless named
// otherwise, sizes bytes.
type Report struct {
	Engine        string `json:"engine"`
	ScanFromStart bool   `json:"scan_from_start,omitempty"`
	N             int    `json:"n"`
	Steady        int    `json:"steady"`
	Batch         int    `json:"batch"`

	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`

	// EntriesPerSec figures are over the wall time of a phase, the
	// workload generator's share included; ApplyPerSec over the timed
	// applies alone.
	FillEntriesPerSec   float64 `json:"fill_entries_per_s"`
	FillApplyPerSec     float64 `json:"fill_apply_entries_per_s"`
	SteadyApplyPerSec   float64 `json:"steady_apply_entries_per_s"`
	FillBatchP50us      float64 `json:"fill_batch_p50_us"`
	FillBatchP99us      float64 `json:"fill_batch_p99_us"`
	FillBatchMaxus      float64 `json:"fill_batch_max_us"`
	SteadyEntriesPerSec float64 `json:"steady_entries_per_s"`
	SteadyBatchP50us    float64 `json:"steady_batch_p50_us"`
	SteadyBatchP99us    float64 `json:"steady_batch_p99_us"`
	SteadyBatchMaxus    float64 `json:"steady_batch_max_us"`
	Purged              int     `json:"purged"`
	Live                int     `json:"live"`

	ReadColdP50us float64 `json:"read_cold_p50_us"`
	ReadColdP99us float64 `json:"read_cold_p99_us"`
	ReadHotP50us  float64 `json:"read_hot_p50_us"`
	ReadHotP99us  float64 `json:"read_hot_p99_us"`

	// Memory after the steady phase: Go heap live after GC, the process's
	// resident set, anonymous and file-backed, and its peak.
	HeapBytes       uint64  `json:"heap_bytes"`
	HeapPerIntent   float64 `json:"heap_per_intent"` // growth over the fill / N
	RssBytes        uint64  `json:"rss_bytes"`
	RssAnonBytes    uint64  `json:"rss_anon_bytes"`
	RssFileBytes    uint64  `json:"rss_file_bytes"`
	PeakRssBytes    uint64  `json:"peak_rss_bytes"`
	DiskBytes       int64   `json:"disk_bytes"`
	DiskPerIntent   float64 `json:"disk_per_intent"`
	LogicalWritten  int64   `json:"logical_written"` // keys and values set
	SyscallWritten  int64   `json:"syscall_written"` // /proc/self/io wchar
	StorageWritten  int64   `json:"storage_written"` // /proc/self/io write_bytes
	WriteAmp        float64 `json:"write_amp"`       // syscall / logical
	CheckpointSec   float64 `json:"checkpoint_s"`
	CheckpointBytes int64   `json:"checkpoint_bytes"`
	CheckpointPeak  int64   `json:"checkpoint_peak_extra_rss"` // VmHWM during it less RSS before
	LinkCheckpoint  float64 `json:"link_checkpoint_s,omitempty"`
	RestartSec      float64 `json:"restart_s"`
	RestartRss      uint64  `json:"restart_rss_bytes"`
	AppliedAfter    uint64  `json:"applied_after_restart"`
	AppliedBefore   uint64  `json:"applied_before_restart"`
}

// Run runs cfg and reports.
func Run(cfg Config) (*Report, error) {
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	rep := &Report{Engine: cfg.Engine, ScanFromStart: cfg.ScanFromStart, N: cfg.N, Steady: cfg.Steady, Batch: cfg.Batch, LoadStart: loadAvg()}
	var d driver
	if cfg.Engine == EngineMemory {
		d = &memDriver{window: int64(cfg.N)}
	} else {
		t, err := NewTemplates()
		if err != nil {
			return nil, err
		}
		st, err := Open(cfg.Engine, filepath.Join(cfg.Dir, "store"))
		if err != nil {
			return nil, err
		}
		d = &storeDriver{engine: cfg.Engine, dir: cfg.Dir, st: st, t: t, window: int64(cfg.N),
			scanFromStart: cfg.ScanFromStart, lw: map[byte]int64{}}
	}
	defer d.close()
	heap0 := heapLive()
	io0 := procIO()

	// Fill: per batch, half claims of new intents and half completes of
	// intents claimed lag intents earlier.
	half := cfg.Batch / 2
	var lat []time.Duration
	start := time.Now()
	entries := 0
	next, done := 0, 0
	for done < cfg.N {
		var claims, completes []int
		bound := next - lag // completes trail their claims, in earlier batches
		if next == cfg.N {
			bound = next
		}
		for len(claims) < half && next < cfg.N {
			claims = append(claims, next)
			next++
		}
		for len(completes) < cfg.Batch-len(claims) && done < bound {
			completes = append(completes, done)
			done++
		}
		el, n, err := d.batch(claims, completes, false)
		if err != nil {
			return nil, fmt.Errorf("fill: %w", err)
		}
		lat = append(lat, el)
		entries += n
	}
	rep.FillEntriesPerSec = float64(entries) / time.Since(start).Seconds()
	rep.FillApplyPerSec = float64(entries) / sum(lat).Seconds()
	rep.FillBatchP50us, rep.FillBatchP99us, rep.FillBatchMaxus = pct(lat, 50), pct(lat, 99), pct(lat, 100)
	heapFill := heapLive()
	rep.HeapPerIntent = float64(int64(heapFill)-int64(heap0)) / float64(max(cfg.N, 1))

	// Steady: claims, completes, and a purge of what is due per batch.
	lat = lat[:0]
	start = time.Now()
	entries = 0
	end := cfg.N + cfg.Steady
	for done < end {
		var claims, completes []int
		bound := next - lag
		if next == end {
			bound = next
		}
		for len(claims) < half && next < end {
			claims = append(claims, next)
			next++
		}
		for len(completes) < cfg.Batch-len(claims) && done < bound {
			completes = append(completes, done)
			done++
		}
		el, n, err := d.batch(claims, completes, true)
		if err != nil {
			return nil, fmt.Errorf("steady: %w", err)
		}
		lat = append(lat, el)
		entries += n
	}
	if cfg.Steady > 0 {
		rep.SteadyEntriesPerSec = float64(entries) / time.Since(start).Seconds()
		rep.SteadyApplyPerSec = float64(entries) / sum(lat).Seconds()
		rep.SteadyBatchP50us, rep.SteadyBatchP99us, rep.SteadyBatchMaxus = pct(lat, 50), pct(lat, 99), pct(lat, 100)
	}
	rep.Purged = d.purged()
	rep.Live = end - rep.Purged
	io1 := procIO()
	rep.LogicalWritten = d.logical()
	rep.SyscallWritten = io1["wchar"] - io0["wchar"]
	rep.StorageWritten = io1["write_bytes"] - io0["write_bytes"]
	if rep.LogicalWritten > 0 {
		rep.WriteAmp = float64(rep.SyscallWritten) / float64(rep.LogicalWritten)
	}

	// Reads: cold (any live intent) and hot (the newest 1%).
	rng := rand.New(rand.NewPCG(1, 2))
	lo := rep.Purged
	read := func(from int) ([]time.Duration, error) {
		out := make([]time.Duration, 0, cfg.Reads)
		for range cfg.Reads {
			i := from + rng.IntN(end-from)
			el, ok, err := d.get(i)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("intent %d not found", i)
			}
			out = append(out, el)
		}
		return out, nil
	}
	cold, err := read(lo)
	if err != nil {
		return nil, fmt.Errorf("cold reads: %w", err)
	}
	hot, err := read(max(lo, end-max(cfg.N/100, 1)))
	if err != nil {
		return nil, fmt.Errorf("hot reads: %w", err)
	}
	rep.ReadColdP50us, rep.ReadColdP99us = pct(cold, 50), pct(cold, 99)
	rep.ReadHotP50us, rep.ReadHotP99us = pct(hot, 50), pct(hot, 99)

	rep.HeapBytes = heapLive()
	ps := procStatus()
	rep.RssBytes, rep.RssAnonBytes, rep.RssFileBytes = ps["VmRSS"], ps["RssAnon"], ps["RssFile"]
	rep.PeakRssBytes = ps["VmHWM"]
	rep.DiskBytes = d.diskBytes()
	rep.DiskPerIntent = float64(rep.DiskBytes) / float64(max(rep.Live, 1))

	// Checkpoint, with the peak resident set reset before it.
	resetPeak()
	before := procStatus()["VmRSS"]
	start = time.Now()
	n, err := d.checkpoint(filepath.Join(cfg.Dir, "checkpoint"))
	if err != nil {
		return nil, fmt.Errorf("checkpoint: %w", err)
	}
	rep.CheckpointSec = time.Since(start).Seconds()
	rep.CheckpointBytes = n
	rep.CheckpointPeak = int64(procStatus()["VmHWM"]) - int64(before)
	if ls, ok := d.(interface{ linkCheckpoint(string) (float64, error) }); ok {
		if rep.LinkCheckpoint, err = ls.linkCheckpoint(filepath.Join(cfg.Dir, "links")); err != nil {
			return nil, fmt.Errorf("link checkpoint: %w", err)
		}
	}

	// Restart: close cleanly and open again until the applied index reads.
	rep.AppliedBefore = d.applied()
	el, err := d.restart(filepath.Join(cfg.Dir, "checkpoint"))
	if err != nil {
		return nil, fmt.Errorf("restart: %w", err)
	}
	rep.RestartSec = el.Seconds()
	rep.AppliedAfter = d.applied()
	runtime.GC()
	rep.RestartRss = procStatus()["VmRSS"]
	rep.LoadEnd = loadAvg()
	return rep, nil
}

// lag is how many intents a complete trails its claim by.
const lag = 256

func claimTime(i int) int64    { return Base + int64(i)*1e6 }
func completeTime(i int) int64 { return Base + int64(i+lag)*1e6 }

// driver applies the workload to one candidate.
type driver interface {
	// batch applies the claims and completes (and a purge of what is due
	// when purge is set) as one raft batch; it reports the time the apply
	// took and the entries applied.
	batch(claims, completes []int, purge bool) (time.Duration, int, error)
	get(i int) (time.Duration, bool, error)
	checkpoint(path string) (int64, error)
	restart(checkpoint string) (time.Duration, error)
	applied() uint64
	purged() int
	logical() int64
	diskBytes() int64
	close()
}

// ---- a storage engine ----

type storeDriver struct {
	engine, dir string
	st          Store
	t           *Templates
	window      int64 // ms
	index, seq  uint64
	now         int64
	nPurged     int
	written     int64
	// ScanFromStart makes the sweeps' index scans start at the beginning
	// of the index, over every tombstone of a deleted entry, instead of
	// at the low-water mark.
	scanFromStart bool
	// lw is a low-water mark per time index: no entry is older. The
	// sweeps' scans start there, so they do not walk the deleted entries
	// (an LSM's tombstones) at the head of the index. It is the leader's
	// read state only, never part of an apply.
	lw map[byte]int64
}

// due scans a time index from its low-water mark and moves the mark.
func (s *storeDriver) due(tx Txn, t byte, until int64, max int) ([][]byte, error) {
	from := s.lw[t]
	if s.scanFromStart {
		from = 0
	}
	keys, err := tx.Due(t, from, until, max)
	if err != nil {
		return nil, err
	}
	if len(keys) == max {
		s.lw[t] = int64(binary.BigEndian.Uint64(keys[len(keys)-1][:8]))
	} else {
		s.lw[t] = until
	}
	return keys, nil
}

// indexed lowers a time index's low-water mark to at.
func (s *storeDriver) indexed(t byte, at int64) {
	if s.lw == nil {
		s.lw = map[byte]int64{}
	}
	if v, ok := s.lw[t]; !ok || at < v {
		s.lw[t] = at
	}
}

func recordKey(i int) []byte {
	return append([]byte{tableRecord}, Namespace+"\x00"+Key(i)...)
}

func timedKey(table byte, at int64, nsKey []byte) []byte {
	k := binary.BigEndian.AppendUint64([]byte{table}, uint64(at))
	return append(k, nsKey...)
}

func chainKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{tableChain}, Namespace+"\x00"...), seq)
}

var metaKey = []byte{tableMeta, 'a', 'p', 'p', 'l', 'i', 'e', 'd'}

// op is one pre-built write of an entry, after a read of get if set.
type op struct {
	get, key, val []byte
	del           bool
}

func (s *storeDriver) batch(claims, completes []int, purge bool) (time.Duration, int, error) {
	// Build the entries' keys and values first: the apply is timed, the
	// workload generator is not.
	type entry struct {
		ops   []op
		event []byte
	}
	var es []entry
	window := s.window * 1e6
	for _, i := range claims {
		rk := recordKey(i)
		es = append(es, entry{ops: []op{{get: rk, key: rk, val: s.t.DeclaredRecord(i)},
			{key: timedKey(tableLease, claimTime(i)+LeaseMS*1e6, rk[1:])}}, event: s.t.Event("claim", i)})
		s.now = max(s.now, claimTime(i))
	}
	for _, i := range completes {
		rk := recordKey(i)
		es = append(es, entry{ops: []op{{get: rk, key: rk, val: s.t.ExecutedRecord(i)},
			{key: timedKey(tableLease, claimTime(i)+LeaseMS*1e6, rk[1:]), del: true},
			{key: timedKey(tablePurge, completeTime(i)+window, rk[1:])}}, event: s.t.Event("complete", i)})
		s.now = max(s.now, completeTime(i))
	}
	purgeEvent := s.t.Event("purge", 0)
	entries := len(es)
	start := time.Now()
	err := s.st.Apply(func(tx Txn) error {
		put := func(k, v []byte) error {
			s.written += int64(len(k) + len(v))
			return tx.Set(k, v)
		}
		chain := func(v []byte) error {
			s.seq++
			if err := put(chainKey(s.seq), v); err != nil {
				return err
			}
			if s.seq > ChainRetention {
				return tx.Delete(chainKey(s.seq - ChainRetention))
			}
			return nil
		}
		for _, e := range es {
			for _, o := range e.ops {
				if !o.del && (o.key[0] == tableLease || o.key[0] == tablePurge) {
					s.indexed(o.key[0], int64(binary.BigEndian.Uint64(o.key[1:9])))
				}
				if o.get != nil {
					if _, _, err := tx.Get(o.get); err != nil {
						return err
					}
				}
				var err error
				if o.del {
					err = tx.Delete(o.key)
				} else {
					err = put(o.key, o.val)
				}
				if err != nil {
					return err
				}
			}
			if err := chain(e.event); err != nil {
				return err
			}
		}
		// The leader's sweeps read the indexes (DueLeases, DuePurges);
		// the purge they propose deletes what is due.
		if _, err := s.due(tx, tableLease, s.now, 64); err != nil {
			return err
		}
		if purge {
			due, err := s.due(tx, tablePurge, s.now+1, 64)
			if err != nil {
				return err
			}
			if len(due) > 0 {
				entries++
			}
			for _, k := range due { // purge time, then ns 0 key
				rk := append([]byte{tableRecord}, k[8:]...)
				if _, ok, err := tx.Get(rk); err != nil || !ok {
					return fmt.Errorf("purge of a record not there: %v", err)
				}
				if err := tx.Delete(rk); err != nil {
					return err
				}
				if err := tx.Delete(append([]byte{tablePurge}, k...)); err != nil {
					return err
				}
				if err := chain(purgeEvent); err != nil {
					return err
				}
				s.nPurged++
			}
		}
		s.index += uint64(entries)
		meta := binary.BigEndian.AppendUint64(nil, s.index)
		meta = binary.BigEndian.AppendUint64(meta, uint64(s.now))
		meta = binary.BigEndian.AppendUint64(meta, s.seq)
		meta = append(meta, purgeEvent[:64]...) // the chain head's last hash
		return put(metaKey, meta)
	})
	return time.Since(start), entries, err
}

func (s *storeDriver) get(i int) (time.Duration, bool, error) {
	k := recordKey(i)
	start := time.Now()
	_, ok, err := s.st.Get(k)
	return time.Since(start), ok, err
}

func (s *storeDriver) checkpoint(path string) (int64, error) { return s.st.Checkpoint(path) }

func (s *storeDriver) linkCheckpoint(dir string) (float64, error) {
	ps, ok := s.st.(*pebbleStore)
	if !ok {
		return 0, nil
	}
	start := time.Now()
	err := ps.LinkCheckpoint(dir)
	return time.Since(start).Seconds(), err
}

func (s *storeDriver) restart(string) (time.Duration, error) {
	if err := s.st.Close(); err != nil {
		return 0, err
	}
	s.st = nil
	runtime.GC()
	start := time.Now()
	st, err := Open(s.engine, filepath.Join(s.dir, "store"))
	if err != nil {
		return 0, err
	}
	s.st = st
	v, ok, err := st.Get(metaKey)
	if err != nil || !ok {
		return 0, fmt.Errorf("applied index after restart: %v", err)
	}
	s.index = binary.BigEndian.Uint64(v)
	return time.Since(start), nil
}

func (s *storeDriver) applied() uint64  { return s.index }
func (s *storeDriver) purged() int      { return s.nPurged }
func (s *storeDriver) logical() int64   { return s.written }
func (s *storeDriver) diskBytes() int64 { return dirBytes(filepath.Join(s.dir, "store")) }
func (s *storeDriver) close() {
	if s.st != nil {
		s.st.Close()
	}
}

// ---- today's in-memory fsm.Machine ----

type memDriver struct {
	m       *fsm.Machine
	window  int64 // ms
	index   uint64
	fences  [4 * lag]uint64 // grant index by intent, a ring
	nPurged int
}

func (d *memDriver) batch(claims, completes []int, purge bool) (time.Duration, int, error) {
	if d.m == nil {
		d.m = fsm.New()
	}
	type entry struct {
		i     int
		claim bool
		data  []byte
	}
	var es []entry
	for _, i := range claims {
		data, err := ClaimEntry(i, claimTime(i), d.window)
		if err != nil {
			return 0, 0, err
		}
		es = append(es, entry{i, true, data})
	}
	for _, i := range completes {
		data, err := CompleteEntry(i, d.fences[i%len(d.fences)], completeTime(i))
		if err != nil {
			return 0, 0, err
		}
		// The fence is known once the claim is applied; fix it up then.
		es = append(es, entry{i, false, data})
	}
	n := len(es)
	start := time.Now()
	for _, e := range es {
		d.index++
		r := d.m.Apply(d.index, e.data)
		if e.claim {
			if r.Status != fsm.StatusGranted {
				return 0, 0, fmt.Errorf("claim %d: %s %s", e.i, r.Status, r.Detail)
			}
			d.fences[e.i%len(d.fences)] = d.index
		} else if r.Status != fsm.StatusOK {
			return 0, 0, fmt.Errorf("complete %d: %s %s", e.i, r.Status, r.Detail)
		}
	}
	if purge {
		if due := d.m.DuePurges(d.m.Now(), 64); len(due) > 0 {
			data, err := fsm.Encode(d.m.Now(), &fsm.Purge{Keys: due})
			if err != nil {
				return 0, 0, err
			}
			d.index++
			if r := d.m.Apply(d.index, data); r.Status != fsm.StatusOK {
				return 0, 0, fmt.Errorf("purge: %s %s", r.Status, r.Detail)
			}
			d.nPurged += len(due)
			n++
		}
	}
	return time.Since(start), n, nil
}

func (d *memDriver) get(i int) (time.Duration, bool, error) {
	k := Key(i)
	start := time.Now()
	in := d.m.Get(Namespace, k)
	return time.Since(start), in != nil, nil
}

// checkpoint is today's snapshot: a clone written to a file and fsynced.
func (d *memDriver) checkpoint(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	cw := &countWriter{w: f}
	if err := d.m.Clone().WriteSnapshot(cw); err != nil {
		return 0, err
	}
	return cw.n, f.Sync()
}

// restart is today's: the snapshot restored into a new Machine.
func (d *memDriver) restart(checkpoint string) (time.Duration, error) {
	d.m = nil
	runtime.GC()
	start := time.Now()
	f, err := os.Open(checkpoint)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	m, err := fsm.Restore(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return 0, err
	}
	d.m = m
	return time.Since(start), nil
}

func (d *memDriver) applied() uint64 {
	if d.m == nil {
		return 0
	}
	return d.m.AppliedIndex()
}
func (d *memDriver) purged() int      { return d.nPurged }
func (d *memDriver) logical() int64   { return 0 }
func (d *memDriver) diskBytes() int64 { return 0 }
func (d *memDriver) close()           {}

// ---- measuring ----

func pct(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return float64(s[i].Nanoseconds()) / 1e3
}

func sum(ds []time.Duration) time.Duration {
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return max(t, 1)
}

func heapLive() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// procStatus reads /proc/self/status's kB fields as bytes.
func procStatus() map[string]uint64 {
	out := map[string]uint64{}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 2 && f[1] == "kB" {
			if v, err := strconv.ParseUint(f[0], 10, 64); err == nil {
				out[name] = v << 10
			}
		}
	}
	return out
}

// resetPeak resets VmHWM to the current resident set.
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func procIO() map[string]int64 {
	out := map[string]int64{}
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			out[name] = v
		}
	}
	return out
}

func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
