package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestBadKeysFileFailsBeforeRaft: a keys file that does not validate
// stops intentd with the keys error as the first thing it says about the
// failure, before Raft starts: no bootstrap, no "raft is already
// shutdown" noise ahead of the cause, no data directory made.
func TestBadKeysFileFailsBeforeRaft(t *testing.T) {
	cases := []struct {
		name, file, want string
	}{
		{"bad hash", `{"keys":[{"name":"ops","namespace":"default","roles":["admin"],"sha256":"zz"}]}`, "sha256 must be 64 hex digits"},
		{"unknown role", `{"keys":[{"name":"ops","namespace":"default","roles":["root"],"sha256":"` + strings.Repeat("ab", 32) + `"}]}`, "unknown role"},
		{"not JSON", `keys: [ops]`, "invalid API key configuration"},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			keys := filepath.Join(dir, "keys.json")
			if err := os.WriteFile(keys, []byte(tt.file), 0o600); err != nil {
				t.Fatal(err)
			}
			data := filepath.Join(dir, "data")
			args := []string{"--id", "k1", "--data-dir", data, "--http-addr", nodetest.FreePort(t), "--raft-addr", nodetest.FreePort(t),
				"--gossip-addr", nodetest.FreePort(t), "--gossip-key", testGossipKey, "--api-keys-file", keys}
			var stderr bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if code := run(ctx, args, func(string) string { return "" }, &stderr); code != 1 {
				t.Fatalf("exit %d, want 1\n%s", code, stderr.String())
			}
			out := stderr.String()
			first := ""
			for _, line := range strings.Split(out, "\n") {
				if strings.Contains(line, "level=ERROR") {
					first = line
					break
				}
			}
			if !strings.Contains(first, tt.want) || !strings.Contains(first, keys) {
				t.Fatalf("the first error is not the keys file's (%q, naming %s):\n%s", tt.want, keys, out)
			}
			for _, noise := range []string{"raft", "bootstrapping", "node started", "node killed", "already shutdown"} {
				if strings.Contains(out, noise) {
					t.Errorf("stderr mentions %q: Raft started before the keys were checked:\n%s", noise, out)
				}
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("the data directory was made (%v): Raft started before the keys were checked", err)
			}
		})
	}
}

// TestProcessSIGHUPReloadsAPIKeys rotates an API key in a running intentd
// process with SIGHUP alone (file polling off): the key added works, the
// key removed is refused, a bad file keeps the keys in force, and the
// process runs on throughout.
func TestProcessSIGHUPReloadsAPIKeys(t *testing.T) {
	bin := intentdBinary(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "keys.json")
	key := func(name string) (string, string) {
		p, sum, err := auth.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return p, fmt.Sprintf(`{"name":%q,"namespace":"default","roles":["admin"],"sha256":%q}`, name, sum)
	}
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	oldKey, oldEntry := key("ops-old")
	newKey, newEntry := key("ops-new")
	write(`{"keys":[` + oldEntry + `]}`)
	p := nodetest.StartProc(t, bin, dir, "hup", "--raft-heartbeat-timeout", "500ms", "--raft-election-timeout", "500ms",
		"--gossip-key", testGossipKey, "--api-keys-file", path, "--api-keys-poll", "0")
	code := func(k string) int {
		a, err := nodetest.SendAs(k, http.MethodGet, p.HTTP, "/v1/whoami", nil)
		if err != nil {
			return -1
		}
		return a.Code
	}
	nodetest.WaitFor(t, 30*time.Second, "the node to serve the old key", func() bool { return code(oldKey) == http.StatusOK })
	if c := code(newKey); c != http.StatusUnauthorized {
		t.Fatalf("new key before the reload: %d", c)
	}
	hup := func() {
		t.Helper()
		if err := p.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}

	write(`{"keys":[` + oldEntry + "," + newEntry + `]}`)
	hup()
	nodetest.WaitFor(t, 10*time.Second, "the new key to authenticate", func() bool { return code(newKey) == http.StatusOK })

	write(`{"keys":[{"name":"broken"}]}`)
	hup()
	nodetest.WaitFor(t, 10*time.Second, "the failed reload to be logged", func() bool {
		return strings.Contains(p.Log(), "API KEYS NOT RELOADED")
	})
	if code(oldKey) != http.StatusOK || code(newKey) != http.StatusOK {
		t.Fatalf("after a bad file: old %d, new %d", code(oldKey), code(newKey))
	}

	write(`{"keys":[` + newEntry + `]}`)
	hup()
	nodetest.WaitFor(t, 10*time.Second, "the old key to be refused", func() bool { return code(oldKey) == http.StatusUnauthorized })
	if c := code(newKey); c != http.StatusOK {
		t.Fatalf("new key after removing the old: %d", c)
	}
	log := p.Log()
	for _, want := range []string{"added=ops-new", "removed=ops-old", "digest="} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if exited, _ := p.Wait(0); exited {
		t.Fatalf("the process exited:\n%s", log)
	}
}

// TestParseConfigAPIKeysPoll: the keys file is polled every 5 s unless
// --api-keys-poll (or INTENTD_API_KEYS_POLL) says otherwise; 0 leaves
// only SIGHUP.
func TestParseConfigAPIKeysPoll(t *testing.T) {
	cases := []struct {
		args []string
		env  string
		want time.Duration
	}{
		{nil, "", 5 * time.Second},
		{[]string{"--api-keys-poll", "0"}, "", 0},
		{[]string{"--api-keys-poll", "250ms"}, "", 250 * time.Millisecond},
		{nil, "1m", time.Minute},
	}
	for _, tt := range cases {
		getenv := func(k string) string {
			switch k {
			case "INTENTD_GOSSIP_KEY":
				return testGossipKey
			case "INTENTD_API_KEYS_POLL":
				return tt.env
			}
			return ""
		}
		c, err := parseConfig(tt.args, getenv, io.Discard)
		if err != nil || c.APIKeysPoll != tt.want {
			t.Errorf("parseConfig(%q, env %q): poll %v, %v; want %v", tt.args, tt.env, c.APIKeysPoll, err, tt.want)
		}
	}
}
