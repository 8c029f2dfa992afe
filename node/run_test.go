package node

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// --shutdown-timeout is a real bound: a step that never returns does not
// keep the process, and the goroutine dump names it.
func TestShutdownWithinIsABoundAndKeepsTheEvidence(t *testing.T) {
	var dump bytes.Buffer
	stuck := make(chan struct{})
	defer close(stuck)
	err := ShutdownWithin(50*time.Millisecond, &dump, func(ctx context.Context) error {
		<-stuck // a step that ignores its context
		return nil
	})
	if !errors.Is(err, ErrShutdownTimedOut) {
		t.Fatalf("a stuck shutdown returned %v, want ErrShutdownTimedOut", err)
	}
	if !strings.Contains(dump.String(), "TestShutdownWithinIsABoundAndKeepsTheEvidence") {
		t.Fatalf("the dump does not show the stuck goroutine:\n%s", dump.String())
	}

	dump.Reset()
	boom := errors.New("boom")
	if err := ShutdownWithin(time.Minute, &dump, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a finished shutdown returned %v, want its own error", err)
	}
	if dump.Len() != 0 {
		t.Fatalf("a finished shutdown dumped goroutines:\n%s", dump.String())
	}
}
