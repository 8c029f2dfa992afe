package main

import (
	"io"
	"testing"

	"github.com/intentledger/intentd/node"
)

// The capacity flags (and their INTENTD_* variables) reach the node's
// Config: sizes with units, auto and off.
func TestParseConfigCapacity(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want node.CapacityConfig
		err  bool
	}{
		{"defaults", nil, nil, node.CapacityConfig{MinFreeDiskAuto: true, MaxMemoryAuto: true, MemoryHighWater: 0.8}, false},
		{"sizes", []string{"--min-free-disk", "512MiB", "--max-data-bytes", "20GiB", "--max-memory", "400MiB", "--memory-high-water", "0.7"}, nil,
			node.CapacityConfig{MinFreeDisk: 512 << 20, MaxDataBytes: 20 << 30, MaxMemory: 400 << 20, MemoryHighWater: 0.7}, false},
		{"decimal units and bytes", []string{"--min-free-disk", "2GB", "--max-memory", "1048576"}, nil,
			node.CapacityConfig{MinFreeDisk: 2e9, MaxMemory: 1 << 20, MemoryHighWater: 0.8}, false},
		{"off", []string{"--min-free-disk", "off", "--max-memory", "0"}, nil, node.CapacityConfig{MemoryHighWater: 0.8}, false},
		{"environment", nil, map[string]string{"INTENTD_MAX_MEMORY": "4GiB", "INTENTD_MIN_FREE_DISK": "auto"},
			node.CapacityConfig{MinFreeDiskAuto: true, MaxMemory: 4 << 30, MemoryHighWater: 0.8}, false},
		{"bad size", []string{"--max-memory", "lots"}, nil, node.CapacityConfig{}, true},
		{"auto where there is none", []string{"--max-data-bytes", "auto"}, nil, node.CapacityConfig{}, true},
		{"high water over 1", []string{"--memory-high-water", "1.5"}, nil, node.CapacityConfig{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"INTENTD_GOSSIP_KEY": testGossipKey}
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := parseConfig(append([]string{"--data-dir", t.TempDir()}, tt.args...), func(k string) string { return env[k] }, io.Discard)
			if tt.err {
				if err == nil {
					t.Fatalf("accepted: %+v", c.Capacity)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Capacity != tt.want {
				t.Fatalf("Capacity = %+v, want %+v", c.Capacity, tt.want)
			}
		})
	}
}
