package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// WithAPIKey sends key as a bearer token with every request (clusters that
// run with --auth=required).
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey = key }
}

// bearerTransport adds the API key to every request, discovery probes
// included.
type bearerTransport struct {
	key  string
	base http.RoundTripper
}

func (t *bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.key)
	return t.base.RoundTrip(r)
}

// Approval is one approver's approval of a pending intent.
type Approval struct {
	Actor  string    `json:"actor"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason,omitempty"`
}

// Policy selects intents by tool pattern and sets how they are gated (see
// the README's Gate section). Zero fields defer to the default policy.
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

// Wait long-polls one intent: it answers as soon as the intent's version
// is above afterVersion (it changed, or appeared), or after wait (at most
// 60 s) with the intent as it is; ErrNotFound if it still does not exist.
// Use it to wait for an approval or for another owner's result instead of
// polling.
func (c *Client) Wait(ctx context.Context, key string, afterVersion uint64, wait time.Duration) (*Intent, error) {
	if err := needKey(key); err != nil {
		return nil, err
	}
	q := url.Values{"wait": {wait.String()}, "after_version": {strconv.FormatUint(afterVersion, 10)}}
	var out Intent
	if _, err := c.do(ctx, request{method: http.MethodGet, path: intentPath(key, ""), query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// TokenClaims are what an execution token binds.
type TokenClaims struct {
	Namespace    string `json:"ns"`
	Key          string `json:"key"`
	Fingerprint  string `json:"fp"`
	FencingToken uint64 `json:"fence"`
	Owner        string `json:"owner"`
	IssuedAt     int64  `json:"iat"`
	Expires      int64  `json:"exp"`
}

// TokenVerification is the ledger's word on an execution token.
type TokenVerification struct {
	Status string      `json:"status"`
	Valid  bool        `json:"valid"`
	Claims TokenClaims `json:"claims"`
	Intent *Intent     `json:"intent"`
}

// VerifyToken asks the ledger whether the tool may act on an execution
// token (role tool): the signature, the expiry, the binding to payload
// (nil: not checked) and to the current grant, and single use. A valid
// answer spends the token; any later verification fails with ErrTokenUsed.
// Other refusals: ErrTokenExpired, ErrTokenInvalid, ErrFenced, ErrInDoubt.
// An unknown outcome (ErrOutcomeUnknown) may have spent the token: do not
// act on it; the agent's retry of its claim brings a verdict.
func (c *Client) VerifyToken(ctx context.Context, executionToken string, payload any) (*TokenVerification, error) {
	body := map[string]any{"execution_token": executionToken}
	if payload != nil {
		raw, err := encodeJSON(payload)
		if err != nil {
			return nil, fmt.Errorf("client: verify token: %w: payload: %w", ErrBadRequest, err)
		}
		body["payload"] = raw
	}
	var out TokenVerification
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tokens/verify", body: body}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// JWKS returns the cluster's execution-token public keys as a JSON Web
// Key Set, for verifying tokens offline.
func (c *Client) JWKS(ctx context.Context) (json.RawMessage, error) {
	var out json.RawMessage
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/keys"}, &out)
	return out, err
}

// RotateKey makes the cluster sign new execution tokens with a new key
// (admin) and returns its id.
func (c *Client) RotateKey(ctx context.Context) (string, error) {
	var out struct {
		KID string `json:"kid"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/keys/rotate", body: map[string]any{}}, &out)
	return out.KID, err
}

// AuditHead describes a namespace's hash-chained audit log.
type AuditHead struct {
	Namespace string `json:"namespace"`
	FirstSeq  uint64 `json:"first_seq"`
	Anchor    string `json:"anchor"`
	LastSeq   uint64 `json:"last_seq"`
	LastHash  string `json:"last_hash"`
	Dropped   uint64 `json:"dropped"`
}

// AuditRecord is one event of the audit log: Event is the exact JSON that
// was hashed.
type AuditRecord struct {
	Seq   uint64          `json:"seq"`
	Hash  string          `json:"hash"`
	Event json.RawMessage `json:"event"`
}

// AuditLogPage is one page of the audit log.
type AuditLogPage struct {
	Head   AuditHead     `json:"head"`
	Events []AuditRecord `json:"events"`
	// Next is the since of the next page; 0 at the end.
	Next uint64 `json:"next"`
}

// AuditLog reads a page of the caller's namespace's audit log from seq
// since on (namespace, for an admin, reads another one; "" is the
// caller's).
func (c *Client) AuditLog(ctx context.Context, namespace string, since uint64, limit int) (*AuditLogPage, error) {
	q := url.Values{"since": {strconv.FormatUint(since, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if namespace != "" {
		q.Set("namespace", namespace)
	}
	var out AuditLogPage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/audit", query: q}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ErrChainBroken is a hash chain that does not verify.
var ErrChainBroken = errors.New("audit chain broken")

// ChainVerifier checks an audit log event by event, in order, the way
// intentctl audit verify does: contiguous seqs from the head's first
// retained event, each event's "prev" equal to the previous hash (the
// head's anchor first), each hash the SHA-256 of the event's raw bytes.
type ChainVerifier struct {
	prev    string
	nextSeq uint64
	n       int
}

// NewChainVerifier starts a verification at the head's first retained
// event.
func NewChainVerifier(head AuditHead) *ChainVerifier {
	return &ChainVerifier{prev: head.Anchor, nextSeq: head.FirstSeq}
}

// Add checks the next event; the error wraps ErrChainBroken and names the
// first break.
func (v *ChainVerifier) Add(r AuditRecord) error {
	var body struct {
		Seq  uint64 `json:"seq"`
		Prev string `json:"prev"`
	}
	if err := json.Unmarshal(r.Event, &body); err != nil {
		return fmt.Errorf("%w at seq %d: the event is not JSON: %v", ErrChainBroken, r.Seq, err)
	}
	sum := sha256.Sum256(r.Event)
	switch {
	case r.Seq != v.nextSeq || body.Seq != r.Seq:
		return fmt.Errorf("%w at seq %d: expected seq %d (event says %d): an event is missing or reordered", ErrChainBroken, r.Seq, v.nextSeq, body.Seq)
	case body.Prev != v.prev:
		return fmt.Errorf("%w at seq %d: prev is %s, the previous event hashes to %s", ErrChainBroken, r.Seq, body.Prev, v.prev)
	case hex.EncodeToString(sum[:]) != r.Hash:
		return fmt.Errorf("%w at seq %d: the event's bytes hash to %x, not the recorded %s: it was altered", ErrChainBroken, r.Seq, sum, r.Hash)
	}
	v.prev, v.nextSeq = r.Hash, r.Seq+1
	v.n++
	return nil
}

// Finish checks the verified chain agrees with head (read at or after the
// last page: events appended since are not an error) and returns how many
// events were verified.
func (v *ChainVerifier) Finish(head AuditHead) (int, error) {
	last := v.nextSeq - 1
	switch {
	case v.n == 0:
		return 0, nil
	case last > head.LastSeq:
		return v.n, fmt.Errorf("%w: the chain goes to seq %d beyond the head's last seq %d", ErrChainBroken, last, head.LastSeq)
	case last == head.LastSeq && v.prev != head.LastHash:
		return v.n, fmt.Errorf("%w: the chain ends at seq %d with hash %s, the head says %s", ErrChainBroken, last, v.prev, head.LastHash)
	}
	return v.n, nil
}
