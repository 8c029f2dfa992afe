package doccheck

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/testkit/localcluster"
)

// curlDocs are the documents whose curl examples run against a cluster:
// the getting-started page and the README's tour. Each must have some.
var curlDocs = []string{"docs/getting-started.md", "README.md"}

func steps(t *testing.T, doc string) []Step {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		t.Fatal(err)
	}
	s, err := CurlSteps(Parse(b))
	if err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	if len(s) == 0 {
		t.Fatalf("%s has no curl example with a documented status", doc)
	}
	return s
}

// TestCurlExamplesParse (unit tier): every curl example of the checked
// documents is one the check can run, with a documented status.
func TestCurlExamplesParse(t *testing.T) {
	for _, doc := range curlDocs {
		for _, s := range steps(t, doc) {
			if _, err := CurlRequest(s.Args); err != nil {
				t.Errorf("%s:%d: %v", doc, s.Line, err)
			}
		}
	}
}

// TestCurlExamplesAnswerAsDocumented runs every curl example of the
// getting-started page and of the README's tour, in order, against a real
// three-node cluster of in-process nodes (as make run starts one: auth off,
// any node answers), with the addresses of make run (127.0.0.1:8101..8103,
// or localhost) replaced by the cluster's, and compares each answer's
// status with the one the document states. It uses the curl binary when
// one is installed (CI installs it) and otherwise sends the request curl
// would send.
func TestCurlExamplesAnswerAsDocumented(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster; -short runs without one")
	}
	curl, _ := exec.LookPath("curl")
	for _, doc := range curlDocs {
		t.Run(strings.ReplaceAll(doc, "/", "_"), func(t *testing.T) {
			all := steps(t, doc)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c, err := localcluster.Start(ctx, 3, "")
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := &runner{curl: curl, nodes: c.URLs(), tokens: map[string]string{}, logf: t.Logf}
			if curl == "" {
				t.Log("no curl binary: sending the requests curl would send")
			}
			for _, s := range all {
				if err := r.run(ctx, s); err != nil {
					t.Errorf("%s:%d: %v", doc, s.Line, err)
				}
			}
			// The check can fail: the first example again, expecting a
			// status no route answers (a teapot), must be reported.
			var bad Step
			for _, s := range all {
				if s.WaitFor == "" {
					bad = s
					break
				}
			}
			bad.Want = http.StatusTeapot
			if err := r.run(ctx, bad); err == nil || !strings.Contains(err.Error(), "documents 418") {
				t.Errorf("a wrong documented status was not reported: %v", err)
			}
		})
	}
}

// runner runs steps against a cluster's nodes.
type runner struct {
	curl  string   // the curl binary, "" to send the requests from Go
	nodes []string // base URLs of n1, n2, n3
	// tokens maps a fencing token a document shows in an answer to the
	// one the cluster granted, as a reader pastes the token they got.
	tokens map[string]string
	// logf logs each answer (go test -v shows them).
	logf func(format string, args ...any)
}

var (
	// docToken finds the fencing token a documented answer shows.
	docToken = regexp.MustCompile(`"?fencing_token"?\s*[:=]?\s*([0-9]+)`)
	// bodyToken finds a fencing token in a request body or an answer.
	bodyToken = regexp.MustCompile(`("fencing_token"\s*:\s*)([0-9]+)`)
)

var makeRunAddr = regexp.MustCompile(`(?:http://)?(?:127\.0\.0\.1|localhost):810([1-9])`)

// rewrite replaces make run's node addresses with the cluster's, and the
// fencing tokens the document showed with the ones the cluster granted.
func (r *runner) rewrite(args []string) ([]string, error) {
	out := make([]string, len(args))
	var err error
	for i, a := range args {
		a = bodyToken.ReplaceAllStringFunc(a, func(m string) string {
			sub := bodyToken.FindStringSubmatch(m)
			if got, ok := r.tokens[sub[2]]; ok {
				return sub[1] + got
			}
			return m
		})
		out[i] = makeRunAddr.ReplaceAllStringFunc(a, func(m string) string {
			n, _ := strconv.Atoi(m[len(m)-1:])
			if n > len(r.nodes) {
				err = fmt.Errorf("%s names node %d of a %d-node cluster", m, n, len(r.nodes))
				return m
			}
			return r.nodes[n-1]
		})
	}
	return out, err
}

// run runs one step: a curl command whose status must be the documented
// one, or a wait that reads until the answer contains a word.
func (r *runner) run(ctx context.Context, s Step) error {
	args, err := r.rewrite(s.Args)
	if err != nil {
		return err
	}
	if s.WaitFor != "" {
		return r.wait(ctx, args, s.WaitFor)
	}
	status, body, err := r.do(ctx, args)
	if err != nil {
		return err
	}
	r.logf("line %d: %d %s", s.Line, status, clip(body))
	if status != s.Want {
		return fmt.Errorf("answered %d, the doc documents %d: curl %s\n  answer: %s", status, s.Want, quote(args), clip(body))
	}
	if doc, got := docToken.FindStringSubmatch(s.Answer), bodyToken.FindStringSubmatch(body); doc != nil && got != nil {
		r.tokens[doc[1]] = got[2]
	}
	return nil
}

// wait reads until the answer contains word, as the doc's until-loop does.
func (r *runner) wait(ctx context.Context, args []string, word string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		_, body, err := r.do(ctx, args)
		if err == nil && strings.Contains(body, word) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited for %q in the answer of curl %s: %w (last answer: %s)", word, quote(args), ctx.Err(), clip(body))
		case <-tick.C:
		}
	}
}

// do runs curl (or sends the request it would) and returns the status and
// body.
func (r *runner) do(ctx context.Context, args []string) (int, string, error) {
	if r.curl == "" {
		return send(ctx, args)
	}
	out, err := os.CreateTemp("", "doccheck-body-")
	if err != nil {
		return 0, "", err
	}
	out.Close()
	defer os.Remove(out.Name())
	cmd := exec.CommandContext(ctx, r.curl, append(append([]string{}, args...),
		"--silent", "--max-time", "30", "--output", out.Name(), "--write-out", "%{http_code}")...)
	code, err := cmd.Output()
	body, _ := os.ReadFile(out.Name())
	status, convErr := strconv.Atoi(strings.TrimSpace(string(code)))
	if convErr != nil || status == 0 {
		return 0, string(body), fmt.Errorf("curl %s: no answer (%v)", quote(args), err)
	}
	return status, string(body), nil
}

// send sends the request curl would send for args.
func send(ctx context.Context, args []string) (int, string, error) {
	cr, err := CurlRequest(args)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, cr.Method, cr.URL, strings.NewReader(cr.Body))
	if err != nil {
		return 0, "", fmt.Errorf("request: %w", err)
	}
	req.Header = cr.Header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: %w", cr.Method, cr.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("%s %s: read answer: %w", cr.Method, cr.URL, err)
	}
	return resp.StatusCode, string(body), nil
}

// quote writes args as a shell would need them.
func quote(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " '\"{}$&|;<>()*?#") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}

// clip shortens an answer for a log line.
func clip(s string) string {
	if len(s) > 240 {
		return s[:240] + "…"
	}
	return s
}
