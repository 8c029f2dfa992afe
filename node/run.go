package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"time"

	"github.com/intentledger/intentd/cluster"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/internal/tracing"
)

// WithDefaults returns a copy of c with the defaults of the fields it
// leaves zero filled in: ShutdownTimeout (DefaultConfig's). Start applies
// it before Validate.
func (c Config) WithDefaults() Config {
	if c.ShutdownTimeout <= 0 {
		c.ShutdownTimeout = DefaultConfig().ShutdownTimeout
	}
	return c
}

// Validate checks that the configuration fits together; it reports the
// first problem and changes nothing. Start calls it (after WithDefaults),
// so a node started by a test obeys the same rules as one started by
// cmd/intentd. The messages name the flags that set each field.
func (c Config) Validate() error {
	if c.ID == "" {
		return errors.New("--id must not be empty")
	}
	if c.DataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	if err := tracing.Check(c.OTLPEndpoint); err != nil {
		return err
	}
	if c.LogStore != cluster.LogStoreWAL && c.LogStore != cluster.LogStoreBoltDB {
		return fmt.Errorf("--log-store must be %s or %s, not %q", cluster.LogStoreWAL, cluster.LogStoreBoltDB, c.LogStore)
	}
	if c.WALSegmentSize != 0 && (c.WALSegmentSize < cluster.MinWALSegmentSize || c.WALSegmentSize > cluster.MaxWALSegmentSize) {
		return fmt.Errorf("--wal-segment-size must be 0 (the default, 64 MiB) or %d to %d bytes, not %d",
			cluster.MinWALSegmentSize, cluster.MaxWALSegmentSize, c.WALSegmentSize)
	}
	if c.StateEngine != "" && c.StateEngine != cluster.StateEnginePebble && c.StateEngine != cluster.StateEngineMemory {
		return fmt.Errorf("--state-engine must be %s or %s, not %q", cluster.StateEnginePebble, cluster.StateEngineMemory, c.StateEngine)
	}
	if c.WALSegmentSize != 0 && c.LogStore != cluster.LogStoreWAL {
		return fmt.Errorf("--wal-segment-size is for --log-store %s", cluster.LogStoreWAL)
	}
	if c.Network != "" && c.Network != cluster.NetworkLAN && c.Network != cluster.NetworkWAN {
		return fmt.Errorf("--network must be %s or %s, not %q", cluster.NetworkLAN, cluster.NetworkWAN, c.Network)
	}
	if c.Replica && len(c.Join) == 0 {
		return errors.New("--voter=false (a replica) needs --join: a replica never starts a cluster, the voters' leader adds it")
	}
	if c.Replica && c.BootstrapExpect > 0 {
		return errors.New("--bootstrap-expect is for voters: a replica is added by the leader once the voters have bootstrapped")
	}
	if c.TestBug != "" {
		if !c.TestHooks {
			return errors.New("--test-bug needs --test-hooks")
		}
		if _, err := faults.Parse(c.TestBug); err != nil {
			return fmt.Errorf("--test-bug: %w", err)
		}
	}
	if err := c.Limits.Validate(); err != nil {
		return fmt.Errorf("--max-payload-bytes / --max-result-bytes: %w", err)
	}
	if hw := c.Capacity.MemoryHighWater; hw < 0 || hw > 1 || hw != hw {
		return fmt.Errorf("--memory-high-water %v must be a fraction in (0, 1]", hw)
	}
	if c.Auth != AuthRequired && c.Auth != AuthOff {
		return fmt.Errorf("--auth must be %s or %s, not %q", AuthRequired, AuthOff, c.Auth)
	}
	if err := c.Security.Validate(c.Auth != AuthOff); err != nil {
		return err
	}
	return nil
}

// Run starts a node, serves until ctx ends, then shuts it down gracefully
// within cfg.ShutdownTimeout. If the shutdown has not finished by then, Run
// writes every goroutine's stack to dump and returns ErrShutdownTimedOut
// without waiting further: the timeout is a real bound on the process.
func Run(ctx context.Context, cfg Config, dump io.Writer) error {
	n := New(cfg)
	if err := n.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	<-ctx.Done()
	n.log.Info("shutting down: stop accepting, hand over leadership, leave gossip, close raft",
		"timeout", n.cfg.ShutdownTimeout)
	if err := ShutdownWithin(n.cfg.ShutdownTimeout, dump, n.Shutdown); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}

// ErrShutdownTimedOut is ShutdownWithin's error when a step did not return.
var ErrShutdownTimedOut = errors.New("shutdown did not finish within --shutdown-timeout; exiting anyway (the data directory is as a crash leaves it, which Raft recovers from)")

// ShutdownWithin runs shutdown with a context that ends after timeout and
// returns its error, or, if it has not returned by then, writes every
// goroutine's stack to w (the evidence of the step that hung) and returns
// ErrShutdownTimedOut without waiting further.
func ShutdownWithin(timeout time.Duration, w io.Writer, shutdown func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- shutdown(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done: // the steps noticed the deadline themselves
		return err
	default:
	}
	fmt.Fprintf(w, "intentd: shutdown still running after %v; goroutines:\n", timeout)
	_ = pprof.Lookup("goroutine").WriteTo(w, 2)
	return ErrShutdownTimedOut
}
