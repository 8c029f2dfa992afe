package main

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/internal/faults"
	"github.com/intentledger/intentd/node"
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
	if c, err := parseConfig([]string{"--log-store", "boltdb"}, getenv, io.Discard); err != nil || c.LogStore != "boltdb" {
		t.Fatalf("--log-store boltdb: %q %v", c.LogStore, err)
	}
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--wal-segment-size", "4194304"}, true},
		{[]string{"--wal-segment-size", "0"}, true},
		{[]string{"--wal-segment-size", "4096"}, false},
		{[]string{"--wal-segment-size", "65536"}, true},
		{[]string{"--wal-segment-size", "4194304", "--log-store", "boltdb"}, false},
	} {
		c, err := parseConfig(tc.args, getenv, io.Discard)
		if (err == nil) != tc.ok {
			t.Fatalf("%v: %v, want ok=%v", tc.args, err, tc.ok)
		}
		if tc.ok && fmt.Sprint(c.WALSegmentSize) != tc.args[1] {
			t.Fatalf("%v: WALSegmentSize %d", tc.args, c.WALSegmentSize)
		}
	}
	// A seeded bug needs the fault suite's build (-tags faults); the
	// product build refuses every one.
	c, err = parseConfig([]string{"--test-hooks", "--test-bug", "stale-reads"}, getenv, io.Discard)
	if faults.Built && (err != nil || c.TestBug != "stale-reads") {
		t.Fatalf("seeded bug with hooks in the fault build: %+v %v", c, err)
	}
	if !faults.Built && !errors.Is(err, faults.ErrNotBuilt) {
		t.Fatalf("seeded bug in the product build: %v, want faults.ErrNotBuilt", err)
	}
	for _, args := range [][]string{{"--nope"}, {"--id", ""}, {"extra"}, {"--data-dir", ""},
		{"--test-bug", "stale-reads"}, {"--test-hooks", "--test-bug", "no-such-bug"},
		{"--max-payload-bytes", "16777217"}, {"--max-result-bytes", "16777217"}, {"--log-store", "sqlite"}} {
		if _, err := parseConfig(args, getenv, io.Discard); err == nil {
			t.Fatalf("parseConfig(%q) accepted", args)
		}
	}
}

// TestParseConfigAuth: --auth takes required (the default) or off.
func TestParseConfigAuth(t *testing.T) {
	if _, err := parseConfig([]string{"--auth", "maybe"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Fatal("--auth maybe accepted")
	}
	c, err := parseConfig(nil, func(k string) string {
		switch k {
		case auth.EnvVar:
			return "agents:payments:agent:" + auth.HashKey("ik_test-key-with-enough-entropy-0123456789")
		case "INTENTD_GOSSIP_KEY":
			return testGossipKey
		}
		return ""
	}, io.Discard)
	if err != nil || c.Auth != node.AuthRequired || c.APIKeys == "" {
		t.Fatalf("defaults: %+v %v", c, err)
	}

}

func TestParseConfigKEK(t *testing.T) {
	env := map[string]string{"INTENTD_GOSSIP_KEY": testGossipKey}
	getenv := func(k string) string { return env[k] }
	c, err := parseConfig([]string{"--kek-file", "/etc/intentd/kek"}, getenv, io.Discard)
	if err != nil || c.KEK != (node.KEKConfig{File: "/etc/intentd/kek"}) {
		t.Fatalf("--kek-file: %+v, %v", c.KEK, err)
	}
	env["INTENTD_KEK_FILE"] = "/from/env"
	env[node.KEKEnvVar] = "a2Vr"
	c, err = parseConfig(nil, getenv, io.Discard)
	if err != nil || c.KEK != (node.KEKConfig{File: "/from/env", Value: "a2Vr"}) {
		t.Fatalf("environment: %+v, %v", c.KEK, err)
	}
}

func TestSecurityFlagsValidate(t *testing.T) {
	getenv := func(string) string { return "" }
	key := []string{"--gossip-key", testGossipKey}
	cases := []struct {
		args []string
		ok   bool
	}{
		{key, true},
		// The gossip key is the membership credential: required with auth
		// (the default) or TLS; only --auth=off without TLS runs without.
		{[]string{}, false},
		{[]string{"--auth=off"}, true},
		{[]string{"--auth=off", "--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca"}, false},
		{append([]string{"--tls-cert", "c", "--tls-key", "k", "--tls-ca", "ca"}, key...), true},
		{append([]string{"--cluster-name", "prod-eu"}, key...), true},
		{append([]string{"--cluster-name", "Prod.EU"}, key...), false},
		{append([]string{"--cluster-name", ""}, key...), false},
		{[]string{"--tls-cert", "c", "--tls-key", "k"}, false},
		{[]string{"--tls-cert", "c", "--tls-ca", "ca"}, false},
		{[]string{"--tls-ca", "ca"}, false},
		{[]string{"--tls-client-ca", "ca"}, false},
		{[]string{"--gossip-key", "MDEyMzQ1Njc4OWFiY2RlZg=="}, true}, // 16 bytes
		{[]string{"--gossip-key", "c2hvcnQ="}, false},
		{[]string{"--gossip-key", "not base64!"}, false},
	}
	for _, tt := range cases {
		_, err := parseConfig(append([]string{"--data-dir", "/tmp/x"}, tt.args...), getenv, io.Discard)
		if (err == nil) != tt.ok {
			t.Errorf("parseConfig(%q) = %v, want ok=%v", tt.args, err, tt.ok)
		}
	}
}

func TestParseConfigPprof(t *testing.T) {
	c, err := parseConfig([]string{"--pprof", "127.0.0.1:0", "--auth=off"}, func(string) string { return "" }, io.Discard)
	if err != nil || c.PprofAddr != "127.0.0.1:0" {
		t.Fatalf("--pprof: %+v %v", c, err)
	}
}
