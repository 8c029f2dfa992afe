package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// discoveryProbeTimeout bounds one GET /v1/cluster of a discovery.
const discoveryProbeTimeout = time.Second

// route is one immutable order of the addresses to try, with the index of
// the one that answered last.
type route struct {
	// version counts discoveries; 0 is the configured list, never
	// discovered.
	version uint64
	addrs   []string
	// leader is the discovered leader's address ("" when unknown).
	leader    string
	at        time.Time
	preferred atomic.Int32
}

// Endpoints returns the addresses in the order the next call tries them:
// the one that answered last first (the leader, once discovered), then the
// others in turn.
func (c *Client) Endpoints() []string {
	rt := c.rt.Load()
	start := int(rt.preferred.Load())
	out := make([]string, 0, len(rt.addrs))
	for i := range rt.addrs {
		out = append(out, rt.addrs[(start+i)%len(rt.addrs)])
	}
	return out
}

// Leader returns the HTTP address of the leader as last discovered, or ""
// when no discovery has named one.
func (c *Client) Leader() string { return c.rt.Load().leader }

// Discover asks the nodes for the cluster's status now and puts the leader
// first, as the client does by itself on its first call (see
// WithDiscovery). It returns the leader's address, or an error wrapping
// ErrNoLeader when no node could name one; the client then keeps the order
// it had.
func (c *Client) Discover(ctx context.Context) (string, error) {
	rt := c.rediscover(ctx, c.rt.Load())
	if rt.leader == "" {
		return "", fmt.Errorf("client: discovery: %w: no node named a leader", ErrNoLeader)
	}
	return rt.leader, nil
}

// currentRoute returns the order to try, discovering the leader first when
// the client has never done so or its knowledge is stale.
func (c *Client) currentRoute(ctx context.Context) *route {
	rt := c.rt.Load()
	if !c.discovery || (rt.version > 0 && c.now().Sub(rt.at) < c.discoveryRefresh) {
		return rt
	}
	return c.rediscover(ctx, rt)
}

// rediscover replaces seen by a freshly discovered route, unless another
// call already replaced it (then it returns that one). One discovery runs
// at a time; concurrent callers wait for it, each within its own context.
// A discovery failure still yields a new route (the same order), so a
// failing cluster is asked at most once per failed attempt.
func (c *Client) rediscover(ctx context.Context, seen *route) *route {
	for {
		c.mu.Lock()
		if cur := c.rt.Load(); cur != seen {
			c.mu.Unlock()
			return cur
		}
		if wait := c.discovering; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue // a route was stored: the check above returns it
			case <-ctx.Done():
				return c.rt.Load()
			}
		}
		done := make(chan struct{})
		c.discovering = done
		c.mu.Unlock()

		next := c.discover(ctx, seen)
		c.mu.Lock()
		c.rt.Store(next)
		c.discovering = nil
		close(done)
		c.mu.Unlock()
		return next
	}
}

// discover asks the nodes of cur, in its order, for the cluster's status
// and returns the route it implies: the leader, then the configured
// addresses, then the other members. A node that is ready wins over one
// that is not; without any answer naming a leader the order stays. It takes
// at most one probe timeout per node and half of ctx's remaining time.
func (c *Client) discover(ctx context.Context, cur *route) *route {
	next := &route{version: cur.version + 1, addrs: cur.addrs, leader: cur.leader, at: c.now()}
	next.preferred.Store(cur.preferred.Load())
	// Bound the whole discovery: one probe timeout per node, and never more
	// than half of what is left of the caller's time, which is for the call.
	budget := c.probeTimeout * time.Duration(len(cur.addrs))
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d)/2)
	}
	ctx, cancelAll := context.WithTimeout(ctx, budget)
	defer cancelAll()
	var found *route
	start := int(cur.preferred.Load())
	for i := range cur.addrs {
		base := cur.addrs[(start+i)%len(cur.addrs)]
		if ctx.Err() != nil {
			break
		}
		pctx, cancel := context.WithTimeout(ctx, c.probeTimeout)
		var st ClusterStatus
		_, _, _, err := c.once(pctx, base, request{method: http.MethodGet, path: "/v1/cluster"}, nil, &st)
		cancel()
		if err != nil {
			continue
		}
		addrs, leader, ok := c.routeFromStatus(base, &st)
		if !ok {
			continue
		}
		r := &route{version: next.version, addrs: addrs, leader: leader, at: next.at}
		if st.Ready {
			found = r
			break
		}
		if found == nil {
			found = r
		}
	}
	if found != nil {
		return found
	}
	return next
}

// routeFromStatus orders the addresses by st, the status as the node at
// base sees it: the leader first (base itself when the node is the
// leader: it is reachable by that name), then the configured addresses,
// then the other members' advertised HTTP addresses. ok is false when st
// names no reachable leader.
func (c *Client) routeFromStatus(base string, st *ClusterStatus) (addrs []string, leader string, ok bool) {
	if st.LeaderID == "" {
		return nil, "", false
	}
	scheme := "http"
	if u, err := url.Parse(base); err == nil && u.Scheme != "" {
		scheme = u.Scheme
	}
	if st.NodeID == st.LeaderID {
		leader = base
	} else {
		if st.LeaderHTTP == "" {
			return nil, "", false
		}
		a, err := normalizeAddrScheme(st.LeaderHTTP, scheme)
		if err != nil {
			return nil, "", false
		}
		leader = a
	}
	addrs = append([]string{leader}, c.seeds...)
	for _, n := range st.Nodes {
		// The answering node is reachable by the name it was asked under,
		// the leader is first already; members that left are gone.
		if n.ID == st.NodeID || n.ID == st.LeaderID || n.HTTPAddr == "" || n.Gossip == "left" || n.Gossip == "dead" {
			continue
		}
		if a, err := normalizeAddrScheme(n.HTTPAddr, scheme); err == nil {
			addrs = append(addrs, a)
		}
	}
	return dedupe(addrs), leader, true
}
