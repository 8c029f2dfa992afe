package nemesis

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/intentledger/intentd/jepsen/lazyfs"
	"github.com/intentledger/intentd/jepsen/nodes"
)

// storage is what the storage nemeses need from a nodes.Cluster whose data
// directories are lazy filesystems.
type storage interface {
	PowerLoss(ids []int, torn bool, r *rand.Rand) ([]lazyfs.Loss, error)
	RestartAll(ctx context.Context, ids []int) error
	Disk(i int) *lazyfs.FS
	Running(i int) bool
	Status(ctx context.Context, i int) (nodes.Status, error)
	RemovePeer(ctx context.Context, leader int, id string) error
}

// IsStorageNemesis reports whether the nemesis called name needs lazy
// filesystems under the nodes (nodes.Config.Storage).
func IsStorageNemesis(name string) bool {
	for _, p := range strings.Split(name, "+") {
		if strings.HasPrefix(p, "power-loss") || strings.HasPrefix(p, "disk-full") || strings.HasPrefix(p, "corrupt-") {
			return true
		}
	}
	return false
}

func (e *Env) storage() (storage, cluster, error) {
	c, err := e.nodes()
	if err != nil {
		return nil, nil, err
	}
	if e.Nodes == nil || !e.Nodes.HasDisks() {
		return nil, nil, errors.New("storage nemeses need the nodes on lazy filesystems (--storage)")
	}
	return e.Nodes, c, nil
}

// PowerLossMode says what the power-loss nemeses drop (Env.PowerLoss).
type PowerLossMode string

// The power-loss modes.
const (
	// PowerLossMixed draws each loss from the step's seed: half of them
	// clean, half torn. The zero PowerLossMode means the same.
	PowerLossMixed PowerLossMode = "mixed"
	// PowerLossClean drops every change not made durable
	// (lazyfs.FS.LoseUnsynced without Torn).
	PowerLossClean PowerLossMode = "clean"
	// PowerLossTorn tears every loss: the file written last keeps its
	// earlier unsynced writes and part of its last one
	// (lazyfs.LossOptions.Torn), everything else unsynced is dropped.
	PowerLossTorn PowerLossMode = "torn"
)

// ParsePowerLossMode reads a PowerLossMode ("" is mixed).
func ParsePowerLossMode(s string) (PowerLossMode, error) {
	switch m := PowerLossMode(s); m {
	case "", PowerLossMixed:
		return PowerLossMixed, nil
	case PowerLossClean, PowerLossTorn:
		return m, nil
	}
	return "", fmt.Errorf("nemesis: unknown power-loss mode %q (want mixed, clean or torn)", s)
}

// torn draws whether a loss is torn. It draws from r in every mode, so the
// mode changes no other choice of the step.
func (m PowerLossMode) torn(r *rand.Rand) bool {
	drawn := r.Intn(2) == 0
	switch m {
	case PowerLossClean:
		return false
	case PowerLossTorn:
		return true
	}
	return drawn
}

// powerLoss cuts the power of ids at once (torn or not, as env.PowerLoss
// says, drawn from r when mixed) and heals by starting them all again and
// waiting until each is ready.
func powerLoss(env *Env, ids []int, r *rand.Rand, what string) (string, []string, func(context.Context) error, error) {
	s, _, err := env.storage()
	if err != nil {
		return "", nil, nil, err
	}
	torn := env.PowerLoss.torn(r)
	heal := func(ctx context.Context) error { return s.RestartAll(ctx, ids) }
	losses, err := s.PowerLoss(ids, torn, rand.New(rand.NewSource(r.Int63())))
	if err != nil {
		return "", nil, heal, err
	}
	var parts []string
	for k, l := range losses {
		p := fmt.Sprintf("%s lost %d writes, %d dir changes", nodes.Name(ids[k]), l.DataRecords, l.EntryRecords)
		if l.TornFile != "" {
			p += fmt.Sprintf(", torn %s kept %d bytes", filepath.Base(l.TornFile), l.TornKept)
		}
		if l.Errors > 0 {
			p += fmt.Sprintf(", %d undo errors (%s)", l.Errors, l.FirstError)
		}
		parts = append(parts, p)
	}
	mode := "clean"
	if torn {
		mode = "torn"
	}
	return fmt.Sprintf("power loss (%s) of %s: %s", mode, what, strings.Join(parts, "; ")), names(ids), heal, nil
}

func powerLossRandom(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	i := 1 + r.Intn(c.Nodes())
	return powerLoss(env, []int{i}, r, nodes.Name(i))
}

func powerLossLeader(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	l, _, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	return powerLoss(env, []int{l}, r, "leader "+nodes.Name(l))
}

func powerLossMinority(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	ids := minority(r, c.Nodes())
	return powerLoss(env, ids, r, "minority "+join(ids))
}

func powerLossAll(_ context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	c, r, err := env.nodesAndRand()
	if err != nil {
		return "", nil, nil, err
	}
	ids := make([]int, c.Nodes())
	for k := range ids {
		ids[k] = k + 1
	}
	return powerLoss(env, ids, r, "every node")
}

// DiskFullRecover bounds how long a node whose disk was full may take to
// be ready again, by itself, once space returns.
const DiskFullRecover = 30 * time.Second

// diskFull fills node i's disk. Heal returns the space and waits, up to
// DiskFullRecover, for the node to be ready again by itself and to have
// applied everything the cluster had committed when space returned (a
// node whose appends failed all along may still answer /readyz): it fails
// if the node exited meanwhile (a full disk must not kill it; it is started
// again so that the run can go on) or has not recovered in time.
func diskFull(env *Env, i int, what string) (string, []string, func(context.Context) error, error) {
	s, c, err := env.storage()
	if err != nil {
		return "", nil, nil, err
	}
	d := s.Disk(i)
	d.SetFull(true)
	heal := func(ctx context.Context) error {
		d.SetFull(false)
		returned := time.Now()
		if !s.Running(i) {
			return fmt.Errorf("%s exited while its disk was full (see its log); starting it again: %w",
				nodes.Name(i), s.RestartAll(ctx, []int{i}))
		}
		wctx, cancel := context.WithTimeout(ctx, DiskFullRecover)
		defer cancel()
		if err := c.WaitReady(wctx, i); err != nil {
			return fmt.Errorf("%s was not ready %v after its disk had space again: %w", nodes.Name(i), DiskFullRecover, err)
		}
		commit, err := caughtUp(wctx, s, c, i)
		if err != nil {
			return fmt.Errorf("%s did not catch up within %v after its disk had space again: %w", nodes.Name(i), DiskFullRecover, err)
		}
		env.logf("nemesis disk-full: %s ready and caught up (commit index %d) %v after space returned",
			nodes.Name(i), commit, time.Since(returned).Round(time.Millisecond))
		return nil
	}
	return "disk full on " + what, names([]int{i}), heal, nil
}

// caughtUp waits, bounded by ctx, until node i has applied the leader's
// commit index as it is now, and returns that index.
func caughtUp(ctx context.Context, s storage, c cluster, i int) (uint64, error) {
	var commit uint64
	for {
		if commit == 0 {
			if l, err := c.Leader(ctx); err == nil {
				if st, err := s.Status(ctx, l); err == nil {
					commit = st.CommitIndex
				}
			}
		}
		if commit > 0 {
			if st, err := s.Status(ctx, i); err == nil && st.AppliedIndex >= commit {
				return commit, nil
			}
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return commit, ctx.Err()
		case <-t.C:
		}
	}
}

func diskFullLeader(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	l, _, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	return diskFull(env, l, "leader "+nodes.Name(l))
}

func diskFullFollower(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	l, c, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	f := 1 + r.Intn(c.Nodes()-1)
	if f >= l {
		f++
	}
	return diskFull(env, f, "follower "+nodes.Name(f))
}

// corruptFile SIGKILLs follower f, flips one byte of a file pick chooses
// in its data dir (relative path and offset), and heals by starting it
// again. The node must then detect the corruption (refuse to serve from
// it, recover from its peers, or stop with a clear error): the checkers
// see any wrong answer, and a node that does not come back fails the
// heal.
func corruptFile(ctx context.Context, env *Env, what string, pick func(dir string, r *rand.Rand) (string, int64, error)) (string, []string, func(context.Context) error, error) {
	s, _, err := env.storage()
	if err != nil {
		return "", nil, nil, err
	}
	l, c, err := env.leader(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	r, err := env.rng()
	if err != nil {
		return "", nil, nil, err
	}
	f := 1 + r.Intn(c.Nodes()-1)
	if f >= l {
		f++
	}
	heal := func(ctx context.Context) error {
		err := s.RestartAll(ctx, []int{f})
		if err == nil || !strings.Contains(err.Error(), "cannot be restored") {
			return err
		}
		// The node detected the corruption and stopped with a clear error
		// (cluster.ErrUnrestorable): do what it says. Started empty in its
		// place it would have forgotten its vote and the entries it
		// acknowledged while still counted in every majority (PAR, FAST
		// '18), so it is removed from the configuration through the
		// leader first, then wiped, then started empty: it rejoins as a
		// new member (a nonvoter until caught up, then promoted).
		env.logf("nemesis: %s stopped on its corrupt state as it should; removing it through the leader, "+
			"wiping its data dir and starting it empty to rejoin as a new member", nodes.Name(f))
		if rerr := removeThroughLeader(ctx, env, s, f); rerr != nil {
			return errors.Join(err, rerr)
		}
		if werr := wipe(s.Disk(f)); werr != nil {
			return errors.Join(err, werr)
		}
		return s.RestartAll(ctx, []int{f})
	}
	if err := c.Kill(f); err != nil {
		return "", nil, nil, err
	}
	d := s.Disk(f)
	rel, off, err := pick(d.Backing(), r)
	if err == nil && what == "the newest snapshot" && isCheckpoint(filepath.Join(d.Backing(), rel)) {
		// A checkpoint snapshot (a node on pebble): the node does not read
		// its own snapshot while its store holds the state, so make it
		// rebuild the store from its snapshots and log at the restart, as
		// an operator would (touch state.rebuild): it must notice the bad
		// checkpoint and restore an older snapshot, or stop.
		err = markRebuild(d)
	}
	if err != nil {
		return "", nil, heal, fmt.Errorf("%s: %w", nodes.Name(f), err)
	}
	mask := byte(1 << r.Intn(8))
	if what == "the newest snapshot" || what == "a replayed log entry" {
		mask = 1 // an even digit to the next one (payloadDigits, replayedDigits)
	}
	if err := d.Flip(rel, off, mask); err != nil {
		return "", nil, heal, err
	}
	return fmt.Sprintf("corrupt %s of follower %s: %s byte %d ^= %#02x", what, nodes.Name(f), rel, off, mask),
		names([]int{f}), heal, nil
}

// files lists the regular files under dir/sub matching ok, relative to
// dir, sorted.
func files(dir, sub string, ok func(rel string, size int64) bool) ([]string, map[string]int64, error) {
	var out []string
	sizes := map[string]int64{}
	err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, e os.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if info.Size() > 0 && ok(rel, info.Size()) {
			out = append(out, rel)
			sizes[rel] = info.Size()
		}
		return nil
	})
	sort.Strings(out)
	return out, sizes, err
}

// segments are raft-wal's segment files, oldest first.
func segments(dir string) ([]string, map[string]int64, error) {
	return files(dir, "wal", func(rel string, _ int64) bool { return strings.HasSuffix(rel, ".wal") })
}

// lastWritten is the end of the data written into a preallocated segment:
// the offset after its last non-zero byte.
func lastWritten(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	end := len(b)
	for end > 0 && b[end-1] == 0 {
		end--
	}
	return int64(end), nil
}

func corruptLogTail(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	return corruptFile(ctx, env, "the log's tail", func(dir string, r *rand.Rand) (string, int64, error) {
		segs, _, err := segments(dir)
		if err != nil || len(segs) == 0 {
			return "", 0, fmt.Errorf("no log segment to corrupt (%v)", err)
		}
		last := segs[len(segs)-1]
		end, err := lastWritten(filepath.Join(dir, last))
		if err != nil || end == 0 {
			return "", 0, fmt.Errorf("log segment %s holds nothing (%v)", last, err)
		}
		// One of the last 64 bytes written: the newest entries.
		return last, max(0, end-1-r.Int63n(min(64, end))), nil
	})
}

func corruptLogMiddle(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	return corruptFile(ctx, env, "a log segment's middle", func(dir string, r *rand.Rand) (string, int64, error) {
		segs, _, err := segments(dir)
		if err != nil || len(segs) == 0 {
			return "", 0, fmt.Errorf("no log segment to corrupt (%v)", err)
		}
		seg := segs[r.Intn(len(segs))]
		end, err := lastWritten(filepath.Join(dir, seg))
		if err != nil || end < 64 {
			return "", 0, fmt.Errorf("log segment %s holds too little (%v)", seg, err)
		}
		return seg, end/4 + r.Int63n(end/2), nil
	})
}

func corruptSnapshot(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	return corruptFile(ctx, env, "the newest snapshot", func(dir string, r *rand.Rand) (string, int64, error) {
		snaps, _, err := files(dir, "snapshots", func(rel string, _ int64) bool { return filepath.Base(rel) == "state.bin" })
		s := newestSnapshot(snaps)
		if err != nil || s == "" {
			return "", 0, fmt.Errorf("no snapshot to corrupt (%v)", err)
		}
		if cp := filepath.Join(filepath.Dir(s), "checkpoint"); isCheckpoint(filepath.Join(dir, cp)) {
			// The ledger is in the checkpoint's sstables: flip a bit of one
			// (pebble's block checksums must see it, or the byte was one no
			// read needs).
			ssts, sizes, err := files(dir, cp, func(rel string, _ int64) bool { return strings.HasSuffix(rel, ".sst") })
			if err != nil || len(ssts) == 0 {
				return "", 0, fmt.Errorf("%s: no sstable to corrupt (%v)", cp, err)
			}
			f := ssts[r.Intn(len(ssts))]
			return f, r.Int63n(sizes[f]), nil
		}
		b, err := os.ReadFile(filepath.Join(dir, s))
		if err != nil {
			return "", 0, err
		}
		digits, err := payloadDigits(b)
		if err != nil {
			return "", 0, fmt.Errorf("%s: %w", s, err)
		}
		if len(digits) == 0 {
			return "", 0, fmt.Errorf("%s: no intent's payload holds a digit to corrupt", s)
		}
		return s, digits[r.Intn(len(digits))], nil
	})
}

// newestSnapshot is the state.bin, of those listed, of the snapshot raft
// restores first: the highest (term, index) in raft's directory names
// (term-index-millis), leaving out the temporary ones (.tmp) raft
// ignores. A name sort would not do: index 982 sorts after 1528.
func newestSnapshot(states []string) string {
	best, bestTerm, bestIndex := "", uint64(0), uint64(0)
	for _, st := range states {
		parts := strings.Split(filepath.Base(filepath.Dir(st)), "-")
		if len(parts) != 3 {
			continue
		}
		term, err1 := strconv.ParseUint(parts[0], 10, 64)
		index, err2 := strconv.ParseUint(parts[1], 10, 64)
		if _, err3 := strconv.ParseUint(parts[2], 10, 64); err1 != nil || err2 != nil || err3 != nil {
			continue // not raft's, or a .tmp one
		}
		if best == "" || term > bestTerm || term == bestTerm && index > bestIndex {
			best, bestTerm, bestIndex = st, term, index
		}
	}
	return best
}

// payloadDigits lists the offsets of the even digits ('0', '2', ... '8')
// inside the intents' payloads in a snapshot's state.bin, which holds the
// ledger's encoding as fsm.Machine.WriteSnapshot writes it: a JSON header
// line (with the intents' count), then one frame per intent, a 4-byte
// big-endian length and the record's binary encoding, whose first four
// fields are the namespace, key, owner and payload, each a uvarint length
// and its bytes (fsm/recordcodec.go); then the audit log events and the
// trailer.
//
// corrupt-snapshot turns one of these digits into the next, odd one
// (mask 1): never a '0', which could not lead a JSON number, and never
// back. A payload is the one field only the checksums protect (raft's
// CRC-64 over state.bin, the encoding's SHA-256 trailer): fsm.Restore
// checks it only as compact JSON, which it still is; the intent's
// fingerprint is kept apart and never recomputed from it; no index, time,
// state or audit event refers to it. Any other byte is caught, most of
// the time, by a value check behind the checksums (an audit event's hash,
// a length, an index or time out of bounds, a key out of order), so a
// node that skipped the checksums would refuse the snapshot rather than
// serve it. A changed payload is kept by every later state of the intent
// until its key is purged, so a replica that restored it keeps a digest
// of its own.
func payloadDigits(b []byte) ([]int64, error) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return nil, errors.New("no header line")
	}
	var hdr struct {
		Count int `json:"count"`
	}
	if err := json.Unmarshal(b[:nl], &hdr); err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	var digits []int64
	pos := nl + 1
	for k := 0; k < hdr.Count; k++ {
		if len(b)-pos < 4 {
			return nil, fmt.Errorf("intent %d: the frame's length is cut off", k)
		}
		n := int(binary.BigEndian.Uint32(b[pos:]))
		pos += 4
		if n > len(b)-pos {
			return nil, fmt.Errorf("intent %d: a frame of %d bytes, %d left", k, n, len(b)-pos)
		}
		frame := b[pos : pos+n]
		off := 0
		for field := 0; field < 4; field++ { // namespace, key, owner, payload
			l, w := binary.Uvarint(frame[off:])
			if w <= 0 || l > uint64(len(frame)-off-w) {
				return nil, fmt.Errorf("intent %d: field %d does not fit its frame", k, field)
			}
			off += w
			if field == 3 {
				for j, c := range frame[off : off+int(l)] {
					if c >= '0' && c <= '8' && (c-'0')%2 == 0 {
						digits = append(digits, int64(pos+off+j))
					}
				}
			}
			off += int(l)
		}
		pos += n
	}
	return digits, nil
}

func corruptState(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	return corruptFile(ctx, env, "a state file", func(dir string, r *rand.Rand) (string, int64, error) {
		// Everything the node keeps that is neither a log segment nor a
		// snapshot's state: raft-wal's meta database (term, vote, segment
		// list), snapshot metadata, identity and key material.
		// Not the state store (state/) or the checkpoints of the snapshots:
		// pebble checks an sstable's blocks when it reads them, at a time no
		// heal can wait for, and a store that fails a read is rebuilt at the
		// next start (corrupt-snapshot exercises that rebuild).
		all, sizes, err := files(dir, ".", func(rel string, _ int64) bool {
			return !strings.HasSuffix(rel, ".wal") && filepath.Base(rel) != "state.bin" &&
				!strings.HasPrefix(rel, "state/") && !strings.HasPrefix(rel, "checkpoints/") && !strings.Contains(rel, "/checkpoint/")
		})
		if err != nil || len(all) == 0 {
			return "", 0, fmt.Errorf("no state file to corrupt (%v)", err)
		}
		f := all[r.Intn(len(all))]
		return f, r.Int63n(sizes[f]), nil
	})
}

// removeThroughLeader asks the leader to remove follower f from the Raft
// configuration (POST /v1/cluster/peers/ID/remove, what intentctl peer
// remove sends), retrying while there is no leader or it refuses (no live
// majority yet) until ctx ends. A node already out of the configuration
// is done.
func removeThroughLeader(ctx context.Context, env *Env, s storage, f int) error {
	c, err := env.nodes()
	if err != nil {
		return err
	}
	for {
		l, err := c.Leader(ctx)
		if err == nil {
			if err = s.RemovePeer(ctx, l, nodes.Name(f)); err == nil || errors.Is(err, nodes.ErrUnknownPeer) {
				env.logf("nemesis: %s removed from the configuration by leader %s", nodes.Name(f), nodes.Name(l))
				return nil
			}
		}
		env.logf("nemesis: removing %s through the leader: %v; retrying", nodes.Name(f), err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("removing %s through the leader: %w (last: %w)", nodes.Name(f), ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// corruptLogEntry turns an even digit of an intent's payload into the next
// one in a log entry a restarted follower replays: one past its newest
// snapshot, in a batch before the last (raft-wal checks the CRC of the
// batch it finds at a segment's tail when it opens the log, and cuts a
// bad one as a torn write). Only the log's checksum sees such a byte: the
// command still decodes and its payload is still JSON, so a node that
// skipped it (the seeded bug log-no-checksum) applies another payload
// than its peers and its digest differs. Runs need --trailing-logs large
// enough that the follower catches up from its log rather than a
// snapshot.
func corruptLogEntry(ctx context.Context, env *Env) (string, []string, func(context.Context) error, error) {
	return corruptFile(ctx, env, "a replayed log entry", func(dir string, r *rand.Rand) (string, int64, error) {
		snaps, _, err := files(dir, "snapshots", func(rel string, _ int64) bool { return filepath.Base(rel) == "state.bin" })
		if err != nil {
			return "", 0, err
		}
		var after uint64
		if s := newestSnapshot(snaps); s != "" {
			parts := strings.Split(filepath.Base(filepath.Dir(s)), "-")
			after, _ = strconv.ParseUint(parts[1], 10, 64)
		}
		segs, _, err := segments(dir)
		if err != nil || len(segs) == 0 {
			return "", 0, fmt.Errorf("no log segment to corrupt (%v)", err)
		}
		type spot struct {
			seg string
			off int64
		}
		var spots []spot
		seen := map[string]bool{}
		for _, seg := range segs {
			b, err := os.ReadFile(filepath.Join(dir, seg))
			if err != nil {
				return "", 0, err
			}
			for _, off := range replayedDigits(b, after, seen) {
				spots = append(spots, spot{seg, off})
			}
		}
		if len(spots) == 0 {
			return "", 0, fmt.Errorf("no payload digit in a log entry past snapshot index %d, before the last batch", after)
		}
		sp := spots[r.Intn(len(spots))]
		return sp.seg, sp.off, nil
	})
}

// replayedDigits lists the offsets, in raft-wal segment b, of the even
// digits ('0' to '8') inside the intents' payloads ({"key":...}) of the
// entries with an index above after, leaving out the segment's last
// batch. Only the first claim of a key is taken (seen holds the keys met
// so far, across segments oldest first): in the contended workload it is
// the one granted, whose payload the intent keeps; a later claim of the
// same key is refused and its payload kept nowhere. A segment is a 32-byte header, then frames: an 8-byte header
// (type, 3 reserved bytes, a little-endian length, or a CRC for a commit
// frame) and a payload padded to 8 bytes; an entry frame's payload is the
// entry in raft-wal's codec, which starts with the index as a uvarint.
func replayedDigits(b []byte, after uint64, seen map[string]bool) []int64 {
	const (
		fileHeader  = 32
		frameEntry  = 1
		frameIndex  = 2
		frameCommit = 3
	)
	var batches [][]int64 // the digits of each committed batch
	var pending []int64   // of the batch being read
	for pos := fileHeader; pos+8 <= len(b); {
		typ := b[pos]
		n := int(binary.LittleEndian.Uint32(b[pos+4:]))
		if typ == frameCommit {
			batches = append(batches, pending)
			pending = nil
			pos += 8
			continue
		}
		if typ != frameEntry && typ != frameIndex || pos+8+n > len(b) {
			break // the end of what was written
		}
		if typ == frameEntry {
			payload := b[pos+8 : pos+8+n]
			index, w := binary.Uvarint(payload)
			digits := payloadDigitsIn(payload, int64(pos+8), seen)
			if w > 0 && index > after {
				pending = append(pending, digits...)
			}
		}
		pos += 8 + (n+7)&^7
	}
	var out []int64
	for k := 0; k < len(batches)-1; k++ { // not the last batch
		out = append(out, batches[k]...)
	}
	return out
}

// payloadDigitsIn lists the offsets (base plus the offset in p) of the even
// digits inside each {"key":...} object in p, an encoded command, whose
// key seen does not hold yet (it is added).
func payloadDigitsIn(p []byte, base int64, seen map[string]bool) []int64 {
	var out []int64
	open := []byte(`{"key":`)
	for from := 0; ; {
		i := bytes.Index(p[from:], open)
		if i < 0 {
			return out
		}
		start := from + i
		end := bytes.IndexByte(p[start:], '}')
		if end < 0 {
			return out
		}
		obj := p[start : start+end]
		key, _, _ := bytes.Cut(obj, []byte(","))
		if !seen[string(key)] {
			seen[string(key)] = true
			for j, c := range obj {
				if c >= '0' && c <= '8' && (c-'0')%2 == 0 {
					out = append(out, base+int64(start+j))
				}
			}
		}
		from = start + end
	}
}

func wipe(d *lazyfs.FS) error {
	entries, err := os.ReadDir(d.Mountpoint())
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(d.Mountpoint(), e.Name())); err != nil {
			return err
		}
	}
	dir, err := os.Open(d.Mountpoint())
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// isCheckpoint reports whether path is, or is inside, a checkpoint
// snapshot's checkpoint directory (cluster/checkpoint.go).
func isCheckpoint(path string) bool {
	for p := path; p != "/" && p != "."; p = filepath.Dir(p) {
		if filepath.Base(p) == "checkpoint" && filepath.Base(filepath.Dir(filepath.Dir(p))) == "snapshots" {
			info, err := os.Stat(p)
			return err == nil && info.IsDir()
		}
	}
	return false
}

// markRebuild writes the state store's rebuild marker into a stopped
// node's data dir, through the mount, durably (what `touch
// <data-dir>/state.rebuild` does for an operator).
func markRebuild(d *lazyfs.FS) error {
	p := filepath.Join(d.Mountpoint(), "state.rebuild")
	f, err := os.Create(p)
	if err != nil {
		return fmt.Errorf("mark the state store for a rebuild: %w", err)
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("mark the state store for a rebuild: %w", err)
	}
	dir, err := os.Open(d.Mountpoint())
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}
