package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// PeersFile is the name, inside the data directory, of the manual recovery
// file: a JSON list of the servers that survive a lost quorum, in raft's
// peers.json format ([{"id":"n1","address":"10.0.0.1:8200","non_voter":false}]).
// A node that finds it at start rewrites its Raft configuration to exactly
// those servers (raft.RecoverCluster), renames the file to
// PeersFile+".applied" and starts normally. See docs/operations.md, "Disaster recovery".
const PeersFile = "peers.json"

// recoverPeers applies PeersFile if it exists. It must run before
// raft.NewRaft, on stores no Raft instance uses.
func (n *Node) recoverPeers(rc *raft.Config, store interface {
	raft.LogStore
	raft.StableStore
}, snaps raft.SnapshotStore, trans raft.Transport) error {
	path := filepath.Join(n.cfg.DataDir, PeersFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("cluster: %s: %w", path, err)
	}
	conf, err := raft.ReadConfigJSON(path)
	if err != nil {
		return fmt.Errorf("cluster: recovery file %s: %w", path, err)
	}
	n.log.Warn("recovering the Raft configuration from "+PeersFile+": this overrides the cluster's membership",
		"servers", len(conf.Servers), "file", path)
	// RecoverCluster replays the log into a state machine to build a new
	// snapshot; a throwaway one keeps ours for raft.NewRaft.
	if err := raft.RecoverCluster(rc, newStateMachine(), store, store, snaps, trans, conf); err != nil {
		return fmt.Errorf("cluster: recover from %s: %w", path, err)
	}
	if err := os.Rename(path, path+".applied"); err != nil {
		return fmt.Errorf("cluster: recovered, but could not rename %s (remove it before the next start): %w", path, err)
	}
	// The rename must survive a power loss, or the next start applies the
	// membership override again.
	if err := syncDirs(n.cfg.dirSync, n.cfg.DataDir); err != nil {
		return fmt.Errorf("cluster: recovered, but the rename of %s is not durable (remove it before the next start): %w", path, err)
	}
	n.log.Warn("raft configuration recovered", "servers", len(conf.Servers))
	return nil
}
