package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/httpapi"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

func TestBenchRunsLevelsAgainstAnAPI(t *testing.T) {
	mem := ledgertest.NewMemory(time.Unix(1_700_000_000, 0))
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Service: ledger.New(mem, ledger.Limits{})}).Handler())
	defer srv.Close()
	for _, mode := range []string{"unique", "contended"} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{"--addr", srv.URL, "--target", "all", "--mode", mode, "--claimants", "2",
			"--clients", "1,4", "--duration", "200ms", "--warmup", "50ms"}, &out, &errOut)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", mode, code, errOut.String())
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
	if mem.Proposed() == 0 {
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
