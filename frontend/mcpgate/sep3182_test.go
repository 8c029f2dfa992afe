package mcpgate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func TestLiftMessage(t *testing.T) {
	const same = "" // want: the input, byte for byte
	cases := []struct {
		name, in, want string
	}{
		{"key lifted into a new _meta",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","arguments":{"order":"o1"},"idempotencyKey":"k1"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","arguments":{"order":"o1"},"idempotencyKey":"k1","_meta":{"dev.intentd/idempotencyKey":"k1"}}}`},
		{"key lifted into a null _meta",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","_meta":null,"idempotencyKey":"k1"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","_meta":{"dev.intentd/idempotencyKey":"k1"},"idempotencyKey":"k1"}}`},
		{"key merged into an existing _meta",
			`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"charge","_meta":{"progressToken":7,"claudecode/toolUseId":"toolu_1"},"idempotencyKey":"k1"}}`,
			`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"charge","_meta":{"progressToken":7,"claudecode/toolUseId":"toolu_1","dev.intentd/idempotencyKey":"k1"},"idempotencyKey":"k1"}}`},
		{"leading whitespace", " \t\r\n" + `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","idempotencyKey":"k1"}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","idempotencyKey":"k1","_meta":{"dev.intentd/idempotencyKey":"k1"}}}`},
		// A malformed key is lifted as it is, so the gate refuses it as a bad
		// key rather than silently deriving one.
		{"non-string key lifted as it is",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","idempotencyKey":12}}`,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","idempotencyKey":12,"_meta":{"dev.intentd/idempotencyKey":12}}}`},
		{"a key already in _meta wins",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","_meta":{"dev.intentd/idempotencyKey":"mine"},"idempotencyKey":"sep"}}`, same},
		{"a key already in _meta wins even when malformed",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","_meta":{"dev.intentd/idempotencyKey":""},"idempotencyKey":"sep"}}`, same},
		{"no key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","arguments":{}}}`, same},
		{"key among the arguments is an argument",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","arguments":{"idempotencyKey":"k1"}}}`, same},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"idempotencyKey":"k1"}}`, same},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"idempotencyKey":"k1"}}`, same},
		{"response", `{"jsonrpc":"2.0","id":1,"result":{"idempotencyKey":"k1"}}`, same},
		{"method not a string", `{"jsonrpc":"2.0","id":1,"method":7,"params":{"idempotencyKey":"k1"}}`, same},
		{"params not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["idempotencyKey"]}`, same},
		{"_meta not an object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":"x","idempotencyKey":"k1"}}`, same},
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"idempotencyKey":"k1"`, same},
		{"not JSON", `idempotencyKey "idempotencyKey"`, same},
		{"a string", `"idempotencyKey"`, same},
		{"empty", ``, same},
		{"blank", " \r\n", same},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := liftMessage([]byte(tc.in))
			if tc.want == same {
				if string(got) != tc.in {
					t.Errorf("changed:\n got %s\nwant %s", got, tc.in)
				}
				return
			}
			if !jsonEqual(t, got, []byte(tc.want)) {
				t.Errorf("\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestLiftMessageBatch(t *testing.T) {
	call := func(id int, key string) string {
		return `{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"charge","idempotencyKey":"` + key + `"}}`
	}
	lifted := func(id int, key string) string {
		return `{"jsonrpc":"2.0","id":` + string(rune('0'+id)) + `,"method":"tools/call","params":{"name":"charge","idempotencyKey":"` + key +
			`","_meta":{"dev.intentd/idempotencyKey":"` + key + `"}}}`
	}
	explicit := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"charge","_meta":{"dev.intentd/idempotencyKey":"mine"},"idempotencyKey":"sep"}}`
	list := `{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"idempotencyKey":"x"}}`
	bad := `"idempotencyKey"` // valid JSON, not a message: left as it is
	cases := []struct {
		name string
		in   []string
		want []string // nil: the input, byte for byte
	}{
		{"each call lifted, the rest kept", []string{call(1, "a"), list, call(2, "b"), explicit, bad},
			[]string{lifted(1, "a"), list, lifted(2, "b"), explicit, bad}},
		{"nothing to lift", []string{list, explicit, bad}, nil},
		{"empty batch", []string{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := " [" + strings.Join(tc.in, " ,\n") + "]"
			got := liftMessage([]byte(in))
			if tc.want == nil {
				if string(got) != in {
					t.Errorf("changed:\n got %s\nwant %s", got, in)
				}
				return
			}
			var batch []json.RawMessage
			if err := json.Unmarshal(got, &batch); err != nil || len(batch) != len(tc.want) {
				t.Fatalf("batch %s (%v), want %d messages", got, err, len(tc.want))
			}
			for i := range batch {
				if !jsonEqual(t, batch[i], []byte(tc.want[i])) {
					t.Errorf("message %d:\n got %s\nwant %s", i, batch[i], tc.want[i])
				}
			}
		})
	}
	for _, in := range []string{`[` + call(1, "a") + `,`, `[` + call(1, "a") + `,{"idempotencyKey":]`} {
		if got := liftMessage([]byte(in)); string(got) != in {
			t.Errorf("malformed batch %s changed to %s", in, got)
		}
	}
}

// TestLiftSEP3182Reader pins the stdio reader: each line is lifted on its
// own, line endings are kept, reads of any size see the same stream, and
// the underlying error comes after the data.
func TestLiftSEP3182Reader(t *testing.T) {
	c1 := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","idempotencyKey":"k1"}}`
	other := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	c3 := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"charge","idempotencyKey":"k3"}}`
	in := c1 + "\r\n" + other + "\n\n" + c3 // the last line has no newline
	want := string(liftMessage([]byte(c1))) + "\r\n" + other + "\n\n" + string(liftMessage([]byte(c3)))
	if strings.Contains(want, `"idempotencyKey":"k1"}}`) || !strings.Contains(want, `"dev.intentd/idempotencyKey":"k3"`) {
		t.Fatalf("the expectation lifts nothing: %s", want)
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name string
		read func(io.Reader) ([]byte, error)
	}{
		{"whole", io.ReadAll},
		{"one byte at a time", func(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.OneByteReader(r)) }},
		{"half reads", func(r io.Reader) ([]byte, error) { return io.ReadAll(iotest.HalfReader(r)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := &closeRecorder{Reader: strings.NewReader(in)}
			tr := LiftSEP3182(src, nopWriteCloser{io.Discard}).(*mcp.IOTransport)
			got, err := tc.read(tr.Reader)
			if err != nil || string(got) != want {
				t.Fatalf("read %q, %v\nwant %q", got, err, want)
			}
			if err := tr.Reader.Close(); err != nil || !src.closed {
				t.Errorf("close: %v, underlying closed %v", err, src.closed)
			}
		})
	}
	t.Run("error after the data", func(t *testing.T) {
		src := &closeRecorder{Reader: io.MultiReader(strings.NewReader(c1+"\n"+"{partial"), iotest.ErrReader(boom))}
		tr := LiftSEP3182(src, nopWriteCloser{io.Discard}).(*mcp.IOTransport)
		got, err := io.ReadAll(tr.Reader)
		if !errors.Is(err, boom) || string(got) != string(liftMessage([]byte(c1)))+"\n{partial" {
			t.Errorf("read %q, %v", got, err)
		}
		if _, err := tr.Reader.Read(make([]byte, 8)); !errors.Is(err, boom) {
			t.Errorf("read after the error: %v", err)
		}
	})
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// TestLiftSEP3182HTTP pins the HTTP wrapper: POST bodies up to the limit
// are lifted (and their length follows); anything else reaches the handler
// as it came, whole.
func TestLiftSEP3182HTTP(t *testing.T) {
	const limit = 200
	msg := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"charge","idempotencyKey":"k1"}}`
	pad := func(n int) string { // msg padded with spaces inside the object to n bytes
		return msg[:len(msg)-1] + strings.Repeat(" ", n-len(msg)) + "}"
	}
	if len(msg) >= limit {
		t.Fatal("msg is over the limit")
	}
	liftedMsg := string(liftMessage([]byte(msg)))
	cases := []struct {
		name          string
		method        string
		body          string
		contentLength int64 // 0: the body's length; -1: unknown (chunked)
		lifted        bool
	}{
		{"POST under the limit", http.MethodPost, msg, 0, true},
		{"POST at the limit", http.MethodPost, pad(limit), 0, true},
		{"POST at the limit, length unknown", http.MethodPost, pad(limit), -1, true},
		{"POST over the limit", http.MethodPost, pad(limit + 1), 0, false},
		{"POST over the limit, length unknown", http.MethodPost, pad(limit + 1), -1, false},
		{"POST far over the limit, length unknown", http.MethodPost, pad(10 * limit), -1, false},
		{"POST with nothing to lift", http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, 0, false},
		{"POST that is not JSON", http.MethodPost, `idempotencyKey`, 0, false},
		{"GET", http.MethodGet, msg, 0, false},
		{"DELETE", http.MethodDelete, msg, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var gotBody []byte
			var gotLen int64
			var gotHeader string
			h := LiftSEP3182HTTP(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var err error
				if gotBody, err = io.ReadAll(r.Body); err != nil {
					t.Errorf("read body: %v", err)
				}
				gotLen, gotHeader = r.ContentLength, r.Header.Get("Content-Length")
			}), limit)
			req := httptest.NewRequest(tc.method, "/mcp", strings.NewReader(tc.body))
			if tc.contentLength == -1 {
				// A reader that does not tell its length: net/http's client
				// sends it chunked.
				req = httptest.NewRequest(tc.method, "/mcp", io.MultiReader(strings.NewReader(tc.body)))
				req.ContentLength = -1
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			if !tc.lifted {
				if string(gotBody) != tc.body {
					t.Errorf("body changed:\n got %s\nwant %s", gotBody, tc.body)
				}
				return
			}
			if !jsonEqual(t, gotBody, []byte(liftedMsg)) {
				t.Errorf("body %s, want %s", gotBody, liftedMsg)
			}
			if gotLen != int64(len(gotBody)) || gotHeader != strconv.Itoa(len(gotBody)) {
				t.Errorf("content length %d, header %q; body %d bytes", gotLen, gotHeader, len(gotBody))
			}
		})
	}
}

// TestLiftSEP3182ThroughTheGate sends a SEP-3182 key as a raw tools/call
// over stdio and over streamable HTTP: the gate claims it as the explicit
// key, and the same key a second time (a new JSON-RPC id) is a replay.
func TestLiftSEP3182ThroughTheGate(t *testing.T) {
	h := newGateHarness(t)

	t.Run("stdio", func(t *testing.T) {
		inR, inW := io.Pipe()   // host → gate
		outR, outW := io.Pipe() // gate → host
		ss, err := h.gate.Server().Connect(context.Background(), LiftSEP3182(inR, outW), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ss.Close(); _ = inW.Close(); _ = outR.Close() })
		answers := make(chan map[string]any, 16)
		go func() {
			sc := bufio.NewScanner(outR)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var m map[string]any
				if json.Unmarshal(sc.Bytes(), &m) == nil && m["id"] != nil {
					answers <- m
				}
			}
			close(answers)
		}()
		send := func(line string) {
			t.Helper()
			if _, err := io.WriteString(inW, line+"\n"); err != nil {
				t.Fatal(err)
			}
		}
		await := func(id float64) map[string]any {
			t.Helper()
			timeout := time.After(30 * time.Second)
			for {
				select {
				case m, ok := <-answers:
					if !ok {
						t.Fatal("the gate closed the connection")
					}
					if m["id"] == id {
						return m
					}
				case <-timeout:
					t.Fatalf("no answer to %v", id)
				}
			}
		}
		send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
		await(1)
		send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		call := func(id int) string {
			return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"charge","arguments":{"order":"sep-stdio"},"idempotencyKey":"sep-1"}}`
		}
		send(call(2))
		first := resultMeta(t, await(2))
		send(call(3))
		again := resultMeta(t, await(3))
		if first[MetaKey] != "mcp:default:k:pay.charge:sep-1" || first[MetaKeySource] != string(SourceExplicit) {
			t.Errorf("first call: _meta %v", first)
		}
		if again[MetaReplayed] != true || h.up.count("sep-stdio") != 1 {
			t.Errorf("second call: _meta %v, %d effects", again, h.up.count("sep-stdio"))
		}
	})

	t.Run("http", func(t *testing.T) {
		handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.gate.Server() },
			&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
		srv := httptest.NewServer(LiftSEP3182HTTP(handler, mcp.DefaultMaxRequestBodyBytes))
		t.Cleanup(srv.Close)
		post := func(id int) map[string]any {
			t.Helper()
			body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"charge","arguments":{"order":"sep-http"},"idempotencyKey":"sep-2"}}`
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var m map[string]any
			if resp.StatusCode != http.StatusOK || json.Unmarshal(bytes.TrimSpace(b), &m) != nil {
				t.Fatalf("answer %d %s", resp.StatusCode, b)
			}
			return resultMeta(t, m)
		}
		first := post(1)
		again := post(2)
		if first[MetaKey] != "mcp:default:k:pay.charge:sep-2" || first[MetaKeySource] != string(SourceExplicit) {
			t.Errorf("first call: _meta %v", first)
		}
		if again[MetaReplayed] != true || h.up.count("sep-http") != 1 {
			t.Errorf("second call: _meta %v, %d effects", again, h.up.count("sep-http"))
		}
	})
}

// resultMeta is the _meta of a JSON-RPC answer's CallToolResult.
func resultMeta(t *testing.T, m map[string]any) map[string]any {
	t.Helper()
	res, _ := m["result"].(map[string]any)
	meta, _ := res["_meta"].(map[string]any)
	if res == nil || res["isError"] == true || meta == nil {
		t.Fatalf("answer %v", m)
	}
	return meta
}
