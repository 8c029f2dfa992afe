package doccheck

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestWords(t *testing.T) {
	tests := []struct {
		line    string
		want    []string // operators in angle brackets
		comment string
		err     error
	}{
		{`curl -s -XPOST localhost:8101/v1/intents -d '{"a":"b c"}'`, []string{"curl", "-s", "-XPOST", "localhost:8101/v1/intents", "-d", `{"a":"b c"}`}, "", nil},
		{`curl -s x  # 201 granted`, []string{"curl", "-s", "x"}, "201 granted", nil},
		{`echo "a \"q\" \$x" b\ c`, []string{"echo", `a "q" $x`, "b c"}, "", nil},
		{`until curl -s u | grep -q in_doubt; do sleep 0.2; done`, []string{"until", "curl", "-s", "u", "<|>", "grep", "-q", "in_doubt", "<;>", "do", "sleep", "0.2", "<;>", "done"}, "", nil},
		{`A=1 make test && make x>out`, []string{"A=1", "make", "test", "<&&>", "make", "x", "<>>", "out"}, "", nil},
		{`url#frag`, []string{"url#frag"}, "", nil},
		{`echo 'open`, nil, "", ErrUnterminated},
	}
	for _, tt := range tests {
		ws, comment, err := Words(tt.line)
		if !errors.Is(err, tt.err) {
			t.Errorf("Words(%q) error = %v, want %v", tt.line, err, tt.err)
			continue
		}
		var got []string
		for _, w := range ws {
			if w.Op {
				got = append(got, "<"+w.Text+">")
			} else {
				got = append(got, w.Text)
			}
		}
		if !slices.Equal(got, tt.want) || comment != tt.comment {
			t.Errorf("Words(%q) = %q, %q; want %q, %q", tt.line, got, comment, tt.want, tt.comment)
		}
	}
	ws, _, _ := Words(`curl "$A/v1" '$literal'`)
	if !ws[1].Expands || ws[2].Expands {
		t.Errorf("expansion flags: %+v", ws)
	}
}

func TestCurlSteps(t *testing.T) {
	doc := strings.Join([]string{
		"```sh",
		"make run",
		"curl -s -XPOST localhost:8101/v1/intents -H 'content-type: application/json' \\",
		"  -d '{\"key\":\"k\"}'   # 201 granted",
		"curl -s localhost:8102/v1/intents/k",
		"# 200 the intent",
		"until curl -s localhost:8101/v1/intents/k | grep -q in_doubt; do sleep 0.2; done",
		"```",
		"```json",
		"curl -s not-shell  # no status: not checked",
		"```",
	}, "\n")
	got, err := CurlSteps(Parse([]byte(doc)))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{
		{Line: 3, Args: []string{"-s", "-XPOST", "localhost:8101/v1/intents", "-H", "content-type: application/json", "-d", `{"key":"k"}`}, Want: 201},
		{Line: 5, Args: []string{"-s", "localhost:8102/v1/intents/k"}, Want: 200},
		{Line: 7, Args: []string{"-s", "localhost:8101/v1/intents/k"}, WaitFor: "in_doubt"},
	}
	if len(got) != len(want) {
		t.Fatalf("steps = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i].Line != want[i].Line || !slices.Equal(got[i].Args, want[i].Args) || got[i].Want != want[i].Want || got[i].WaitFor != want[i].WaitFor {
			t.Errorf("step %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// TestCurlStepsRefuse: an example the check could not run, or one without
// a documented status, is an error rather than silently skipped.
func TestCurlStepsRefuse(t *testing.T) {
	tests := []struct{ line, want string }{
		{"curl -s localhost:8101/healthz", "without a documented status"},
		{`curl -s "$A/healthz"   # 200`, "shell expansion"},
		{"curl -s localhost:8101/v1/cluster | jq .   # 200", "one curl command"},
		{"curl -s 'localhost:8101/v1/cluster   # 200", "unterminated"},
	}
	for _, tt := range tests {
		_, err := CurlSteps(Parse([]byte("```sh\n" + tt.line + "\n```\n")))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one saying %q", tt.line, err, tt.want)
		}
	}
}

func TestCurlRequest(t *testing.T) {
	tests := []struct {
		args                 []string
		method, url, body, h string
		err                  string
	}{
		{args: []string{"-s", "localhost:8101/v1/intents/k"}, method: "GET", url: "http://localhost:8101/v1/intents/k"},
		{args: []string{"-sS", "-XPOST", "http://h/x", "-H", "content-type: application/json", "-d", `{"a":1}`},
			method: "POST", url: "http://h/x", body: `{"a":1}`, h: "application/json"},
		{args: []string{"-d", "a=1", "h/x"}, method: "POST", url: "http://h/x", body: "a=1", h: "application/x-www-form-urlencoded"},
		{args: []string{"-X", "PUT", "--data-raw", "{}", "h/p"}, method: "PUT", url: "http://h/p", body: "{}", h: "application/x-www-form-urlencoded"},
		{args: []string{"-d", "@body.json", "h/x"}, err: "reads a file"},
		{args: []string{"--json", "{}", "h/x"}, err: "not one the doc check reproduces"},
		{args: []string{"-s"}, err: "without a URL"},
	}
	for _, tt := range tests {
		r, err := CurlRequest(tt.args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("CurlRequest(%q) error %v, want %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("CurlRequest(%q): %v", tt.args, err)
			continue
		}
		if r.Method != tt.method || r.URL != tt.url || r.Body != tt.body || r.Header.Get("Content-Type") != tt.h {
			t.Errorf("CurlRequest(%q) = %s %s %q %v", tt.args, r.Method, r.URL, r.Body, r.Header)
		}
	}
}
