package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testGossipKey is a gossip key for configurations that require one.
const testGossipKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func TestParseConfigFlagsEnvAndDefaults(t *testing.T) {
	env := map[string]string{"INTENTD_GOSSIP_KEY": testGossipKey}
	getenv := func(k string) string { return env[k] }

	c, err := parseConfig([]string{"--data-dir", "/tmp/x"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/tmp/x" || c.BootstrapExpect != 1 || len(c.Join) != 0 || c.HTTPAddr != "127.0.0.1:8100" {
		t.Fatalf("single-node defaults: %+v", c)
	}

	env["INTENTD_JOIN"] = "127.0.0.1:1, 127.0.0.1:2"
	env["INTENTD_HTTP_ADDR"] = "127.0.0.1:9999"
	env["INTENTD_DEDUPE_WINDOW"] = "1h"
	env["INTENTD_ID"] = "from-env"
	c, err = parseConfig([]string{"--id", "from-flag"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Join, []string{"127.0.0.1:1", "127.0.0.1:2"}) || c.BootstrapExpect != 0 {
		t.Fatalf("join from env: %+v", c)
	}
	if c.HTTPAddr != "127.0.0.1:9999" || c.Limits.DedupeWindow != time.Hour || c.ID != "from-flag" {
		t.Fatalf("env and flag precedence: %+v", c)
	}

	env["INTENTD_BOOTSTRAP_EXPECT"] = "not-a-number"
	if _, err := parseConfig(nil, getenv, io.Discard); err == nil {
		t.Fatal("bad env value accepted")
	}
	delete(env, "INTENTD_BOOTSTRAP_EXPECT")
	if c, err := parseConfig([]string{"--max-payload-bytes", "16777216", "--max-result-bytes", "16777216"}, getenv, io.Discard); err != nil ||
		c.Limits.MaxPayloadBytes != 16<<20 || c.Limits.MaxResultBytes != 16<<20 {
		t.Fatalf("limits at the ledger's cap: %+v %v", c.Limits, err)
	}
	if c, err := parseConfig([]string{"--test-hooks", "--test-bug", "stale-reads"}, getenv, io.Discard); err != nil || c.TestBug != "stale-reads" {
		t.Fatalf("seeded bug with hooks: %+v %v", c, err)
	}
	for _, args := range [][]string{{"--nope"}, {"--id", ""}, {"extra"}, {"--data-dir", ""},
		{"--test-bug", "stale-reads"}, {"--test-hooks", "--test-bug", "no-such-bug"},
		{"--max-payload-bytes", "16777217"}, {"--max-result-bytes", "16777217"}} {
		if _, err := parseConfig(args, getenv, io.Discard); err == nil {
			t.Fatalf("parseConfig(%q) accepted", args)
		}
	}
}

// --shutdown-timeout is a real bound: a step that never returns does not
// keep the process, and the goroutine dump names it.
func TestShutdownWithinIsABoundAndKeepsTheEvidence(t *testing.T) {
	var dump bytes.Buffer
	stuck := make(chan struct{})
	defer close(stuck)
	err := shutdownWithin(50*time.Millisecond, &dump, func(ctx context.Context) error {
		<-stuck // a step that ignores its context
		return nil
	})
	if !errors.Is(err, errShutdownTimedOut) {
		t.Fatalf("a stuck shutdown returned %v, want errShutdownTimedOut", err)
	}
	if !strings.Contains(dump.String(), "TestShutdownWithinIsABoundAndKeepsTheEvidence") {
		t.Fatalf("the dump does not show the stuck goroutine:\n%s", dump.String())
	}

	dump.Reset()
	boom := errors.New("boom")
	if err := shutdownWithin(time.Minute, &dump, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a finished shutdown returned %v, want its own error", err)
	}
	if dump.Len() != 0 {
		t.Fatalf("a finished shutdown dumped goroutines:\n%s", dump.String())
	}
}
