package progress

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a clock the test sets.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// step is one call on a Writer at a time after t0.
type step struct {
	at   time.Duration
	call string // status, event, write or clear
	text string
}

func TestWriter(t *testing.T) {
	cases := []struct {
		name     string
		terminal bool
		interval time.Duration
		steps    []step
		want     string
	}{
		{
			name: "plain: the first status at once, then at most one per interval",
			steps: []step{
				{0, "status", "a"}, {time.Second, "status", "b"}, {4999 * time.Millisecond, "status", "c"},
				{5 * time.Second, "status", "d"}, {9 * time.Second, "status", "e"}, {10 * time.Second, "status", "f"},
			},
			want: "a\nd\nf\n",
		},
		{
			name: "plain: event lines always, whatever the status lines do",
			steps: []step{
				{0, "status", "s1"}, {time.Second, "event", "  nemesis: kill n1"}, {time.Second, "status", "s2"},
				{2 * time.Second, "event", "jepsen: healed\n"}, {2 * time.Second, "event", "again"}, {6 * time.Second, "status", "s3"},
			},
			want: "s1\n  nemesis: kill n1\njepsen: healed\nagain\ns3\n",
		},
		{
			name:  "plain: a status's own trailing newline is not doubled",
			steps: []step{{0, "status", "ops=1\n"}, {time.Minute, "status", "ops=2\n\n"}},
			want:  "ops=1\nops=2\n",
		},
		{
			name:  "plain: clear writes nothing; write passes text through",
			steps: []step{{0, "status", "s"}, {0, "clear", ""}, {0, "write", "bench-compare: profile: x\n"}},
			want:  "s\nbench-compare: profile: x\n",
		},
		{
			name:     "plain: another interval",
			interval: time.Second,
			steps:    []step{{0, "status", "a"}, {500 * time.Millisecond, "status", "b"}, {time.Second, "status", "c"}},
			want:     "a\nc\n",
		},
		{
			name:     "terminal: every status redraws the line",
			terminal: true,
			steps:    []step{{0, "status", "a"}, {time.Millisecond, "status", "b"}, {2 * time.Millisecond, "status", "c\n"}},
			want:     "\r\033[Ka\r\033[Kb\r\033[Kc",
		},
		{
			name:     "terminal: an event erases the status line and ends with a newline",
			terminal: true,
			steps:    []step{{0, "status", "a"}, {0, "event", "  nemesis: kill n1"}, {0, "event", "x"}, {0, "status", "b"}},
			want:     "\r\033[Ka\r\033[K  nemesis: kill n1\nx\n\r\033[Kb",
		},
		{
			name:     "terminal: clear erases a drawn line once",
			terminal: true,
			steps:    []step{{0, "clear", ""}, {0, "status", "a"}, {0, "clear", ""}, {0, "clear", ""}, {0, "write", "done\n"}},
			want:     "\r\033[Ka\r\033[Kdone\n",
		},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			c := &clock{t0}
			p := NewConfig(&out, Config{Terminal: tt.terminal, Interval: tt.interval, Now: c.now})
			if p.Terminal() != tt.terminal {
				t.Fatalf("Terminal() = %v", p.Terminal())
			}
			for _, s := range tt.steps {
				c.t = t0.Add(s.at)
				switch s.call {
				case "status":
					p.Status("%s", s.text)
				case "event":
					p.Event("%s", s.text)
				case "write":
					fmt.Fprint(p, s.text)
				case "clear":
					p.Clear()
				default:
					t.Fatalf("bad step %q", s.call)
				}
			}
			if got := out.String(); got != tt.want {
				t.Errorf("output\n got %q\nwant %q", got, tt.want)
			}
			if !tt.terminal {
				checkPlain(t, out.String())
			}
		})
	}
}

// checkPlain fails unless out is plain lines: no carriage return, no
// escape code, newline-terminated.
func checkPlain(t *testing.T, out string) {
	t.Helper()
	if strings.ContainsAny(out, "\r\033") {
		t.Errorf("plain output holds a carriage return or an escape code: %q", out)
	}
	if out != "" && !strings.HasSuffix(out, "\n") {
		t.Errorf("plain output does not end with a newline: %q", out)
	}
}

// TestPlainStatusSpacing redraws every 100 ms for a minute, as a command's
// ticker might, with an event every 7 s: a log gets one status line per 5 s
// (12), each at least 5 s after the one before, and every event.
func TestPlainStatusSpacing(t *testing.T) {
	var out bytes.Buffer
	c := &clock{t0}
	p := NewConfig(&out, Config{Now: c.now})
	for i := 0; i < 600; i++ {
		c.t = t0.Add(time.Duration(i) * 100 * time.Millisecond)
		if i%70 == 0 {
			p.Event("event %d", i)
		}
		p.Status("at=%s", c.t.Sub(t0))
	}
	checkPlain(t, out.String())
	var statuses []time.Duration
	events := 0
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if at, ok := strings.CutPrefix(line, "at="); ok {
			d, err := time.ParseDuration(at)
			if err != nil {
				t.Fatal(err)
			}
			statuses = append(statuses, d)
		} else {
			events++
		}
	}
	if len(statuses) != 12 || events != 9 {
		t.Fatalf("%d status lines and %d events, want 12 and 9:\n%s", len(statuses), events, out.String())
	}
	for i := 1; i < len(statuses); i++ {
		if gap := statuses[i] - statuses[i-1]; gap < DefaultInterval {
			t.Errorf("status lines %s apart (at %s and %s)", gap, statuses[i-1], statuses[i])
		}
	}
}

// TestConcurrentLinesStayWhole writes from several goroutines at once (run
// with -race): no line of a log is torn or mixed with another.
func TestConcurrentLinesStayWhole(t *testing.T) {
	var out bytes.Buffer
	p := NewConfig(&out, Config{Interval: time.Nanosecond})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				if i%2 == 0 {
					p.Status("status g%d i%d", g, i)
				} else {
					p.Event("event g%d i%d", g, i)
				}
			}
		})
	}
	wg.Wait()
	checkPlain(t, out.String())
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var kind string
		var g, i int
		if n, err := fmt.Sscanf(line, "%s g%d i%d", &kind, &g, &i); n != 3 || err != nil || (kind != "status" && kind != "event") {
			t.Fatalf("torn line %q", line)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	for _, tt := range []struct {
		name string
		w    io.Writer
		want bool
	}{
		{"a buffer", &bytes.Buffer{}, false},
		{"a file", file, false},
		{"a pipe", w, false},
		{"a character device", null, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsTerminal(tt.w); got != tt.want {
				t.Errorf("IsTerminal = %v, want %v", got, tt.want)
			}
			if got := New(tt.w).Terminal(); got != tt.want {
				t.Errorf("New(...).Terminal() = %v, want %v", got, tt.want)
			}
		})
	}
}
