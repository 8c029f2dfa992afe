package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"sync"
)

// NewOwner returns a fresh owner name, "host/pid/random": unique to one
// execution attempt, as the ledger requires.
func NewOwner() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return ownerPrefix() + hex.EncodeToString(b[:])
}

// ownerPrefix is "host/pid/", read once.
var ownerPrefix = sync.OnceValue(func() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return fmt.Sprintf("%s/%d/", host, os.Getpid())
})

// intentPath is the escaped path of an intent and an optional action. The
// key is escaped as one path segment, so it may hold '/', '%' or spaces.
func intentPath(key, action string) string {
	p := "/v1/intents/" + url.PathEscape(key)
	if action != "" {
		p += "/" + action
	}
	return p
}

func needKey(key string) error {
	if key == "" {
		return fmt.Errorf("client: %w: key is required", ErrBadRequest)
	}
	return nil
}

type claimWire struct {
	Key     string          `json:"key"`
	Tool    string          `json:"tool"`
	Payload json.RawMessage `json:"payload,omitempty"`
	Owner   string          `json:"owner"`
	Policy  string          `json:"policy,omitempty"`
	LeaseMS int64           `json:"lease_ms,omitempty"`
}

// Claim asks for the right to execute the effect named by req.Key. A grant
// (new: Created, or repeated to the same owner), a duplicate (the effect
// already ran: use Intent.Result) and pending_approval are answers; every
// refusal is a *Problem error (errors.Is ErrInFlight, ErrInDoubt,
// ErrDivergent, ErrRejected, ErrBadRequest ...). The claim is retried with
// the same owner, so a lost answer comes back as the same grant.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (*ClaimResponse, error) {
	if err := needKey(req.Key); err != nil {
		return nil, err
	}
	if req.Owner == "" {
		req.Owner = NewOwner()
	}
	var out ClaimResponse
	status, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/intents", body: claimWire{
		Key: req.Key, Tool: req.Tool, Payload: req.Payload, Owner: req.Owner, Policy: req.Policy,
		LeaseMS: req.Lease.Milliseconds(),
	}}, &out)
	if err != nil {
		return nil, err
	}
	out.Created = status == http.StatusCreated
	out.Owner = req.Owner
	return &out, nil
}

type completeWire struct {
	Owner        string          `json:"owner"`
	FencingToken uint64          `json:"fencing_token"`
	Outcome      Outcome         `json:"outcome"`
	Result       json.RawMessage `json:"result,omitempty"`
}

// Complete reports the outcome of the effect by its owner and fencing
// token; a stale one is refused with ErrFenced.
func (c *Client) Complete(ctx context.Context, req CompleteRequest) (*IntentResponse, error) {
	return c.intentCall(ctx, req.Key, "complete", completeWire{
		Owner: req.Owner, FencingToken: req.FencingToken, Outcome: req.Outcome, Result: req.Result,
	})
}

type renewWire struct {
	Owner        string `json:"owner"`
	FencingToken uint64 `json:"fencing_token"`
	LeaseMS      int64  `json:"lease_ms"`
}

// Renew extends the owner's lease while a long effect runs.
func (c *Client) Renew(ctx context.Context, req RenewRequest) (*IntentResponse, error) {
	return c.intentCall(ctx, req.Key, "renew", renewWire{
		Owner: req.Owner, FencingToken: req.FencingToken, LeaseMS: req.Lease.Milliseconds(),
	})
}

type commitWire struct {
	Owner string `json:"owner"`
}

// Commit acknowledges an executed intent's result (executed → committed).
func (c *Client) Commit(ctx context.Context, req CommitRequest) (*IntentResponse, error) {
	return c.intentCall(ctx, req.Key, "commit", commitWire{Owner: req.Owner})
}

type resolveWire struct {
	Outcome Outcome         `json:"outcome"`
	Result  json.RawMessage `json:"result,omitempty"`
	Actor   string          `json:"actor"`
	Reason  string          `json:"reason,omitempty"`
}

// Resolve settles an in_doubt intent as executed or failed.
func (c *Client) Resolve(ctx context.Context, req ResolveRequest) (*IntentResponse, error) {
	return c.intentCall(ctx, req.Key, "resolve", resolveWire{
		Outcome: req.Outcome, Result: req.Result, Actor: req.Actor, Reason: req.Reason,
	})
}

type decisionWire struct {
	Actor       string `json:"actor,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

// Approve approves a pending intent.
func (c *Client) Approve(ctx context.Context, req DecisionRequest) (*IntentResponse, error) {
	return c.intentCall(ctx, req.Key, "approve", decisionWire{Actor: req.Actor, Reason: req.Reason, Fingerprint: req.Fingerprint})
}

// Reject rejects a pending intent.
func (c *Client) Reject(ctx context.Context, req DecisionRequest) (*IntentResponse, error) {
	return c.intentCall(ctx, req.Key, "reject", decisionWire{Actor: req.Actor, Reason: req.Reason, Fingerprint: req.Fingerprint})
}

func (c *Client) intentCall(ctx context.Context, key, action string, body any) (*IntentResponse, error) {
	if err := needKey(key); err != nil {
		return nil, err
	}
	var out IntentResponse
	if _, err := c.do(ctx, request{method: http.MethodPost, path: intentPath(key, action), body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func consistency(stale bool) url.Values {
	if stale {
		return url.Values{"consistency": {"stale"}}
	}
	return nil
}

// Get reads one intent, linearizable unless opts.Stale; ErrNotFound when
// there is none.
func (c *Client) Get(ctx context.Context, key string, opts GetOptions) (*Intent, error) {
	if err := needKey(key); err != nil {
		return nil, err
	}
	var out Intent
	if _, err := c.do(ctx, request{method: http.MethodGet, path: intentPath(key, ""), query: consistency(opts.Stale)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// List reads a page of intents in key order.
func (c *Client) List(ctx context.Context, opts ListOptions) (*ListPage, error) {
	q := url.Values{}
	if opts.State != "" {
		q.Set("state", string(opts.State))
	}
	if opts.Prefix != "" {
		q.Set("prefix", opts.Prefix)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.Cursor != "" {
		q.Set("cursor", opts.Cursor)
	}
	if opts.Stale {
		q.Set("consistency", "stale")
	}
	var out ListPage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/intents", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Audit reads every recorded attempt on key.
func (c *Client) Audit(ctx context.Context, key string) (*AuditTrail, error) {
	if err := needKey(key); err != nil {
		return nil, err
	}
	var out AuditTrail
	if _, err := c.do(ctx, request{method: http.MethodGet, path: intentPath(key, "audit")}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
