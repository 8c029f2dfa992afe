package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
	"github.com/intentledger/intentd/ledger/ledgertest"
)

// FuzzClaimBody posts arbitrary bodies to POST /v1/intents against a fresh
// ledger: the answer is never a 5xx other than 503 and never a panic, is
// always JSON, a 4xx writes nothing, and a body that is not valid UTF-8 is
// a 400 (never decoded with U+FFFD in place of its bad bytes).
func FuzzClaimBody(f *testing.F) {
	for _, seed := range []string{
		`{"key":"k","tool":"t","owner":"o","payload":{"a":1}}`,
		`{"key":"k","tool":"t","owner":"o","payload":{"a":1},"lease_ms":1000,"policy":"p"}`,
		`{"key":"k","tool":"t","owner":"o","payload":[1,2.50,"x",null,true]}`,
		`{"key":"k","tool":"t","owner":"o","payload":1e400}`,
		`{"key":"k","tool":"t","owner":"o","lease_ms":9223372036854775807}`,
		`{"key":"","tool":"t","owner":"o"}`,
		`{"key":"\u0000","tool":"t","owner":"o"}`,
		`{"key":"k","tool":"t","owner":"o","extra":1}`,
		`{"key":"k"`,
		`null`,
		`[]`,
		`"x"`,
		``,
		`{} {}`,
		"{\"key\":\"\xff\",\"tool\":\"t\",\"owner\":\"o\"}",
		// Text that is not UTF-8, or escapes that decode to no character.
		"{\"key\":\"z\xfe\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{}}",
		"{\"key\":\"k\",\"tool\":\"t\x80\",\"owner\":\"o\",\"payload\":{}}",
		"{\"key\":\"k\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{\"a\":\"x\xff\"}}",
		"{\"key\":\"k\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{\"a\xff\":1}}",
		`{"key":"z\udc00","tool":"t","owner":"o","payload":{}}`,
		`{"key":"z\ud800","tool":"t","owner":"o","payload":{}}`,
		`{"key":"z\ud800\u0041","tool":"t","owner":"o","payload":{}}`,
		`{"key":"k","tool":"t","owner":"o","payload":["\udfff"]}`,
		`{"key":"\ud83d\ude00","tool":"t","owner":"o","payload":"\ud83d\ude00"}`,
		"{\"key\":\"z\xc0\xaf\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{}}",
		"{\"key\":\"z\xe0\x80\xaf\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{}}",
		"{\"key\":\"z\xed\xa0\x80\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{}}",
		"{\"key\":\"z\xf4\x90\x80\x80\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{}}",
		"{\"key\":\"z\uFFFD\",\"tool\":\"t\",\"owner\":\"o\",\"payload\":{}}",
	} {
		f.Add([]byte(seed))
	}
	// One server for the whole run, over a ledger that is fresh for every
	// input.
	rep := &swappable{}
	svc := ledgertest.NewService(f, rep, ledger.Config{})
	// Rate limits off: they are not what this fuzzes, and a fast run
	// would otherwise meet them.
	api := New(Config{Service: svc, Now: func() time.Time { return epoch }, RateLimits: &RateLimits{}})
	f.Fuzz(func(t *testing.T, body []byte) {
		mem := ledgertest.NewMemory(epoch)
		rep.set(mem)
		if _, err := svc.RotateKey(context.Background()); err != nil {
			t.Fatal(err)
		}
		base := mem.Proposed()
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/intents", bytes.NewReader(body))
		api.Handler().ServeHTTP(rec, req)

		status := rec.Code
		if status >= 500 && status != http.StatusServiceUnavailable {
			t.Fatalf("status %d for %q: %s", status, body, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("answer is not JSON: %q", rec.Body)
		}
		if !utf8.Valid(body) && status != http.StatusBadRequest {
			t.Fatalf("status %d for a body that is not UTF-8: %q", status, body)
		}
		switch {
		case status >= 400 && status < 500:
			if n := mem.Proposed() - base; n != 0 {
				t.Fatalf("a %d for %q wrote %d commands", status, body, n)
			}
			if ct := rec.Header().Get("Content-Type"); ct != ContentTypeProblem {
				t.Fatalf("a %d has Content-Type %q", status, ct)
			}
		case status == http.StatusCreated:
			if n := mem.Proposed() - base; n != 1 {
				t.Fatalf("a grant wrote %d commands", n)
			}
		}
	})
}

// swappable is a Replicator whose ledger a test can replace.
type swappable struct {
	mu  sync.Mutex
	mem *ledgertest.Memory
}

func (s *swappable) set(m *ledgertest.Memory) {
	s.mu.Lock()
	s.mem = m
	s.mu.Unlock()
}

func (s *swappable) get() *ledgertest.Memory {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mem
}

func (s *swappable) Propose(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	return s.get().Propose(ctx, cmd)
}

func (s *swappable) Read(ctx context.Context, c ledger.Consistency, fn func(*fsm.Machine)) error {
	return s.get().Read(ctx, c, fn)
}

func (s *swappable) WaitApplied(ctx context.Context, index uint64) error {
	return s.get().WaitApplied(ctx, index)
}

// SubscribeChanges reports nothing: no long-poll waits in the fuzz, and
// the ledger behind is replaced for every input.
func (s *swappable) SubscribeChanges(ledger.ChangeSink) func() { return func() {} }
