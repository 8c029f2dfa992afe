package node

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/intentledger/intentd/testkit/nodetest"
)

// TestLedgerFullThroughANode: a node whose data dir is over
// --max-data-bytes answers a claim of a new key 507 ledger_full naming
// the data dir, writes nothing, and exports the capacity per resource and
// the refusal.
func TestLedgerFullThroughANode(t *testing.T) {
	tn := newTestNodes(t)
	m := tn.startCfg("n1", 1, anyAddrs, func(c *Config) { c.Capacity.MaxDataBytes = 1 })
	tn.waitReady()
	a, err := nodetest.Post(m.HTTPAddr(), "/v1/intents", map[string]any{
		"key": "k", "tool": "test.tool", "owner": "o", "payload": map[string]any{"n": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if detail, _ := a.Body["detail"].(string); a.Code != http.StatusInsufficientStorage || a.Body["code"] != "ledger_full" ||
		!strings.Contains(detail, "(data_dir)") {
		t.Fatalf("claim over --max-data-bytes: %d %v, want 507 ledger_full for data_dir", a.Code, a.Body)
	}
	if a, err := nodetest.Get(m.HTTPAddr(), "/v1/intents/k"); err != nil || a.Code != http.StatusNotFound {
		t.Fatalf("refused key: %d %v (%v), want 404", a.Code, a.Body, err)
	}
	resp, err := http.Get("http://" + m.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, series := range []string{
		`intentd_capacity_refusing{resource="data_dir"} 1`,
		`intentd_ledger_full_total{resource="data_dir"} 1`,
		`intentd_capacity_limit_bytes{resource="data_dir"} 1`,
		`intentd_capacity_used_bytes{resource="data_dir"} `,
		`intentd_capacity_bytes{resource="disk"} `,
		`intentd_capacity_headroom_bytes{resource="disk"} `,
		`intentd_capacity_refusing{resource="disk"} 0`,
		`intentd_claims_total{status="ledger_full"} 1`,
	} {
		if !strings.Contains(string(raw), series) {
			t.Errorf("/metrics has no %s", series)
		}
	}
}

// TestDirBytesCountsHardLinksOnce: a checkpoint snapshot hard-links the
// state store's files; the data dir's size counts each file once.
func TestDirBytesCountsHardLinksOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "snapshots", "1-2-3", "checkpoint"), 0o755); err != nil {
		t.Fatal(err)
	}
	sst := filepath.Join(dir, "state", "000001.sst")
	if err := os.WriteFile(sst, make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state", "MANIFEST"), make([]byte, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(sst, filepath.Join(dir, "snapshots", "1-2-3", "checkpoint", "000001.sst")); err != nil {
		t.Fatal(err)
	}
	got, err := dirBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != 1010 {
		t.Fatalf("dirBytes = %d, want 1010 (the linked file once)", got)
	}
}
