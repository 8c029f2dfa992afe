package main

import (
	"context"
	"fmt"

	"github.com/intentledger/intentd/client"
)

func cmdCluster(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("cluster")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	st, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.ClusterStatus, error) {
		return cl.Cluster(ctx)
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(st)
	}
	leader := "none"
	if st.LeaderID != "" {
		leader = st.LeaderID
		if st.LeaderHTTP != "" {
			leader += " (" + st.LeaderHTTP + ")"
		}
	}
	tw := c.table()
	fmt.Fprintf(tw, "answered_by\t%s (%s)\n", st.NodeID, st.State)
	fmt.Fprintf(tw, "leader\t%s\n", leader)
	fmt.Fprintf(tw, "term\t%d\n", st.Term)
	fmt.Fprintf(tw, "commit_index\t%d\n", st.CommitIndex)
	fmt.Fprintf(tw, "applied_index\t%d\n", st.AppliedIndex)
	fmt.Fprintf(tw, "last_index\t%d\n", st.LastIndex)
	fmt.Fprintf(tw, "ready\t%t\n", st.Ready)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(c.stdout)
	tw = c.table()
	fmt.Fprintln(tw, "ID\tRAFT ADDR\tHTTP ADDR\tSUFFRAGE\tGOSSIP\tLEADER")
	for _, n := range st.Nodes {
		mark := ""
		if n.Leader {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, dash(n.RaftAddr), dash(n.HTTPAddr), dash(n.Suffrage), dash(n.Gossip), mark)
	}
	return tw.Flush()
}

// cmdHealth checks every address; it fails (unavailable) unless all are
// live and ready.
func cmdHealth(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("health")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var all []client.Health
	var firstErr error
	for _, addr := range cl.Addrs() {
		h, err := cl.Health(ctx, addr)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			h = &client.Health{Addr: addr, Detail: err.Error()}
		} else if !h.Ready && firstErr == nil {
			firstErr = fmt.Errorf("%w: %s is not ready: %s", client.ErrUnavailable, addr, h.Detail)
		}
		all = append(all, *h)
	}
	if c.output == "json" {
		if err := c.printJSON(all); err != nil {
			return err
		}
	} else {
		tw := c.table()
		fmt.Fprintln(tw, "ADDR\tLIVE\tREADY\tDETAIL")
		for _, h := range all {
			fmt.Fprintf(tw, "%s\t%t\t%t\t%s\n", h.Addr, h.Live, h.Ready, dash(h.Detail))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return firstErr
}
