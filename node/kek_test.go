package node

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/token"
)

// testKEKBytes is the KEK of these tests (not printable, as random bytes
// almost never are: ParseKEK takes 32 printable bytes for a password).
var testKEKBytes = bytes.Repeat([]byte{0xa5}, token.KEKSize)

// syncLog is a log destination safe for Raft's and gossip's goroutines.
type syncLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// kekFile writes data into a file of mode perm and returns its path.
func kekFile(t *testing.T, data []byte, perm os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kek")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil { // not subject to the umask
		t.Fatal(err)
	}
	return path
}

func TestKEKConfigLoad(t *testing.T) {
	want, err := token.NewKEK(testKEKBytes)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(testKEKBytes)
	for _, tc := range []struct {
		name string
		cfg  func(t *testing.T) KEKConfig
		want error  // nil: the test KEK loads
		text string // in the error, when want is errAny
	}{
		{"raw file 0600", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o600)} }, nil, ""},
		{"base64 file 0600", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, []byte(b64+"\n"), 0o600)} }, nil, ""},
		{"read-only file 0400", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o400)} }, nil, ""},
		{"INTENTD_KEK", func(t *testing.T) KEKConfig { return KEKConfig{Value: b64} }, nil, ""},
		{"file 0644", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o644)} }, errKEKFileMode, "0644"},
		{"file 0640 (group)", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o640)} }, errKEKFileMode, "0640"},
		{"file 0604 (others)", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o604)} }, errKEKFileMode, "0604"},
		{"file 0620 (group may write)", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o620)} }, errKEKFileMode, "0620"},
		{"a directory", func(t *testing.T) KEKConfig {
			dir := filepath.Join(t.TempDir(), "d")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			return KEKConfig{File: dir}
		}, errAny, "not a regular file"},
		{"missing file", func(t *testing.T) KEKConfig { return KEKConfig{File: filepath.Join(t.TempDir(), "none")} }, os.ErrNotExist, ""},
		{"file of 16 bytes", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes[:16], 0o600)} }, token.ErrInvalidKEK, ""},
		{"file of a password", func(t *testing.T) KEKConfig {
			return KEKConfig{File: kekFile(t, []byte("correct horse battery staple !!!"), 0o600)}
		}, token.ErrInvalidKEK, ""},
		{"huge file", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, make([]byte, 4096), 0o600)} }, errAny, "over 1024 bytes"},
		{"INTENTD_KEK not base64", func(t *testing.T) KEKConfig { return KEKConfig{Value: "not base64!"} }, token.ErrInvalidKEK, KEKEnvVar},
		{"INTENTD_KEK of 16 bytes", func(t *testing.T) KEKConfig {
			return KEKConfig{Value: base64.StdEncoding.EncodeToString(testKEKBytes[:16])}
		}, token.ErrInvalidKEK, KEKEnvVar},
		{"both", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o600), Value: b64} }, errKEKTwice, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncLog
			kek, err := tc.cfg(t).load(slog.New(slog.NewTextHandler(&logs, nil)), true)
			switch {
			case tc.want == nil:
				if err != nil || kek.ID() != want.ID() {
					t.Fatalf("load = %v, %v; want the KEK %s", kek, err, want.ID())
				}
				if !strings.Contains(logs.String(), "kek_id="+want.ID()) || strings.Contains(logs.String(), "UNENCRYPTED") {
					t.Fatalf("logs: %s", logs.String())
				}
			case kek != nil || err == nil:
				t.Fatalf("load = %v, %v; want an error", kek, err)
			case tc.want != errAny && !errors.Is(err, tc.want):
				t.Fatalf("load: %v, want %v", err, tc.want)
			case !strings.Contains(err.Error(), tc.text):
				t.Fatalf("load: %v, want %q in it", err, tc.text)
			}
		})
	}
}

// errAny marks a case that only needs some error.
var errAny = errors.New("any error")

// TestNoKEKWarnsOnce: without a KEK the node starts and warns, once, that
// seeds are stored unencrypted; with auth required the warning says how
// to add a KEK.
func TestNoKEKWarnsOnce(t *testing.T) {
	for _, authRequired := range []bool{true, false} {
		var logs syncLog
		kek, err := KEKConfig{}.load(slog.New(slog.NewTextHandler(&logs, nil)), authRequired)
		if kek != nil || err != nil {
			t.Fatalf("load without a KEK = %v, %v", kek, err)
		}
		out := logs.String()
		if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "UNENCRYPTED") {
			t.Fatalf("auth required %v: logs %s", authRequired, out)
		}
		if how := strings.Contains(out, "intentctl kek new") && strings.Contains(out, "--kek-file"); how != authRequired {
			t.Fatalf("auth required %v: the warning says how to add a KEK: %v\n%s", authRequired, how, out)
		}
	}
}

// TestStartRefusesAKEKFileOthersMayRead: a KEK file of mode 0644 stops the
// start before the node binds a port or creates its data directory.
func TestStartRefusesAKEKFileOthersMayRead(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ID, cfg.DataDir = "n1", filepath.Join(t.TempDir(), "data")
	cfg.HTTPAddr, cfg.RaftAddr, cfg.GossipAddr = anyAddrs[0], anyAddrs[1], anyAddrs[2]
	cfg.Auth, cfg.Logger = AuthOff, quietLogger()
	cfg.KEK.File = kekFile(t, testKEKBytes, 0o644)
	err := New(cfg).Start(context.Background())
	if !errors.Is(err, errKEKFileMode) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("start: %v, want errKEKFileMode", err)
	}
	if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start created its data directory (%v)", err)
	}
}

// TestStartWithKEKSealsSigningKeys: a node started with a KEK (the
// environment's, and a good file) proposes sealed keys, and signs and
// publishes with them; a node started without one warns once.
func TestStartWithKEKSealsSigningKeys(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kek    func(t *testing.T) KEKConfig
		sealed bool
	}{
		{"INTENTD_KEK", func(t *testing.T) KEKConfig {
			return KEKConfig{Value: base64.StdEncoding.EncodeToString(testKEKBytes)}
		}, true},
		{"--kek-file", func(t *testing.T) KEKConfig { return KEKConfig{File: kekFile(t, testKEKBytes, 0o600)} }, true},
		{"no KEK", func(t *testing.T) KEKConfig { return KEKConfig{} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncLog
			tn := newTestNodes(t)
			m := tn.startCfg("n1", 1, anyAddrs, func(c *Config) {
				c.KEK = tc.kek(t)
				c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := m.Cluster().WaitLeader(ctx); err != nil {
				t.Fatal(err)
			}
			id, err := m.svc.RotateKey(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var keys []fsm.SigningKey
			if err := m.Cluster().Read(ctx, ledger.Stale, func(l *fsm.Machine) { keys = l.SigningKeys() }); err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 || keys[0].ID != id || (len(keys[0].Sealed) > 0) != tc.sealed || (len(keys[0].Seed) > 0) == tc.sealed {
				t.Fatalf("keys: %+v, want one sealed: %v", keys, tc.sealed)
			}
			set, err := m.svc.JWKS(ctx, ledger.Stale)
			if err != nil || !strings.Contains(string(set), id) {
				t.Fatalf("key set: %s, %v", set, err)
			}
			warnings := strings.Count(logs.String(), "UNENCRYPTED")
			if tc.sealed && (warnings != 0 || !strings.Contains(logs.String(), "kek_id=")) ||
				!tc.sealed && warnings != 1 {
				t.Fatalf("%d warnings of unencrypted seeds; logs:\n%s", warnings, logs.String())
			}
		})
	}
}
