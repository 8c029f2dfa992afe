package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
)

// fullDisk is a stable store whose writes fail with err until fails
// reaches zero.
type fullDisk struct {
	raft.StableStore
	fails int
	err   error
	tries int
}

func (f *fullDisk) write() error {
	f.tries++
	if f.fails > 0 {
		f.fails--
		return f.err
	}
	return nil
}

func (f *fullDisk) Set(key, val []byte) error              { return f.write() }
func (f *fullDisk) SetUint64(key []byte, val uint64) error { return f.write() }

// TestStableStoreWaitsOutAFullDisk: raft panics when it cannot save its
// term or vote, so a full disk killed a node. The stable store now retries
// a write refused for want of space until it succeeds, returns any other
// error at once, and gives up when the node stops.
func TestStableStoreWaitsOutAFullDisk(t *testing.T) {
	wrapped := fmt.Errorf("write wal-meta.db: %w", syscall.ENOSPC)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	stopped, stop := context.WithCancel(context.Background())
	stop()
	for _, tc := range []struct {
		name      string
		fails     int
		err       error
		ctx       context.Context
		wantErr   error
		wantTries int
	}{
		{"space returns", 5, wrapped, context.Background(), nil, 6},
		{"quota returns", 2, syscall.EDQUOT, context.Background(), nil, 3},
		{"another error is not retried", 5, syscall.EIO, context.Background(), syscall.EIO, 1},
		{"the node stops while the disk is full", 1 << 30, wrapped, stopped, syscall.ENOSPC, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, op := range []string{"Set", "SetUint64"} {
				disk := &fullDisk{fails: tc.fails, err: tc.err}
				s := &patientStable{StableStore: disk, ctx: tc.ctx, log: quiet, first: 1, max: 1}
				var err error
				if op == "Set" {
					err = s.Set([]byte("CurrentTerm"), []byte("7"))
				} else {
					err = s.SetUint64([]byte("CurrentTerm"), 7)
				}
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
					t.Errorf("%s: err %v, want %v", op, err, tc.wantErr)
				}
				if disk.tries != tc.wantTries {
					t.Errorf("%s: %d tries, want %d", op, disk.tries, tc.wantTries)
				}
			}
		})
	}
}
