package cluster

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// fill claims count keys and completes every other one, returning the
// highest fencing token granted.
func fill(t *testing.T, tc *testCluster, prefix string, count int) uint64 {
	t.Helper()
	ctx := ctxT(t)
	var maxToken uint64
	for i := 0; i < count; i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		r := tc.propose(ctx, claim(key, "o1"))
		if r.Status != fsm.StatusGranted {
			t.Fatalf("claim %s: %+v", key, r)
		}
		maxToken = max(maxToken, r.Intent.FencingToken)
		if i%2 == 0 {
			c := tc.propose(ctx, &fsm.Complete{Namespace: "default", Key: key, Owner: "o1",
				FencingToken: r.Intent.FencingToken, Outcome: fsm.OutcomeExecuted, Result: []byte(`{"ok":true}`)})
			if c.Status != fsm.StatusOK {
				t.Fatalf("complete %s: %+v", key, c)
			}
		}
	}
	return maxToken
}

func TestSnapshotRestoresIntoAFreshClusterWithTheSameDigest(t *testing.T) {
	src := newTestCluster(t, nil)
	src.startN(3)
	maxToken := fill(t, src, "backup", 40)
	ctx := ctxT(t)

	var snap bytes.Buffer
	info, err := src.leader().WriteSnapshot(ctx, &snap)
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	digest, _ := src.leader().Digest()
	if info.Digest != digest || info.Intents != 40 || info.Bytes != int64(snap.Len()) {
		t.Fatalf("snapshot info %+v, leader digest %s, %d bytes", info, digest, snap.Len())
	}
	for id, n := range src.nodes {
		if n.IsLeader() {
			continue
		}
		// A follower refuses: not the leader (or, just after an election,
		// not knowing it yet).
		if _, err := n.TakeSnapshot(ctx); !errors.Is(err, ledger.ErrNotLeader) && !errors.Is(err, ledger.ErrNoLeader) {
			t.Fatalf("follower %s took a snapshot: %v", id, err)
		}
	}

	dst := newTestCluster(t, nil)
	dst.startN(3)
	leader := dst.leader()
	for id, n := range dst.nodes {
		if n == leader {
			continue
		}
		if _, err := n.Restore(ctx, snap.Bytes(), false); !errors.Is(err, ledger.ErrNotLeader) && !errors.Is(err, ledger.ErrNoLeader) {
			t.Fatalf("follower %s restored: %v", id, err)
		}
	}
	corrupt := bytes.Replace(snap.Bytes(), []byte(`"o1"`), []byte(`"o2"`), 1)
	if _, err := leader.Restore(ctx, corrupt, false); !errors.Is(err, fsm.ErrBadSnapshot) {
		t.Fatalf("corrupt snapshot: %v", err)
	}
	// Leadership may move on a loaded machine: an unknown outcome or a lost
	// leader is retried on whoever leads, as an operator would; a restore
	// that did land makes the retry refuse with ErrNotEmpty, and the
	// digest below shows it.
	var got SnapshotInfo
	waitFor(t, 30*time.Second, "a definite answer to the restore", func() bool {
		got, err = dst.leader().Restore(ctx, snap.Bytes(), false)
		switch {
		case err == nil:
			return true
		case errors.Is(err, ErrNotEmpty):
			got = info // an earlier attempt with an unknown outcome landed
			return true
		case errors.Is(err, ledger.ErrOutcomeUnknown), errors.Is(err, ledger.ErrNotLeader), errors.Is(err, ledger.ErrNoLeader):
			t.Logf("restore: %v (retried)", err)
			return false
		}
		t.Fatalf("restore: %v", err)
		return false
	})
	if got != info {
		t.Fatalf("restore answered %+v, want %+v", got, info)
	}
	waitFor(t, 30*time.Second, "every replica of the new cluster to hold the snapshot's digest", func() bool {
		for _, n := range dst.nodes {
			if d, _ := n.Digest(); d != info.Digest {
				return false
			}
		}
		return true
	})
	// Reads answer as on the source cluster.
	var in *fsm.Intent
	if err := dst.leader().Read(ctx, ledger.Linearizable, func(l *fsm.Machine) { in = l.Get("default", "backup-0") }); err != nil || in == nil || in.State != fsm.StateExecuted {
		t.Fatalf("read after restore: %+v, %v", in, err)
	}
	// A second restore without force is refused; leadership may move on a
	// loaded machine, so ask whoever leads until one answers definitely.
	var second error
	waitFor(t, 30*time.Second, "a definite answer to a second restore", func() bool {
		l := dst.leader()
		if l == nil {
			return false
		}
		_, second = l.Restore(ctx, snap.Bytes(), false)
		return !errors.Is(second, ledger.ErrNotLeader) && !errors.Is(second, ledger.ErrNoLeader)
	})
	if !errors.Is(second, ErrNotEmpty) {
		t.Fatalf("second restore without force: %v", second)
	}
	// New grants are fenced above every token of the restored ledger.
	r := dst.propose(ctx, claim("after-restore", "o9"))
	if r.Status != fsm.StatusGranted || r.Intent.FencingToken <= maxToken {
		t.Fatalf("first grant after restore has token %d, the snapshot's highest is %d", r.Intent.FencingToken, maxToken)
	}
	waitFor(t, 30*time.Second, "every node ready after the restore", func() bool {
		for _, n := range dst.nodes {
			if !n.Status().Ready {
				return false
			}
		}
		return true
	})
}

// reheader returns snap with its header line changed by change and the
// SHA-256 trailer computed again, as anyone can.
func reheader(t *testing.T, snap []byte, change func(hdr map[string]any)) []byte {
	t.Helper()
	nl := bytes.IndexByte(snap, '\n')
	trailer := bytes.LastIndexByte(snap[:len(snap)-1], '\n') + 1
	dec := json.NewDecoder(bytes.NewReader(snap[:nl]))
	dec.UseNumber() // indexes and times as written
	var hdr map[string]any
	if err := dec.Decode(&hdr); err != nil {
		t.Fatal(err)
	}
	change(hdr)
	line, err := json.Marshal(hdr)
	if err != nil {
		t.Fatal(err)
	}
	body := append(append(line, '\n'), snap[nl+1:trailer]...)
	sum := sha256.Sum256(body)
	return append(body, fmt.Sprintf(`{"sha256":%q}`+"\n", hex.EncodeToString(sum[:]))...)
}

// restoreOnLeader asks whoever leads to restore data (force) until one
// answers definitely: leadership may move on a loaded machine.
func restoreOnLeader(t *testing.T, tc *testCluster, data []byte) (info SnapshotInfo, err error) {
	t.Helper()
	ctx := ctxT(t)
	waitFor(t, 30*time.Second, "a definite answer to a restore", func() bool {
		l := tc.leader()
		if l == nil {
			return false
		}
		info, err = l.Restore(ctx, data, true)
		return !errors.Is(err, ledger.ErrNotLeader) && !errors.Is(err, ledger.ErrNoLeader)
	})
	return info, err
}

// sameDigestEverywhere waits until every node holds the same digest and
// returns it.
func sameDigestEverywhere(t *testing.T, tc *testCluster) string {
	t.Helper()
	var digest string
	waitFor(t, 30*time.Second, "every node to hold the same digest", func() bool {
		digest = ""
		for _, n := range tc.nodes {
			d, _ := n.Digest()
			if digest != "" && d != digest {
				return false
			}
			digest = d
		}
		return true
	})
	return digest
}

// TestRestoreRefusesInvalidValuesAndKeepsServing: a snapshot with a sound
// trailer but values no ledger holds (an index that wraps Raft, a clock
// that overflows every lease, a signing seed that cannot sign, a clock
// far ahead of the cluster's) is refused before Raft sees it, even with
// force; the cluster keeps its state and goes on granting and reading.
// A plausible index far past the cluster's log restores, and Raft goes on
// from there.
func TestRestoreRefusesInvalidValuesAndKeepsServing(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	ctx := ctxT(t)
	maxToken := fill(t, tc, "keep", 6)
	if r := tc.propose(ctx, &fsm.AddSigningKey{Key: fsm.SigningKey{ID: "k1", Seed: bytes.Repeat([]byte{1}, 32)}}); r.Status != fsm.StatusOK {
		t.Fatalf("add signing key: %+v", r)
	}
	var buf bytes.Buffer
	if _, err := tc.leader().WriteSnapshot(ctx, &buf); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	snap := buf.Bytes()
	before := sameDigestEverywhere(t, tc)

	for _, tc2 := range []struct {
		name   string
		change func(hdr map[string]any)
	}{
		{"applied index 2^64-1", func(hdr map[string]any) { hdr["index"] = json.Number("18446744073709551615") }},
		{"clock near 2^63", func(hdr map[string]any) { hdr["now"] = json.Number("9223372036854775000") }},
		{"3-byte signing seed", func(hdr map[string]any) {
			hdr["keys"].([]any)[0].(map[string]any)["seed"] = "AQID"
		}},
		{"clock a year ahead of the leader's", func(hdr map[string]any) {
			hdr["now"] = json.Number(strconv.FormatInt(time.Now().Add(365*24*time.Hour).UnixNano(), 10))
		}},
	} {
		t.Run(tc2.name, func(t *testing.T) {
			bad := reheader(t, snap, tc2.change)
			if _, err := fsm.Restore(bytes.NewReader(reheader(t, snap, func(map[string]any) {}))); err != nil {
				t.Fatalf("the unchanged snapshot, resealed: %v", err)
			}
			_, err := restoreOnLeader(t, tc, bad)
			if !errors.Is(err, fsm.ErrInvalidSnapshot) || !errors.Is(err, fsm.ErrBadSnapshot) {
				t.Fatalf("restore: %v, want ErrInvalidSnapshot", err)
			}
			if d := sameDigestEverywhere(t, tc); d != before {
				t.Fatalf("digest %s after a refused restore, want %s", d, before)
			}
		})
	}

	// Still serving: a grant fenced above every earlier token, and a
	// linearizable read of it.
	r := tc.propose(ctx, claim("after-refusals", "o9"))
	if r.Status != fsm.StatusGranted || r.Intent.FencingToken <= maxToken {
		t.Fatalf("claim after the refused restores: %+v", r)
	}
	var in *fsm.Intent
	if err := tc.leader().Read(ctx, ledger.Linearizable, func(l *fsm.Machine) { in = l.Get("default", "after-refusals") }); err != nil ||
		in == nil || in.State != fsm.StateDeclared || in.FencingToken != r.Intent.FencingToken {
		t.Fatalf("linearizable read after the refused restores: %+v, %v", in, err)
	}

	// A large but plausible index: Raft installs the snapshot past it and
	// goes on; new tokens are above it.
	const far = uint64(1) << 40
	info, err := restoreOnLeader(t, tc, reheader(t, snap, func(hdr map[string]any) {
		hdr["index"] = json.Number(strconv.FormatUint(far, 10))
	}))
	if err != nil || info.Index != far {
		t.Fatalf("restore at index %d: %+v, %v", far, info, err)
	}
	if d := sameDigestEverywhere(t, tc); d != info.Digest {
		t.Fatalf("digest %s after the restore, want %s", d, info.Digest)
	}
	r = tc.propose(ctx, claim("after-restore", "o9"))
	if r.Status != fsm.StatusGranted || r.Intent.FencingToken <= far {
		t.Fatalf("claim after a restore at index %d: %+v", far, r)
	}
	if err := tc.leader().Read(ctx, ledger.Linearizable, func(l *fsm.Machine) { in = l.Get("default", "after-restore") }); err != nil ||
		in == nil || in.FencingToken != r.Intent.FencingToken {
		t.Fatalf("linearizable read after the restore: %+v, %v", in, err)
	}
	sameDigestEverywhere(t, tc)
}

func TestPeersJSONRecoversALostQuorum(t *testing.T) {
	tc := newTestCluster(t, nil)
	tc.startN(3)
	fill(t, tc, "quorum", 10)
	survivor := tc.leader()
	digest, _ := survivor.Digest()
	id, raftAddr, gossipAddr := survivor.ID(), survivor.RaftAddr(), survivor.GossipAddr()
	for _, n := range tc.nodes {
		_ = n.Kill() // two are lost for good; the survivor stops too
	}
	peers := fmt.Sprintf(`[{"id":%q,"address":%q,"non_voter":false}]`, id, raftAddr)
	path := filepath.Join(tc.dir, id, PeersFile)
	if err := os.WriteFile(path, []byte(peers), 0o600); err != nil {
		t.Fatal(err)
	}
	delete(tc.nodes, id)
	for k := range tc.nodes {
		delete(tc.nodes, k)
	}
	n := tc.startAt(id, raftAddr, gossipAddr, 0)
	leader := tc.leader()
	if leader != n {
		t.Fatalf("leader %s, want the recovered %s", leader.ID(), id)
	}
	if d, _ := n.Digest(); d != digest {
		t.Fatalf("recovered digest %s, want %s", d, digest)
	}
	if v := voters(n); len(v) != 1 || !v[id] {
		t.Fatalf("voters after recovery: %v", v)
	}
	if _, err := os.Stat(path + ".applied"); err != nil {
		t.Fatalf("the recovery file was not set aside: %v", err)
	}
	if r := tc.propose(ctxT(t), claim("after-recovery", "o2")); r.Status != fsm.StatusGranted {
		t.Fatalf("write after recovery: %+v", r)
	}
}
