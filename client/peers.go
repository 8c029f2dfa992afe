package client

import (
	"context"
	"net/http"
	"net/url"
)

// RemovePeer asks the leader to remove server id from the cluster's Raft
// configuration (admin): the procedure for a node that died and cannot ask
// for its own removal. The leader refuses itself (a Problem with code
// "peer_is_leader": transfer leadership first), a node that is not a server
// ("unknown_peer") and a voter whose removal would leave the voters without
// a live majority ("no_live_majority"). Wipe the removed node's data
// directory before it rejoins.
func (c *Client) RemovePeer(ctx context.Context, id string) error {
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/cluster/peers/" + url.PathEscape(id) + "/remove",
		body: map[string]any{}}, nil)
	return err
}

// TransferLeadership asks the leader to hand its leadership to voter to
// ("" lets Raft pick the most up-to-date voter) and returns the leader's
// ID afterwards ("" when none was known yet). It is sent once, never
// repeated: a repeat would move leadership again.
func (c *Client) TransferLeadership(ctx context.Context, to string) (string, error) {
	body := map[string]any{}
	if to != "" {
		body["to"] = to
	}
	var out struct {
		LeaderID string `json:"leader_id"`
	}
	_, err := c.do(ctx, request{method: http.MethodPost, path: "/v1/cluster/leader/transfer", body: body, single: true}, &out)
	return out.LeaderID, err
}
