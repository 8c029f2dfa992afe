package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// NamespaceQuota is a namespace's quota (intentd --namespace-quotas); a
// zero field is no bound.
type NamespaceQuota struct {
	ClaimsPerSecond float64 `json:"claims_per_second,omitempty"`
	Burst           int     `json:"burst,omitempty"`
	MaxIntents      int     `json:"max_intents,omitempty"`
}

// NamespaceUsage is what a namespace holds in the ledger.
type NamespaceUsage struct {
	Namespace string `json:"namespace"`
	// Intents is how many intents it holds, ByState how many in each
	// state (in_doubt and pending_approval among them).
	Intents int            `json:"intents"`
	ByState map[string]int `json:"by_state"`
	// Bytes is what its keys, payloads and results take.
	Bytes int64 `json:"bytes"`
	// Quota is its quota; nil when it has none.
	Quota *NamespaceQuota `json:"quota,omitempty"`
}

// NamespaceUsage reads what namespace ns holds and its quota; ns empty
// is the client's own namespace (its API key's). A key reads its own
// namespace, an admin any (another's is ErrUnauthorized).
func (c *Client) NamespaceUsage(ctx context.Context, ns string) (*NamespaceUsage, error) {
	if ns == "" {
		var who struct {
			Namespace string `json:"namespace"`
		}
		if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/whoami"}, &who); err != nil {
			return nil, err
		}
		if ns = who.Namespace; ns == "" {
			return nil, fmt.Errorf("client: namespace usage: the cluster did not say which namespace this key acts in")
		}
	}
	var out NamespaceUsage
	if _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/namespaces/" + url.PathEscape(ns) + "/usage"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
