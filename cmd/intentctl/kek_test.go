package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentledger/intentd/token"
)

func TestKEKNew(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "kek")
	r := runCLI(t, "kek", "new", "--out", file)
	expect(t, r, exitOK, "wrote the key-encryption key to "+file, "--kek-file "+file)

	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %#o, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The base64 of 32 bytes and a newline: what intentd --kek-file and
	// INTENTD_KEK read.
	key, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(string(data), "\n"))
	if err != nil || len(key) != token.KEKSize || len(data) != 45 {
		t.Fatalf("file of %d bytes holds %d key bytes (%v)", len(data), len(key), err)
	}
	kek, err := token.ParseKEK(data)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.stdout, kek.ID()) || strings.Contains(r.stdout, strings.TrimSpace(string(data))) {
		t.Fatalf("stdout names the key by its id only:\n%s", r)
	}

	// Never replaced: the sealed keys need the one in use.
	r = runCLI(t, "kek", "new", "--out", file)
	expect(t, r, exitError)
	if !strings.Contains(r.stderr, "exists") {
		t.Fatalf("refusal does not say why:\n%s", r)
	}
	if again, _ := os.ReadFile(file); !bytes.Equal(again, data) {
		t.Fatal("the existing key was changed")
	}

	// Each key is fresh; --output json names the file and the id.
	var out struct {
		File  string `json:"file"`
		KEKID string `json:"kek_id"`
	}
	second := filepath.Join(dir, "kek2")
	r = runCLI(t, "kek", "new", "--out", second, "--output", "json")
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != exitOK || out.File != second || out.KEKID == kek.ID() {
		t.Fatalf("json: %+v (%v)\n%s", out, err, r)
	}
	if other, err := os.ReadFile(second); err != nil || bytes.Equal(other, data) {
		t.Fatalf("second key equals the first (%v)", err)
	}
}

func TestKEKNewRefusesBadUsage(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		args []string
		code int
	}{
		"kek alone":         {[]string{"kek"}, exitUsage},
		"unknown":           {[]string{"kek", "rotate"}, exitUsage},
		"no --out":          {[]string{"kek", "new"}, exitUsage},
		"a positional":      {[]string{"kek", "new", "--out", filepath.Join(dir, "a"), "extra"}, exitUsage},
		"missing directory": {[]string{"kek", "new", "--out", filepath.Join(dir, "no", "kek")}, exitError},
	} {
		t.Run(name, func(t *testing.T) {
			expect(t, runCLI(t, tc.args...), tc.code)
		})
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("refused commands left files: %v", left)
	}
}
