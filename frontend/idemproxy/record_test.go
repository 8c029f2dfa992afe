package idemproxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	header := http.Header{
		"Content-Type":      {"application/json"},
		"Set-Cookie":        {"a=1", "b=2"},
		"Date":              {"Tue, 01 Dec 2026 10:00:00 GMT"},
		"Connection":        {"close, X-Hop"},
		"X-Hop":             {"dropped: named by Connection"},
		"Keep-Alive":        {"timeout=5"},
		"Transfer-Encoding": {"chunked"},
		"X-Request-Id":      {"r-1"},
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"json", []byte(`{"id":"ch_1",  "amount": 1299}` + "\n")},
		{"text with escapes", []byte("line \"1\"\n<b>&</b>\t\\\u2028")},
		{"binary", []byte{0x00, 0xff, 0xfe, 'a', 0x80}},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := header.Clone()
			h.Set("Content-Length", strconv.Itoa(len(tc.body)))
			raw, err := EncodeRecord(201, h, tc.body, int64(len(tc.body)), DefaultMaxResult)
			if err != nil {
				t.Fatal(err)
			}
			// The ledger stores the result compacted (fsm): the record must
			// survive that unchanged.
			var compact bytes.Buffer
			if err := json.Compact(&compact, raw); err != nil {
				t.Fatal(err)
			}
			rec, err := DecodeRecord(compact.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			if err := rec.Replay(w); err != nil {
				t.Fatal(err)
			}
			if w.Code != 201 || !bytes.Equal(w.Body.Bytes(), tc.body) {
				t.Errorf("replay: %d %q, want 201 %q", w.Code, w.Body.Bytes(), tc.body)
			}
			got := w.Header()
			for _, name := range []string{"Connection", "X-Hop", "Keep-Alive", "Transfer-Encoding", HeaderBodyOmitted} {
				if got.Get(name) != "" {
					t.Errorf("replayed header %s: %q", name, got.Get(name))
				}
			}
			for _, name := range []string{"Content-Type", "Date", "X-Request-Id", "Content-Length"} {
				if got.Get(name) != h.Get(name) {
					t.Errorf("header %s: %q, want %q", name, got.Get(name), h.Get(name))
				}
			}
			if strings.Join(got.Values("Set-Cookie"), "|") != "a=1|b=2" {
				t.Errorf("Set-Cookie lines: %q", got.Values("Set-Cookie"))
			}
			if got.Get(HeaderReplayed) != "true" || got.Get(HeaderStripeReplayed) != "true" {
				t.Errorf("replay marks: %v", got)
			}
		})
	}
}

func TestRecordOmitsABodyOverTheCap(t *testing.T) {
	const max = 4096
	body := bytes.Repeat([]byte("x"), max) // fits as bytes, not with its envelope
	h := http.Header{"Content-Type": {"text/plain"}, "Content-Length": {strconv.Itoa(len(body))}}
	for _, kept := range [][]byte{body, nil} { // kept whole but too large once encoded; not kept at all (over the tee's cap)
		raw, err := EncodeRecord(200, h, kept, int64(len(body)), max)
		if err != nil || len(raw) > max {
			t.Fatalf("record %d bytes, %v", len(raw), err)
		}
		rec, err := DecodeRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !rec.BodyOmitted || rec.BodyBytes != int64(len(body)) {
			t.Errorf("record %+v", rec)
		}
		w := httptest.NewRecorder()
		_ = rec.Replay(w)
		if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get(HeaderBodyOmitted) != "true" ||
			w.Header().Get("Content-Length") != "" || w.Header().Get("Content-Type") != "text/plain" {
			t.Errorf("replay of an omitted body: %d %v %q", w.Code, w.Header(), w.Body.String())
		}
	}
	huge := http.Header{"X-Big": {strings.Repeat("h", max)}}
	if _, err := EncodeRecord(200, huge, nil, 0, max); err == nil {
		t.Error("headers over the cap: want an error")
	}
}

func TestDecodeRecordRefusesOtherResults(t *testing.T) {
	for _, r := range []string{``, `{"message_id":"m-1"}`, `"text"`, `{"v":1,"status":0}`, `{"v":2,"status":200}`} {
		if _, err := DecodeRecord(json.RawMessage(r)); !errors.Is(err, ErrNotRecord) {
			t.Errorf("DecodeRecord(%s) = %v, want ErrNotRecord", r, err)
		}
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		status int
		on     On5xx
		want   Recording
	}{
		{200, On5xxRetry, RecordExecuted},
		{201, On5xxInDoubt, RecordExecuted},
		{404, On5xxRetry, RecordExecuted},
		{409, On5xxInDoubt, RecordExecuted},
		{499, On5xxRecord, RecordExecuted},
		{500, On5xxRecord, RecordExecuted},
		{503, On5xxRetry, RecordFailed},
		{502, On5xxInDoubt, RecordNothing},
		{500, "", RecordExecuted},
	} {
		if got := Decide(tc.status, tc.on); got != tc.want {
			t.Errorf("Decide(%d, %q) = %v, want %v", tc.status, tc.on, got, tc.want)
		}
	}
}
