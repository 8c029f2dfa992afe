package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Policy selects intents by tool pattern and sets how they are gated (see
// docs/gate.md). Zero fields defer to the default policy.
type Policy struct {
	Name              string   `json:"name"`
	Version           uint64   `json:"version,omitempty"`
	Tools             []string `json:"tools,omitempty"`
	Priority          int      `json:"priority,omitempty"`
	DedupeWindowMS    int64    `json:"dedupe_window_ms,omitempty"`
	LeaseMS           int64    `json:"lease_ms,omitempty"`
	TokenTTLMS        int64    `json:"token_ttl_ms,omitempty"`
	RequireApproval   bool     `json:"require_approval,omitempty"`
	ApprovalsRequired int      `json:"approvals_required,omitempty"`
	Approvers         []string `json:"approvers,omitempty"`
	Blocked           bool     `json:"blocked,omitempty"`
	MaxPayloadBytes   int      `json:"max_payload_bytes,omitempty"`
	// AllowSelfApproval lets the API key that claimed an intent approve
	// it (refused by default: 403 self_approval).
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
}

type policyWire struct {
	Policy
	ExpectVersion uint64 `json:"expect_version,omitempty"`
}

type policyAnswer struct {
	Policy *Policy `json:"policy"`
}

// PutPolicy creates or replaces a policy (admin). expectVersion, when not
// zero, makes it a compare-and-set: ErrInvalidState if someone changed it.
// It returns the stored policy with its new version.
func (c *Client) PutPolicy(ctx context.Context, p Policy, expectVersion uint64) (*Policy, error) {
	if p.Name == "" {
		return nil, fmt.Errorf("client: put policy: %w: name is required", ErrBadRequest)
	}
	var out policyAnswer
	_, err := c.do(ctx, request{method: http.MethodPut, path: "/v1/policies/" + url.PathEscape(p.Name),
		body: policyWire{Policy: p, ExpectVersion: expectVersion}}, &out)
	return out.Policy, err
}

// Policy reads one policy; ErrNotFound when there is none.
func (c *Client) Policy(ctx context.Context, name string) (*Policy, error) {
	var out policyAnswer
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/policies/" + url.PathEscape(name)}, &out)
	return out.Policy, err
}

// Policies reads every policy: the default first, then in matching order.
func (c *Client) Policies(ctx context.Context) ([]Policy, error) {
	var out struct {
		Policies []Policy `json:"policies"`
	}
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/policies"}, &out)
	return out.Policies, err
}

// DeletePolicy removes a policy (admin).
func (c *Client) DeletePolicy(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: http.MethodDelete, path: "/v1/policies/" + url.PathEscape(name)}, nil)
	return err
}
