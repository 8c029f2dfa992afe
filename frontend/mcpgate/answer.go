package mcpgate

import (
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Status is the "status" word of the structuredContent of an answer the
// gate makes itself (not the upstream's): what the agent switches on.
// docs/mcp.md documents each.
type Status string

// The statuses of the gate's own answers.
const (
	StatusPendingApproval     Status = "pending_approval"
	StatusInDoubt             Status = "in_doubt"
	StatusInFlight            Status = "in_flight"
	StatusOutcomeUnknown      Status = "outcome_unknown"
	StatusLedgerUnavailable   Status = "ledger_unavailable"
	StatusRejected            Status = "rejected"
	StatusBlocked             Status = "blocked"
	StatusLedgerRefused       Status = "ledger_refused"
	StatusUpstreamUnavailable Status = "upstream_unavailable"
	StatusNeedsInput          Status = "needs_input"
	StatusExecuted            Status = "executed"
)

// ConflictCode is the "code" in the data of the JSON-RPC error a
// divergent call gets.
const ConflictCode = "idempotency_key_conflict"

// links are the ledger URLs an answer names.
type links struct{ base string }

func (l links) intent(key string) string { return l.base + "/v1/intents/" + url.PathEscape(key) }
func (l links) approve(key string) string {
	return l.intent(key) + "/approve"
}

// console is the web console's page of the intent, where a person
// approves, rejects or resolves it.
func (l links) console(key string) string { return l.base + "/ui/intent?key=" + url.QueryEscape(key) }
func (l links) resolve(key string) string {
	return l.intent(key) + "/resolve"
}

// answer is a result the gate makes: text for the model, the same facts
// in structuredContent for code, the key in _meta.
func answer(status Status, isError bool, key, text string, fields map[string]any) *mcp.CallToolResult {
	sc := map[string]any{"status": string(status), "key": key}
	for k, v := range fields {
		sc[k] = v
	}
	return &mcp.CallToolResult{
		IsError:           isError,
		Content:           []mcp.Content{&mcp.TextContent{Text: text}},
		StructuredContent: sc,
		Meta:              withMeta(nil, MetaKey, key),
	}
}

func inDoubtAnswer(l links, key, why string) *mcp.CallToolResult {
	return answer(StatusInDoubt, true, key,
		"DO NOT RETRY. "+why+" Whether the tool acted is unknown, so the gate will not run this call again: "+
			"a person must check the tool's side and resolve the intent ("+l.resolve(key)+", or "+
			"`intentctl resolve '"+key+"' --outcome executed|failed --actor WHO --reason WHY`). Tell the user; calling again returns this answer.",
		map[string]any{"retryable": false, "resolve_url": l.resolve(key), "intent_url": l.intent(key)})
}

func pendingAnswer(l links, key string, required, approvals int) *mcp.CallToolResult {
	return answer(StatusPendingApproval, false, key,
		fmt.Sprintf("This call waits for approval (%d of %d approvals); nothing was run. Poll the %s tool with key %q; "+
			"once it says approved, call this tool again with exactly the same arguments to run it. An approver decides at %s.",
			approvals, required, StatusTool, key, l.console(key)),
		map[string]any{"approve_url": l.approve(key), "console_url": l.console(key), "intent_url": l.intent(key),
			"approvals_required": required, "approvals": approvals})
}

// approvalState is the request state of an approval elicitation: a call
// that carries it is the host's call again after it showed the link, so
// the gate answers from the ledger and does not ask again. It is trusted
// for nothing else (a forged one only skips the elicitation): the ledger
// decides whether the call may run.
func approvalState(key string) string { return "dev.intentd/approval:" + key }

// approvalElicitation asks the host (URL elicitation) to show the person
// at the keyboard the page where the call is approved. Whatever the host
// answers, and whether it asked anyone at all, the gate calls the ledger
// again: the call runs only once the ledger says it was approved.
func approvalElicitation(l links, key string, required, approvals int) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{"approval": &mcp.ElicitParams{
			Mode: "url", URL: l.console(key), ElicitationID: key,
			Message: fmt.Sprintf("This tool call needs approval (%d of %d so far) before it may run. Open the link to see it; "+
				"an approver approves or rejects it there.", approvals, required),
		}},
		RequestState: approvalState(key),
	}
}

// hostElicitsURLs reports whether the host said it can show a URL
// elicitation.
func hostElicitsURLs(req *mcp.CallToolRequest) bool {
	if req == nil || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	return p != nil && p.Capabilities != nil && p.Capabilities.Elicitation != nil && p.Capabilities.Elicitation.URL != nil
}

func inFlightAnswer(key string, waited time.Duration) *mcp.CallToolResult {
	return answer(StatusInFlight, true, key,
		fmt.Sprintf("Another call with the same idempotency key is still running (waited %s). Nothing was run now. "+
			"Call again later with the same arguments (and key) to get its result.", waited.Round(time.Second)),
		map[string]any{"retryable": true, "retry_after_ms": int64(5000)})
}

func outcomeUnknownAnswer(key string, err error) *mcp.CallToolResult {
	return answer(StatusOutcomeUnknown, true, key,
		"The ledger's answer to this call's claim was lost, so whether it was claimed is unknown; the tool was not run. "+
			"Retrying with the same arguments (and key) is safe: it runs the tool once or returns its result. ("+err.Error()+")",
		map[string]any{"retryable": true})
}

func ledgerUnavailableAnswer(key string, err error) *mcp.CallToolResult {
	return answer(StatusLedgerUnavailable, true, key,
		"The idempotency ledger cannot be reached; the tool was not run. Retrying later with the same arguments (and key) is safe. ("+err.Error()+")",
		map[string]any{"retryable": true})
}

func rejectedAnswer(key string) *mcp.CallToolResult {
	return answer(StatusRejected, true, key,
		"An approver rejected this call; it was not run and will not run. Do not retry it; tell the user.",
		map[string]any{"retryable": false})
}

func blockedAnswer(key string, err error) *mcp.CallToolResult {
	return answer(StatusBlocked, true, key,
		"A ledger policy blocks this tool; the call was not run. Do not retry; tell the user. ("+err.Error()+")",
		map[string]any{"retryable": false})
}

func ledgerRefusedAnswer(key string, err error) *mcp.CallToolResult {
	return answer(StatusLedgerRefused, true, key,
		"The idempotency ledger refused this call's claim (a configuration problem of the gate); the tool was not run. ("+err.Error()+")",
		map[string]any{"retryable": false})
}

// keyReservedAnswer is ledger_refused for a claim the ledger refused with
// 403 key_reserved: the gate's own API key is misconfigured.
func keyReservedAnswer(key string, err error) *mcp.CallToolResult {
	return answer(StatusLedgerRefused, true, key,
		"The idempotency ledger refused this call's claim: keys under the gate's prefix "+LedgerKeyPrefix+" are reserved to another "+
			"API key and the gate's own key (--api-key) does not list the prefix. The tool was not run. The operator must give the "+
			"gate's key \"key_prefixes\": [\""+LedgerKeyPrefix+"\"] in the ledger's keys file (docs/mcp.md). ("+err.Error()+")",
		map[string]any{"retryable": false})
}

func upstreamUnavailableAnswer(key, upstream string) *mcp.CallToolResult {
	return answer(StatusUpstreamUnavailable, true, key,
		"The server behind this tool ("+upstream+") is not connected; nothing was sent to it. Retrying later with the same arguments (and key) is safe.",
		map[string]any{"retryable": true})
}

func needsInputAnswer(key string) *mcp.CallToolResult {
	return answer(StatusNeedsInput, true, key,
		"The tool asked for more input (a multi-round-trip request), which the gate does not relay yet; nothing was recorded as run. "+
			"Retrying runs it again.", map[string]any{"retryable": true})
}

// resolvedAnswer answers a duplicate whose result the gate did not record
// (an operator resolved the intent with a result of their own, or none).
func resolvedAnswer(key string, result json.RawMessage) *mcp.CallToolResult {
	fields := map[string]any{"retryable": false}
	text := "This call already ran (an operator settled it); nothing was run now. Do not call again."
	if len(result) > 0 {
		fields["result"] = result
		text += " Recorded result: " + string(result)
	}
	res := answer(StatusExecuted, false, key, text, fields)
	res.Meta[MetaReplayed] = true
	return res
}

// conflictError is the JSON-RPC error of a divergent call: invalid params,
// with both fingerprints in its data.
func conflictError(key, recorded, request string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{
		"code": ConflictCode, "key": key, "fingerprint": recorded, "request_fingerprint": request,
		"detail": "this idempotency key was first used with other arguments; the first call's result stays with that call. Use a new key for a new call.",
	})
	// The message says it all too: some hosts show a JSON-RPC error's
	// message and drop its data.
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
		Message: fmt.Sprintf("%s: idempotency key %q was first used with different arguments (recorded fingerprint %s, "+
			"this call's fingerprint %s); nothing was run. Use a new key for a new call.", ConflictCode, key, recorded, request),
		Data: data}
}

// badKeyError is the JSON-RPC error of a malformed explicit key.
func badKeyError(err error) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"code": "bad_idempotency_key", "detail": err.Error()})
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: data}
}
