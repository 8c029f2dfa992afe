package mcpgate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sepKeyParam is the tools/call parameter SEP-3182 (Request Idempotency,
// a proposal) adds: params.idempotencyKey. The MCP SDK's CallToolParams
// has no such field and drops it, so the gate lifts it into
// _meta["dev.intentd/idempotencyKey"] before the SDK reads the message. A
// key already in _meta wins.
const sepKeyParam = "idempotencyKey"

// LiftSEP3182 returns a stdio-style transport over r and w whose incoming
// tools/call messages carry a SEP-3182 idempotencyKey in _meta, where the
// gate reads explicit keys.
func LiftSEP3182(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
	return &mcp.IOTransport{Reader: &liftReader{br: bufio.NewReader(r), c: r}, Writer: w}
}

// liftReader rewrites newline-delimited JSON-RPC messages as they are
// read.
type liftReader struct {
	br  *bufio.Reader
	c   io.Closer
	buf []byte
	err error
}

func (l *liftReader) Read(p []byte) (int, error) {
	for len(l.buf) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		line, err := l.br.ReadBytes('\n')
		l.err = err
		if len(line) > 0 {
			trimmed := bytes.TrimRight(line, "\r\n")
			l.buf = append(liftMessage(trimmed), line[len(trimmed):]...)
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

func (l *liftReader) Close() error { return l.c.Close() }

// LiftSEP3182HTTP wraps a streamable-HTTP handler: a POST body (at most
// limit bytes; larger ones pass untouched to the handler, which refuses
// them) has its tools/call messages' SEP-3182 idempotencyKey lifted into
// _meta.
func LiftSEP3182HTTP(next http.Handler, limit int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil || r.ContentLength > limit {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
		if err != nil || int64(len(body)) > limit {
			r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
			next.ServeHTTP(w, r)
			return
		}
		body = liftMessage(body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		next.ServeHTTP(w, r)
	})
}

// liftMessage returns a JSON-RPC message (or batch) with the SEP-3182 key
// of each tools/call moved into _meta; anything else, or anything it
// cannot parse, comes back unchanged.
func liftMessage(data []byte) []byte {
	t := bytes.TrimLeft(data, " \t\r\n")
	if len(t) == 0 {
		return data
	}
	if t[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(t, &batch) != nil {
			return data
		}
		changed := false
		for i, m := range batch {
			if out, err := liftOne(m); err == nil {
				batch[i], changed = out, true
			}
		}
		if !changed {
			return data
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return data
		}
		return out
	}
	out, err := liftOne(t)
	if err != nil {
		return data
	}
	return out
}

var errNothingToLift = errors.New("nothing to lift")

// liftOne lifts the key of one message, or says there is nothing to do.
func liftOne(msg []byte) (json.RawMessage, error) {
	if !bytes.Contains(msg, []byte(`"`+sepKeyParam+`"`)) {
		return nil, errNothingToLift
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, err
	}
	var method string
	if json.Unmarshal(m["method"], &method) != nil || method != "tools/call" {
		return nil, errNothingToLift
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(m["params"], &params); err != nil {
		return nil, err
	}
	key, ok := params[sepKeyParam]
	if !ok {
		return nil, errNothingToLift
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := params["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, err
		}
	}
	if _, has := meta[MetaIdempotencyKey]; has {
		return nil, errNothingToLift
	}
	meta[MetaIdempotencyKey] = key
	var err error
	if params["_meta"], err = json.Marshal(meta); err != nil {
		return nil, err
	}
	if m["params"], err = json.Marshal(params); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}
