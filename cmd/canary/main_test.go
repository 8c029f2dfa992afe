package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/canary"
	"github.com/intentledger/intentd/internal/progress"
	"github.com/intentledger/intentd/testkit/localcluster"
)

// TestMain lets the test binary serve as the tool process that run starts
// from its own executable (--tool process, the default).
func TestMain(m *testing.M) {
	if os.Getenv(canary.ToolProcessEnv) == "1" {
		os.Exit(canary.ToolProcessMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// hangGuard bounds a run: a guard against hangs, not a performance
// threshold.
const hangGuard = 5 * time.Minute

// integration skips a test that starts a real cluster under -short (the
// unit tier), and otherwise runs it in parallel with the others: each run
// has its own cluster, ports and tool process.
func integration(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a real cluster: integration tier")
	}
	t.Parallel()
}

func TestGatePasses(t *testing.T) {
	integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	out := filepath.Join(t.TempDir(), "report.json")
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--episodes", "5", "--seeds", "9", "--concurrency", "8", "--json", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"lost-ack", "divergent refused", "(match)", "canary: PASS"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.Passed || len(rep.Seeds) != 1 || !rep.Seeds[0].ReplayMatches || len(rep.Seeds[0].Classes) != 5 {
		t.Fatalf("report: %s", data)
	}
}

func TestBrokenModesFail(t *testing.T) {
	integration(t)
	for _, mode := range []string{"fresh-key", "no-ledger"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := run(ctx, []string{"--episodes", "3", "--seeds", "4", "--classes", "lost-ack", "--broken", mode}, &stdout, &stderr)
			if code != 1 {
				t.Fatalf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
			}
			for _, want := range []string{"VIOLATION I1 seed=4", "a1: agent sends", "canary: FAIL"} {
				if !strings.Contains(stdout.String(), want) {
					t.Fatalf("output lacks %q:\n%s", want, stdout.String())
				}
			}
		})
	}
}

// TestGateThroughMCP runs the gate with the tool a plain MCP server
// behind the MCP gate: it passes, and a gate that passes the tool through
// fails it with a reproduce line that keeps --via mcp.
func TestGateThroughMCP(t *testing.T) {
	integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var stdout, stderr bytes.Buffer
	if code := run(ctx, []string{"--via", "mcp", "--episodes", "3", "--seeds", "6"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"a plain MCP server behind the MCP gate", "(match)", "canary: PASS"} {
		if !strings.Contains(stdout.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	stdout.Reset()
	stderr.Reset()
	code := run(ctx, []string{"--via", "mcp", "--episodes", "3", "--seeds", "4", "--classes", "lost-ack", "--broken", "no-ledger"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stdout.String(), "--broken no-ledger --via mcp") {
		t.Fatalf("exit %d, want 1 and a reproduce line through the MCP gate\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{{"--classes", "nope"}, {"--broken", "nope"}, {"--seeds", "x"}, {"--episodes", "0"}, {"--tool", "nope"},
		{"--via", "grpc"}} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
}

func TestGateAgainstAnExistingClusterByAddr(t *testing.T) {
	integration(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	cl, err := localcluster.Start(ctx, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var stdout, stderr bytes.Buffer
	args := []string{"--addr", strings.Join(cl.URLs(), ","), "--episodes", "3", "--seeds", "4", "--classes", "lost-ack,crash"}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "existing cluster") || !strings.Contains(stdout.String(), "canary: PASS") {
		t.Fatalf("output:\n%s", stdout.String())
	}
}

// TestProgressLines: into a log the bar is a plain line at most every few
// seconds, and the finished bar is always there; on a terminal it is
// redrawn in place and the finished bar ends the line.
func TestProgressLines(t *testing.T) {
	at := time.Unix(0, 0)
	for _, tt := range []struct {
		name     string
		terminal bool
	}{{"log", false}, {"terminal", true}} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			prog := progress.NewConfig(&out, progress.Config{Terminal: tt.terminal, Now: func() time.Time { return at }})
			show := showProgress(prog, 1, 2, 7, 0)
			for done := 1; done <= 10; done++ {
				show(done, 10) // all within one interval of the clock
			}
			got := out.String()
			lines := strings.Count(got, "\n")
			if tt.terminal {
				if draws := strings.Count(got, "\r\033[K"); draws != 10 || lines != 1 || !strings.HasSuffix(got, "10/10 episodes\n") {
					t.Errorf("terminal: %d redraws, %d newlines, want 10 and 1:\n%q", draws, lines, got)
				}
				return
			}
			if strings.ContainsAny(got, "\r\033") || lines != 2 ||
				!strings.Contains(got, "run 1/2 seed 7 pass 1: 1/10 episodes\n") || !strings.HasSuffix(got, "run 1/2 seed 7 pass 1: 10/10 episodes\n") {
				t.Errorf("log: want the first and the finished bar as plain lines, got\n%q", got)
			}
		})
	}
}
