package main

import (
	"strings"
	"testing"
)

func TestCluster(t *testing.T) {
	e := newEnv(t)
	r := e.run(t, "cluster")
	expect(t, r, exitOK, "ID", "RAFT ADDR", "HTTP ADDR", "SUFFRAGE", "GOSSIP", "LEADER",
		"n1", "127.0.0.1:7001", "voter", "suspect", "term", "4", "commit_index", "applied_index")
	var leaderLine string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.HasPrefix(line, "n1 ") {
			leaderLine = line
		}
	}
	if !strings.HasSuffix(strings.TrimSpace(leaderLine), "*") {
		t.Errorf("leader not marked:\n%s", r.stdout)
	}
	expect(t, e.run(t, "cluster", "--output", "json"), exitOK, `"node_id": "n1"`)
	expect(t, e.run(t, "health"), exitOK, "true")
}
