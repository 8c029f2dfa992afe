package mcpgate

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordVersion is the "v" of every record the gate writes.
const recordVersion = 1

// Record is the intent's result of a gated call, as the gate records it:
// exactly one of Result (the upstream's CallToolResult, isError ones
// included), Error (a JSON-RPC error answer) or Omitted (a result too
// large for the ledger: its size and digest only).
//
//	{"v":1,"result":{"content":[{"type":"text","text":"charged"}],"structuredContent":{"id":"ch_1"}}}
//	{"v":1,"error":{"code":-32602,"message":"unknown tool \"chrage\""}}
//	{"v":1,"omitted":true,"is_error":false,"bytes":912345,"sha256":"…"}
type Record struct {
	V       int             `json:"v"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *jsonrpc.Error  `json:"error,omitempty"`
	Omitted bool            `json:"omitted,omitempty"`
	IsError bool            `json:"is_error,omitempty"`
	Bytes   int             `json:"bytes,omitempty"`
	SHA256  string          `json:"sha256,omitempty"`
}

// ErrNoRecord is returned (wrapped) by DecodeRecord for a result the gate
// did not write (an operator resolved the intent with another result, or
// none).
var ErrNoRecord = errors.New("not a result the gate recorded")

// CleanResult is the upstream's result as the gate passes it on and
// records it: its _meta without the hop's own keys (the protocol's
// io.modelcontextprotocol/* server info, anything under dev.intentd/).
func CleanResult(res *mcp.CallToolResult) *mcp.CallToolResult {
	out := *res
	out.Meta = forwardMeta(res.Meta)
	if out.Content == nil {
		out.Content = []mcp.Content{}
	}
	return &out
}

// EncodeRecord returns the record of a result (already cleaned). A record
// over maxResult bytes keeps the size and digest of the result instead.
func EncodeRecord(res *mcp.CallToolResult, maxResult int) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	rec, err := json.Marshal(Record{V: recordVersion, Result: b})
	if err != nil {
		return nil, fmt.Errorf("encode record: %w", err)
	}
	if len(rec) <= maxResult {
		return rec, nil
	}
	return omittedRecord(res.IsError, b), nil
}

// omittedRecord is the record of a result too large to keep.
func omittedRecord(isError bool, result []byte) json.RawMessage {
	sum := sha256.Sum256(result)
	rec, _ := json.Marshal(Record{V: recordVersion, Omitted: true, IsError: isError, Bytes: len(result), SHA256: hex.EncodeToString(sum[:])})
	return rec
}

// EncodeErrorRecord returns the record of a JSON-RPC error answer.
func EncodeErrorRecord(werr *jsonrpc.Error) json.RawMessage {
	rec, _ := json.Marshal(Record{V: recordVersion, Error: werr})
	return rec
}

// DecodeRecord reads an intent's result; ErrNoRecord when it is not one
// the gate wrote.
func DecodeRecord(raw json.RawMessage) (*Record, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("%w: the intent holds no result", ErrNoRecord)
	}
	var r Record
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoRecord, err)
	}
	n := 0
	for _, set := range []bool{len(r.Result) > 0, r.Error != nil, r.Omitted} {
		if set {
			n++
		}
	}
	if r.V != recordVersion || n != 1 {
		return nil, fmt.Errorf("%w: want {\"v\":1} with one of result, error, omitted", ErrNoRecord)
	}
	return &r, nil
}

// Replay returns the recorded answer: the result (marked replayed) or the
// JSON-RPC error. An omitted result comes back as a result that says so,
// with the original isError.
func (r *Record) Replay(ledgerKey string) (*mcp.CallToolResult, error) {
	switch {
	case r.Error != nil:
		werr := *r.Error
		return nil, &werr
	case r.Omitted:
		return &mcp.CallToolResult{
			IsError: r.IsError,
			Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("This call already ran; its result (%d bytes) was too large for the ledger "+
				"to keep, so it cannot be shown again. Nothing was run now. Do not call again to get it.", r.Bytes)}},
			StructuredContent: map[string]any{"status": "executed", "key": ledgerKey, "result_omitted": true, "result_bytes": r.Bytes},
			Meta:              replayMeta(nil, ledgerKey),
		}, nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil {
		return nil, fmt.Errorf("decode recorded result: %w", err)
	}
	if res.Content == nil {
		res.Content = []mcp.Content{}
	}
	res.Meta = replayMeta(res.Meta, ledgerKey)
	return &res, nil
}

// replayMeta marks a result's _meta replayed.
func replayMeta(m map[string]any, ledgerKey string) map[string]any {
	return withMeta(m, MetaReplayed, true, MetaKey, ledgerKey)
}
