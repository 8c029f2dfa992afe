package nemesis

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
)

// The power-loss mode decides torn or clean and draws as many numbers in
// every mode, so a run's other choices do not depend on it.
func TestPowerLossModeTorn(t *testing.T) {
	cases := []struct {
		mode        PowerLossMode
		clean, torn bool // some losses of each kind
	}{
		{mode: "", clean: true, torn: true},
		{mode: PowerLossMixed, clean: true, torn: true},
		{mode: PowerLossClean, clean: true},
		{mode: PowerLossTorn, torn: true},
	}
	for _, tc := range cases {
		r := rand.New(rand.NewSource(5))
		var clean, torn int
		for range 200 {
			if tc.mode.torn(r) {
				torn++
			} else {
				clean++
			}
		}
		if (clean > 0) != tc.clean || (torn > 0) != tc.torn {
			t.Errorf("mode %q: %d clean, %d torn of 200; want clean %v, torn %v", tc.mode, clean, torn, tc.clean, tc.torn)
		}
		ref := rand.New(rand.NewSource(5))
		for range 200 {
			ref.Intn(2)
		}
		if got, want := r.Int63(), ref.Int63(); got != want {
			t.Errorf("mode %q drew another amount of numbers: next %d, want %d", tc.mode, got, want)
		}
	}
}

func TestParsePowerLossMode(t *testing.T) {
	cases := []struct {
		in   string
		want PowerLossMode
		bad  bool
	}{
		{in: "", want: PowerLossMixed},
		{in: "mixed", want: PowerLossMixed},
		{in: "clean", want: PowerLossClean},
		{in: "torn", want: PowerLossTorn},
		{in: "Clean", bad: true},
		{in: "partial", bad: true},
	}
	for _, tc := range cases {
		got, err := ParsePowerLossMode(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParsePowerLossMode(%q) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// workloadSnapshot is the snapshot of a ledger of the given number of
// intents after the commands the fault suite's workload sends
// (jepsen/workload): claims with its payloads, most completed with its
// result, some divergent claims, some claims still in flight.
func workloadSnapshot(t *testing.T, intents int) []byte {
	t.Helper()
	const tool = "jepsen.effect"
	l := fsm.New()
	at := time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC).UnixNano()
	index := uint64(0)
	apply := func(cmd fsm.Command) *fsm.Result {
		index++
		at += int64(3 * time.Millisecond)
		r := l.ApplyCommand(index, cmd)
		if r.Status == fsm.StatusMalformed {
			t.Fatalf("command %d: %s", index, r.Detail)
		}
		return r
	}
	claim := func(key, owner, variant string) *fsm.Result {
		payload, fp, err := fsm.Fingerprint(tool, []byte(fmt.Sprintf(`{"key":%q,"variant":%q}`, key, variant)))
		if err != nil {
			t.Fatal(err)
		}
		return apply(&fsm.Claim{Header: fsm.Header{At: at}, Namespace: "default", Key: key, Tool: tool, Owner: owner,
			Payload: payload, Fingerprint: fp, LeaseMS: 2000, DedupeWindowMS: 24 * 3600 * 1000})
	}
	for i := range intents {
		key, owner := fmt.Sprintf("s3:g%d:%d", i%5, i), fmt.Sprintf("c%d/%d", i%15, i)
		r := claim(key, owner, "a")
		if r.Status != fsm.StatusGranted {
			t.Fatalf("claim %s: %s", key, r.Status)
		}
		if i%7 == 3 {
			claim(key, owner+"x", "b") // divergent
		}
		if i%10 == 9 {
			continue // in flight
		}
		apply(&fsm.Complete{Header: fsm.Header{At: at}, Namespace: "default", Key: key, Owner: owner,
			FencingToken: r.Intent.FencingToken, Outcome: fsm.OutcomeExecuted, Result: []byte(fmt.Sprintf(`{"effect":%q}`, key))})
	}
	var b bytes.Buffer
	if err := l.WriteSnapshot(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// withoutChecksum is what a node with the seeded bug snapshot-no-checksum
// restores (cluster's openUnchecked): the trailer rewritten to match.
func withoutChecksum(snap []byte) []byte {
	body := bytes.TrimSuffix(snap, []byte("\n"))
	i := bytes.LastIndexByte(body, '\n')
	sum := sha256.Sum256(snap[:i+1])
	return append(bytes.Clone(snap[:i+1]), fmt.Sprintf("{\"sha256\":%q}\n", hex.EncodeToString(sum[:]))...)
}

// corrupt-snapshot's target: flipped as the nemesis flips it, every
// payload digit is caught by the snapshot's checksum and by nothing else,
// so a product node refuses the snapshot and a node that skips the
// checksum restores a ledger with another digest. The positive control:
// a digit of an audit event line (which the nemesis used to hit, among
// others) is refused by fsm's value checks even without the checksum, so
// this test tells a byte only the checksum protects from one it does not.
func TestCorruptSnapshotTargetsWhatOnlyTheChecksumProtects(t *testing.T) {
	snap := workloadSnapshot(t, 40)
	orig, err := fsm.Restore(bytes.NewReader(snap))
	if err != nil {
		t.Fatal(err)
	}
	payloads, err := payloadDigits(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(payloads) < 20 {
		t.Fatalf("only %d payload digits in a snapshot of 40 intents", len(payloads))
	}
	// The last audit event line: before the trailer line (and the empty
	// rest after its newline).
	lines := bytes.SplitAfter(snap, []byte("\n"))
	last := lines[len(lines)-3]
	start := int64(len(snap) - len(lines[len(lines)-2]) - len(last))
	var eventDigits []int64
	for j, c := range last {
		if c >= '0' && c <= '8' && (c-'0')%2 == 0 {
			eventDigits = append(eventDigits, start+int64(j))
		}
	}
	if !strings.Contains(string(last), `"hash"`) || len(eventDigits) == 0 {
		t.Fatalf("the line before the trailer is not an audit event: %q", last)
	}
	cases := []struct {
		name    string
		offsets []int64
		// unchecked: a node without the checksum restores it (else the
		// value checks refuse it).
		unchecked bool
	}{
		{name: "payload digits", offsets: payloads, unchecked: true},
		{name: "audit event digits (control)", offsets: eventDigits},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, off := range tc.offsets {
				bad := bytes.Clone(snap)
				bad[off] ^= 1
				_, err := fsm.Restore(bytes.NewReader(bad))
				if !errors.Is(err, fsm.ErrBadSnapshot) {
					t.Fatalf("byte %d (%q) flipped: restored (%v)", off, snap[off], err)
				}
				if tc.unchecked && (errors.Is(err, fsm.ErrInvalidSnapshot) || !strings.Contains(err.Error(), "checksum")) {
					t.Fatalf("byte %d (%q) flipped: refused by a value check, not the checksum: %v", off, snap[off], err)
				}
				got, err := fsm.Restore(bytes.NewReader(withoutChecksum(bad)))
				switch {
				case tc.unchecked && err != nil:
					t.Fatalf("byte %d (%q) flipped: refused without the checksum: %v", off, snap[off], err)
				case tc.unchecked && got.Digest() == orig.Digest():
					t.Fatalf("byte %d (%q) flipped: restored with the same digest", off, snap[off])
				case !tc.unchecked && err == nil:
					t.Fatalf("byte %d (%q) flipped: restored without the checksum", off, snap[off])
				}
			}
		})
	}
}

// payloadDigits refuses what is not a snapshot rather than guess.
func TestPayloadDigitsRefusesATruncatedSnapshot(t *testing.T) {
	snap := workloadSnapshot(t, 40)
	nl := bytes.IndexByte(snap, '\n')
	for _, n := range []int{0, nl, nl + 3, nl + 40} {
		if _, err := payloadDigits(snap[:n]); err == nil {
			t.Errorf("a snapshot cut to %d bytes: no error", n)
		}
	}
}

// corrupt-snapshot hits the snapshot raft restores first: the highest
// term and index, not the last name in order, never a temporary one.
func TestNewestSnapshot(t *testing.T) {
	cases := []struct {
		states []string
		want   string
	}{
		{states: nil, want: ""},
		{states: []string{"snapshots/2-1528-1796676804678/state.bin", "snapshots/2-982-1796676800530/state.bin"},
			want: "snapshots/2-1528-1796676804678/state.bin"},
		{states: []string{"snapshots/2-4007-1796676821404/state.bin", "snapshots/2-982-1796676800530.tmp/state.bin"},
			want: "snapshots/2-4007-1796676821404/state.bin"},
		{states: []string{"snapshots/3-900-1796676900000/state.bin", "snapshots/2-4007-1796676821404/state.bin"},
			want: "snapshots/3-900-1796676900000/state.bin"},
		{states: []string{"snapshots/2-982-1796676800530.tmp/state.bin"}, want: ""},
	}
	for _, tc := range cases {
		if got := newestSnapshot(tc.states); got != tc.want {
			t.Errorf("newestSnapshot(%q) = %q, want %q", tc.states, got, tc.want)
		}
	}
}
