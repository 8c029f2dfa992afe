package nodes

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"

	"github.com/intentledger/intentd/jepsen/lazyfs"
)

// mountDisks mounts a lazy filesystem over <Dir>/disk/n<i> at each node's
// data directory (Config.Storage).
func (c *Cluster) mountDisks() error {
	mode, err := lazyfs.ParseMode(c.cfg.Storage)
	if err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	c.disks = make([]*lazyfs.FS, c.n+1)
	for i := 1; i <= c.n; i++ {
		backing := filepath.Join(c.cfg.Dir, "disk", Name(i))
		if err := os.MkdirAll(backing, 0o755); err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
		d, err := lazyfs.Mount(backing, c.DataDir(i), mode)
		if err != nil {
			return fmt.Errorf("nodes: %s's disk: %w", Name(i), err)
		}
		c.disks[i] = d
	}
	return nil
}

// unmountDisks unmounts every lazy filesystem; the nodes must be gone.
func (c *Cluster) unmountDisks() error {
	var errs []error
	for i, d := range c.disks {
		if d != nil {
			errs = append(errs, d.Unmount())
			c.disks[i] = nil
		}
	}
	return errors.Join(errs...)
}

// Disk is node i's lazy filesystem, nil when the cluster runs without
// Config.Storage.
func (c *Cluster) Disk(i int) *lazyfs.FS {
	if c.check(i) != nil || len(c.disks) == 0 {
		return nil
	}
	return c.disks[i]
}

// HasDisks reports whether the nodes' data directories are lazy
// filesystems (Config.Storage).
func (c *Cluster) HasDisks() bool { return len(c.disks) > 0 }

// PowerLoss cuts the power of ids at once: every one is sent SIGKILL
// before any is waited for, and only once all have exited does each disk
// lose what was not made durable (torn: the last unsynced write kept in
// part, cut where r says). The nodes stay down; RestartAll brings them
// back.
func (c *Cluster) PowerLoss(ids []int, torn bool, r *rand.Rand) ([]lazyfs.Loss, error) {
	if !c.HasDisks() {
		return nil, errors.New("nodes: power loss needs lazy filesystems (Config.Storage)")
	}
	var procs []*proc
	for _, i := range ids {
		if err := c.check(i); err != nil {
			return nil, err
		}
		if p, err := c.running(i); err == nil {
			c.noteLog(i, "power loss: SIGKILL")
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
				return nil, fmt.Errorf("nodes: power loss of %s: %w", Name(i), err)
			}
			procs = append(procs, p)
		}
	}
	for _, p := range procs {
		if err := c.kill(p); err != nil {
			return nil, fmt.Errorf("nodes: power loss: %w", err)
		}
	}
	losses := make([]lazyfs.Loss, 0, len(ids))
	for _, i := range ids {
		loss, err := c.disks[i].LoseUnsynced(lazyfs.LossOptions{Torn: torn, Rand: r})
		if err != nil {
			return losses, fmt.Errorf("nodes: power loss of %s: %w", Name(i), err)
		}
		c.noteLog(i, fmt.Sprintf("power loss: %d writes and %d directory changes dropped (torn %q kept %d bytes)",
			loss.DataRecords, loss.EntryRecords, loss.TornFile, loss.TornKept))
		losses = append(losses, loss)
	}
	return losses, nil
}

// RestartAll starts ids again (none may be running), all before waiting,
// and waits until every one is ready: a cluster that lost a majority
// needs them all up to elect a leader.
func (c *Cluster) RestartAll(ctx context.Context, ids []int) error {
	for _, i := range ids {
		var join []string
		for j := 1; j <= c.n; j++ {
			if j != i {
				join = append(join, c.gossipAddr(j))
			}
		}
		if err := c.spawn(i, join); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	if err := c.WaitReady(ctx, ids...); err != nil {
		return fmt.Errorf("nodes: restart: %w", err)
	}
	return nil
}
