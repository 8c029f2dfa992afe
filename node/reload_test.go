package node

import (
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/testkit/nodetest"
)

// writeKeysFile replaces path atomically (write, then rename) with a keys
// file of the JSON entries given.
func writeKeysFile(t *testing.T, path string, entries ...string) {
	t.Helper()
	body := `{"keys":[`
	for i, e := range entries {
		if i > 0 {
			body += ","
		}
		body += e
	}
	body += "]}"
	writeFileAtomically(t, path, body)
}

func writeFileAtomically(t *testing.T, path, body string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// keyEntry makes a key and its keys file entry (admin of default).
func keyEntry(t *testing.T, name string) (plaintext, entry string) {
	t.Helper()
	p, sum, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return p, fmt.Sprintf(`{"name":%q,"namespace":"default","roles":["admin"],"sha256":%q}`, name, sum)
}

// status is the HTTP status of GET /v1/whoami with key.
func status(addr, key string) int {
	a, err := nodetest.SendAs(key, http.MethodGet, addr, "/v1/whoami", nil)
	if err != nil {
		return -1
	}
	return a.Code
}

// metricsText is the node's /metrics page.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// reloads is intentd_api_keys_reload_total{result} on the node.
func reloads(t *testing.T, addr, result string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^intentd_api_keys_reload_total\{result="` + result + `"\} (\d+)$`).FindStringSubmatch(metricsText(t, addr))
	if m == nil {
		t.Fatalf("no intentd_api_keys_reload_total{result=%q} on /metrics", result)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// digestLabel is the digest label of intentd_api_keys on the node.
func digestLabel(t *testing.T, addr string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^intentd_api_keys\{digest="([0-9a-f]+)"\} \d+$`).FindStringSubmatch(metricsText(t, addr))
	if m == nil {
		t.Fatal("no intentd_api_keys{digest} on /metrics")
	}
	return m[1]
}

func fileDigest(t *testing.T, path string) string {
	t.Helper()
	ks, err := auth.LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return ks.Digest()[:digestLabelLen]
}

// TestAPIKeysReload rotates a key on a running node, without a restart,
// both ways a node learns of a new keys file: polling its content and a
// signal (SIGHUP in cmd/intentd). The new key authenticates once it is
// added, a keys file that does not validate changes nothing (the error is
// counted, the keys in force stay), and the old key is refused once it is
// removed.
func TestAPIKeysReload(t *testing.T) {
	cases := []struct {
		name   string
		poll   time.Duration
		signal bool
	}{
		{"file polled", 20 * time.Millisecond, false},
		{"signal", 0, true},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			tn := newTestNodes(t)
			path := filepath.Join(t.TempDir(), "keys.json")
			oldKey, oldEntry := keyEntry(t, "ops-2025")
			newKey, newEntry := keyEntry(t, "ops-2026")
			writeKeysFile(t, path, oldEntry)
			hup := make(chan os.Signal, 1)
			n := tn.startCfg("n1", 1, anyAddrs, func(c *Config) {
				c.Auth = AuthRequired
				c.APIKeysFile = path
				c.APIKeysPoll = tt.poll
				c.Reload = hup
				c.Security.GossipKey = testGossipKey
			})
			addr := n.HTTPAddr()
			trigger := func() {
				if tt.signal {
					hup <- os.Interrupt // any value: cmd/intentd sends SIGHUP
				}
			}
			if status(addr, oldKey) != http.StatusOK || status(addr, newKey) != http.StatusUnauthorized {
				t.Fatalf("at start: old key %d, new key %d", status(addr, oldKey), status(addr, newKey))
			}
			if got, want := digestLabel(t, addr), fileDigest(t, path); got != want || n.APIKeysDigest()[:digestLabelLen] != want {
				t.Fatalf("digest at start: metric %s, node %s, file %s", got, n.APIKeysDigest(), want)
			}

			// Add the new key: both work.
			writeKeysFile(t, path, oldEntry, newEntry)
			trigger()
			nodetest.WaitFor(t, 10*time.Second, "the new key to authenticate", func() bool {
				return status(addr, newKey) == http.StatusOK
			})
			if status(addr, oldKey) != http.StatusOK || reloads(t, addr, "success") != 1 || digestLabel(t, addr) != fileDigest(t, path) {
				t.Fatalf("after adding: old key %d, reloads %d, digest %s", status(addr, oldKey), reloads(t, addr, "success"), digestLabel(t, addr))
			}
			both := digestLabel(t, addr)

			// A file that does not validate changes nothing.
			writeFileAtomically(t, path, `{"keys":[{"name":"broken","namespace":"default","roles":["admin"],"sha256":"zz"}]}`)
			trigger()
			nodetest.WaitFor(t, 10*time.Second, "the failed reload to be counted", func() bool {
				return reloads(t, addr, "error") == 1
			})
			if status(addr, oldKey) != http.StatusOK || status(addr, newKey) != http.StatusOK || digestLabel(t, addr) != both {
				t.Fatalf("after a bad file: old key %d, new key %d, digest %s (was %s)", status(addr, oldKey), status(addr, newKey), digestLabel(t, addr), both)
			}
			if err := n.ReloadAPIKeys(); err == nil {
				t.Fatal("ReloadAPIKeys accepted a bad file")
			}

			// Remove the old key: refused, the new one still works.
			writeKeysFile(t, path, newEntry)
			trigger()
			nodetest.WaitFor(t, 10*time.Second, "the old key to be refused", func() bool {
				return status(addr, oldKey) == http.StatusUnauthorized
			})
			if status(addr, newKey) != http.StatusOK || reloads(t, addr, "success") != 2 || digestLabel(t, addr) != fileDigest(t, path) {
				t.Fatalf("after removing: new key %d, reloads %d, digest %s", status(addr, newKey), reloads(t, addr, "success"), digestLabel(t, addr))
			}
		})
	}
}
