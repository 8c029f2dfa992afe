// Package nodetest holds the HTTP helpers tests of whole nodes share:
// in-process nodes (node) and real processes (cmd/intentd) alike.
package nodetest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"
)

// WaitFor polls cond every 20 ms until it holds, failing the test after
// limit (a hang guard, not a performance threshold).
func WaitFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Answer is an HTTP answer with its JSON body.
type Answer struct {
	// Code is the HTTP status.
	Code int
	// Body is the decoded JSON answer (nil when it was not JSON).
	Body map[string]any
}

// Send makes one request (a JSON body unless body is nil) and decodes the
// JSON answer.
func Send(method, addr, path string, body any) (Answer, error) {
	return SendAs("", method, addr, path, body)
}

// SendAs is Send with an API key (none when apiKey is empty).
func SendAs(apiKey, method, addr, path string, body any) (Answer, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+addr+path, rd)
	if err != nil {
		return Answer{}, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return Answer{Code: resp.StatusCode, Body: out}, nil
}

// Post sends a JSON POST.
func Post(addr, path string, body any) (Answer, error) {
	return Send(http.MethodPost, addr, path, body)
}

// Get sends a GET.
func Get(addr, path string) (Answer, error) { return Send(http.MethodGet, addr, path, nil) }

// UntilDefinite sends the same request (safe: every command is
// idempotent) while the Answer is 503 or the connection fails, rotating
// through addrs from start, and reports whether an Answer came.
func UntilDefinite(method string, addrs []string, start int, path string, body any) (Answer, bool) {
	for attempt := 0; attempt < 200; attempt++ {
		a, err := Send(method, addrs[(start+attempt)%len(addrs)], path, body)
		if err == nil && a.Code != http.StatusServiceUnavailable {
			return a, true
		}
		time.Sleep(50 * time.Millisecond) // client backoff between retries
	}
	return Answer{}, false
}

// ClaimUntilDefinite claims until the Answer is definite. It may run on
// another goroutine than the test's, so it only marks the test failed.
func ClaimUntilDefinite(t *testing.T, addrs []string, start int, key, owner string) Answer {
	a, ok := UntilDefinite(http.MethodPost, addrs, start, "/v1/intents", map[string]any{
		"key": key, "tool": "test.tool", "owner": owner, "payload": map[string]any{"key": key, "n": 1}})
	if !ok {
		t.Errorf("claim %s by %s: no definite answer", key, owner)
	}
	return a
}

// GetUntilDefinite retries a read while the node answers 503.
func GetUntilDefinite(t *testing.T, addr, path string) Answer {
	a, ok := UntilDefinite(http.MethodGet, []string{addr}, 0, path, nil)
	if !ok {
		t.Errorf("GET %s: no definite answer", path)
	}
	return a
}

// IntentOf returns the intent of an answer: GET answers are the intent,
// write answers wrap it under "intent".
func IntentOf(body map[string]any) map[string]any {
	if in, ok := body["intent"].(map[string]any); ok {
		return in
	}
	return body
}
