package main

import (
	"io"
	"testing"
)

// --ready-max-lag (and INTENTD_READY_MAX_LAG) reach the node's Config;
// the default is the cluster's.
func TestParseConfigReadyMaxLag(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want uint64
	}{
		{"default", nil, nil, 1000},
		{"flag", []string{"--ready-max-lag", "50"}, nil, 50},
		{"environment", nil, map[string]string{"INTENTD_READY_MAX_LAG": "20000"}, 20000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"INTENTD_GOSSIP_KEY": testGossipKey}
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := parseConfig(append([]string{"--data-dir", t.TempDir()}, tt.args...), func(k string) string { return env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if c.ReadyMaxLag != tt.want {
				t.Fatalf("ReadyMaxLag = %d, want %d", c.ReadyMaxLag, tt.want)
			}
		})
	}
	if _, err := parseConfig([]string{"--ready-max-lag", "-1"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Fatal("--ready-max-lag -1 accepted")
	}
}
