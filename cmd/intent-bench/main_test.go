package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/intentledger/intentd/internal/clienttest"
)

func TestBenchRunsLevelsAgainstAnAPI(t *testing.T) {
	srv := clienttest.NewMemory(t)
	for _, mode := range []string{"unique", "contended"} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--addr", srv.URL, "--target", "all", "--mode", mode, "--claimants", "2",
			"--clients", "1,4", "--duration", "200ms", "--warmup", "50ms"}, &out, &errOut)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", mode, code, errOut.String())
		}
		if strings.ContainsAny(errOut.String(), "\r\033") {
			t.Errorf("%s: stderr is not a terminal but holds carriage returns or escape codes: %q", mode, errOut.String())
		}
		rows := 0
		for _, line := range strings.Split(out.String(), "\n") {
			f := strings.Split(line, "|")
			if len(f) < 9 || (strings.TrimSpace(f[1]) != "1" && strings.TrimSpace(f[1]) != "4") {
				continue
			}
			rows++
			if ops := strings.TrimSpace(f[6]); ops == "0" {
				t.Errorf("%s: level %s measured no ops: %s", mode, f[1], line)
			}
			if errs := strings.TrimSpace(f[7]); errs != "0" {
				t.Errorf("%s: errors in %s", mode, line)
			}
		}
		if rows != 2 {
			t.Fatalf("%s: want 2 result rows:\n%s", mode, out.String())
		}
	}
	if srv.Ledger.Proposed() == 0 {
		t.Fatal("bench proposed nothing")
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--clients", "0"}, {"--mode", "x"}, {"--target", "x"}, {"--duration", "0s"}} {
		if code := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
}
