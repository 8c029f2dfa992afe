package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/intentledger/intentd/testkit/clienttest"
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

// rows returns the result rows of a bench's table, by level.
func rows(out string) map[string][]string {
	got := map[string][]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Split(line, "|")
		if len(f) < 9 {
			continue
		}
		if lv := strings.TrimSpace(f[1]); lv != "" && lv[0] >= '0' && lv[0] <= '9' {
			for i := range f {
				f[i] = strings.TrimSpace(f[i])
			}
			got[lv] = f
		}
	}
	return got
}

func TestBenchIdemPostsFreshKeysToAnURL(t *testing.T) {
	var mu sync.Mutex
	keys := map[string]int{}
	up := upstreamHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if r.Method != http.MethodPost || r.URL.Path != "/v1/charges" || r.Header.Get("Content-Type") != "application/json" ||
			json.NewDecoder(r.Body).Decode(&body) != nil || body["amount"] == nil {
			t.Errorf("not a proxy-shaped request: %s %s %v", r.Method, r.URL.Path, r.Header)
		}
		k := r.Header.Get("Idempotency-Key")
		mu.Lock()
		keys[k]++
		repeat := keys[k] > 1
		mu.Unlock()
		if repeat || len(k) < 3 || k[0] != '"' || k[len(k)-1] != '"' {
			w.Header().Set("Idempotency-Replayed", "true") // the bench must count this as an error
		}
		up.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"--via", "idem", "--url", srv.URL + "/v1/charges",
		"--clients", "1,4", "--duration", "200ms", "--warmup", "50ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := rows(out.String())
	for _, lv := range []string{"1", "4"} {
		f := got[lv]
		if f == nil || f[6] == "0" || f[7] != "0" || f[8] != "0" {
			t.Errorf("level %s: want ops and no errors: %q\n%s", lv, f, out.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keys) == 0 {
		t.Fatal("no request reached the server")
	}

	// A replayed answer to a fresh key is an error (two ops shared a key).
	replaying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Idempotency-Replayed", "true")
		w.WriteHeader(http.StatusCreated)
	}))
	defer replaying.Close()
	out.Reset()
	if code := run(context.Background(), []string{"--via", "idem", "--url", replaying.URL, "--clients", "1", "--duration", "100ms",
		"--warmup", "0s"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d", code)
	}
	if f := rows(out.String())["1"]; f == nil || f[7] == "0" {
		t.Errorf("replayed answers were not counted as errors: %q", f)
	}
}

func TestServeUpstreamAnswersUntilStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--serve-upstream", "127.0.0.1:0"}, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	url := strings.TrimSpace(strings.TrimPrefix(line, "intent-bench: upstream listening on "))
	resp, err := http.Post(url+"/v1/charges", "application/json", strings.NewReader(`{"amount":1}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || !json.Valid(body) {
		t.Fatalf("upstream answered %d %q", resp.StatusCode, body)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("--serve-upstream exited %d after its context ended", code)
	}
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--clients", "0"}, {"--mode", "x"}, {"--target", "x"}, {"--duration", "0s"},
		{"--via", "idem"}, {"--via", "idem", "--url", "ftp://x/y"}, {"--via", "idem", "--url", "http://x/", "--mode", "contended"},
		{"--url", "http://x/"}, {"--storm", "10", "--storm-kinds", "rude"}, {"--storm", "10", "--storm-kinds", "naive,"}} {
		if code := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); code != 2 {
			t.Errorf("run(%q) = %d, want 2", args, code)
		}
	}
}
