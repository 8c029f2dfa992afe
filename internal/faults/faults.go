// Package faults holds the deliberate defects (seeded bugs) that the fault
// suite's positive controls must catch: a control runs the suite against
// a node with one bug and passes only if a checker finds it, which shows
// the checkers can see that class of failure at all.
//
// The bugs are compiled in only with the build tag faults, which the fault
// suite's builds use (make jepsen, scripts/jepsen-*.sh, cmd/jepsen). In the
// product build a Set is empty, Has is a constant false the compiler drops
// together with the branch it guards, and Parse refuses every bug, so an
// intentd built for production refuses --test-bug. This is the role etcd's
// gofail failpoints play, without a code generator.
package faults

import (
	"errors"
	"fmt"
	"strings"
)

// Bug names a seeded bug.
type Bug string

// The seeded bugs.
const (
	// StaleReads serves linearizable reads from the local replica on any
	// node, leader or not, without confirming leadership.
	StaleReads Bug = "stale-reads"
	// LeadershipLostIsFailure reports a write whose leader lost leadership
	// after appending it (outcome unknown) as a definite failure: on the
	// leader (raft's ErrLeadershipLost), and on a follower whose
	// connection to the leader failed, or was closed for a new leader,
	// with the forwarded command sent.
	LeadershipLostIsFailure Bug = "leadership-lost-is-failure"
	// CheckThenClaim decides a claim from a local read made before
	// proposing it, so two racing claims may both be told "granted".
	CheckThenClaim Bug = "check-then-claim"
	// TrustGossipIDs admits every gossip member and records it under the
	// node ID it announces, as the cluster did before IDs were bound to
	// gossip names.
	TrustGossipIDs Bug = "trust-gossip-ids"
	// TrustGossipLeave lets gossip change the Raft configuration and the
	// HTTP addresses, as the cluster did before membership changes needed
	// the node's own request: the leader removes a member gossip says
	// left, demotes one whose meta says replica, moves one to the Raft
	// address its meta announces, and nodes forward to and advertise the
	// HTTP addresses gossip carries.
	TrustGossipLeave Bug = "trust-gossip-leave"
	// LocalDuplicateAnyPayload answers a claim locally (--local-duplicates)
	// as a duplicate of the executed key whatever its payload, so a
	// divergent retry is told "duplicate" instead of being refused.
	LocalDuplicateAnyPayload Bug = "local-duplicate-any-payload"
	// LogNoFsync never fsyncs the Raft log store's files (raft-boltdb's
	// NoSync; raft-wal's segment files), so an entry is acknowledged
	// before it is durable: a whole-cluster power loss loses it.
	LogNoFsync Bug = "log-no-fsync"
	// SnapshotNoChecksum restores snapshots without their checksums:
	// raft's CRC-64 of state.bin is not checked and the ledger encoding's
	// SHA-256 trailer is rewritten to match the bytes read, so a
	// corrupted snapshot is restored if its values still parse.
	SnapshotNoChecksum Bug = "snapshot-no-checksum"
	// LogNoChecksum reads log entries back without verifying their
	// checksums (cluster's checkedLog, and its scan before raft starts),
	// so a byte flipped in a stored command is replayed into the state
	// machine as if it had been written so.
	LogNoChecksum Bug = "log-no-checksum"
)

// All lists every seeded bug.
func All() []Bug {
	return []Bug{StaleReads, LeadershipLostIsFailure, CheckThenClaim, TrustGossipIDs, TrustGossipLeave, LocalDuplicateAnyPayload, LogNoFsync, SnapshotNoChecksum, LogNoChecksum}
}

// Names returns the bugs' names, comma separated, for help texts.
func Names() string {
	names := make([]string, 0, len(All()))
	for _, b := range All() {
		names = append(names, string(b))
	}
	return strings.Join(names, ", ")
}

// ErrNotBuilt is Parse's error for a bug in the product build.
var ErrNotBuilt = errors.New("this binary is built without the fault suite's seeded bugs; build it with go build -tags faults")

// ErrUnknown is Parse's error for a name that is no seeded bug.
var ErrUnknown = errors.New("no such seeded bug")

func lookup(name string) (Bug, error) {
	for _, b := range All() {
		if string(b) == name {
			return b, nil
		}
	}
	return "", fmt.Errorf("%w: %q (want one of %s)", ErrUnknown, name, Names())
}
