package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/intentledger/intentd/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// statusToolDef is the definition of the gate's intentd_status tool.
func statusToolDef() *mcp.Tool {
	return &mcp.Tool{
		Name:  StatusTool,
		Title: "Status of a gated tool call",
		Description: "Read-only. The state of a tool call the gate answered pending_approval or in_doubt, by the key the answer " +
			"named: pending_approval (still waiting), approved (call the tool again with the same arguments to run it), rejected, " +
			"declared (running), executed/committed (call the tool again with the same arguments to get its result), " +
			"in_doubt (a person must resolve it), failed (calling again runs it).",
		InputSchema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"key": map[string]any{"type": "string", "description": "the key from the gate's answer (structuredContent.key)"}},
			"required":             []string{"key"},
			"additionalProperties": false,
		},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Status of a gated tool call"},
	}
}

// nextStep tells the agent what a state means for it.
var nextStep = map[client.State]string{
	client.StatePendingApproval: "Still waiting for approval. Poll again later; do not call the tool meanwhile.",
	client.StateApproved:        "Approved. Call the tool again with exactly the same arguments to run it.",
	client.StateRejected:        "Rejected by an approver. Do not call the tool for this; tell the user.",
	client.StateDeclared:        "Running under another call. Call the tool again with the same arguments later to get its result.",
	client.StateExecuted:        "Done. Call the tool again with the same arguments to get its recorded result (nothing runs again).",
	client.StateCommitted:       "Done. Call the tool again with the same arguments to get its recorded result (nothing runs again).",
	client.StateFailed:          "Failed without effect. Calling the tool again with the same arguments runs it again.",
	client.StateInDoubt:         "In doubt: whether it ran is unknown. Do not retry; a person must resolve it.",
}

// status answers intentd_status: the state of a key of this gate's scope.
func (g *Gate) status(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var in struct {
		Key string `json:"key"`
	}
	if len(req.Params.Arguments) > 0 {
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "arguments: " + err.Error()}
		}
	}
	prefix := client.KeyOf(append([]string{ledgerKeyPrefix}, g.scopeOf(req)...)...) + client.KeySeparator
	if in.Key == "" || !strings.HasPrefix(in.Key, prefix) {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams,
			Message: fmt.Sprintf("key must be a key this gate named in an answer (it starts with %q)", prefix)}
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.LedgerTimeout)
	defer cancel()
	intent, err := g.cfg.Ledger.Get(ctx, in.Key, client.GetOptions{})
	if errors.Is(err, client.ErrNotFound) {
		return answer("not_found", true, in.Key, "No call is recorded under this key (never claimed, or forgotten after the dedupe window).", nil), nil
	}
	if err != nil {
		return answer(StatusLedgerUnavailable, true, in.Key, "The ledger could not be read: "+err.Error(), map[string]any{"retryable": true}), nil
	}
	fields := map[string]any{"state": string(intent.State), "tool": intent.Tool, "updated_at": intent.UpdatedAt,
		"approvals": len(intent.Approvals), "approvals_required": intent.ApprovalsRequired, "intent_url": g.links.intent(in.Key)}
	if intent.State == client.StatePendingApproval {
		fields["approve_url"] = g.links.approve(in.Key)
	}
	if intent.State == client.StateInDoubt {
		fields["resolve_url"] = g.links.resolve(in.Key)
	}
	return answer(Status(intent.State), false, in.Key, fmt.Sprintf("State: %s. %s", intent.State, nextStep[intent.State]), fields), nil
}
