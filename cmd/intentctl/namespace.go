package main

import (
	"context"
	"fmt"

	"github.com/intentledger/intentd/client"
)

// cmdNamespace is "namespace usage [NS]": what a namespace holds and its
// quota (NS: the API key's own namespace by default; another needs admin).
func cmdNamespace(ctx context.Context, c *cli, args []string) error {
	sub, rest, fs := c.subcommandFlags("namespace", args, "usage")
	if sub != "usage" {
		return usagef("namespace needs a subcommand: namespace usage [NS]")
	}
	// NS is optional: without it, the key's own namespace.
	pos, err := c.parse(fs, rest)
	if err != nil {
		if pos, err = c.parse(c.flags("namespace usage"), rest, "[NS]"); err != nil {
			return err
		}
	}
	ns := ""
	if len(pos) == 1 {
		ns = pos[0]
	}
	u, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.NamespaceUsage, error) {
		return cl.NamespaceUsage(ctx, ns)
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(u)
	}
	tw := c.table()
	fmt.Fprintf(tw, "namespace\t%s\n", u.Namespace)
	fmt.Fprintf(tw, "intents\t%s\n", ofQuota(u.Intents, u.Quota, func(q *client.NamespaceQuota) int { return q.MaxIntents }))
	fmt.Fprintf(tw, "bytes\t%d\n", u.Bytes)
	for _, st := range []string{"pending_approval", "approved", "declared", "in_doubt", "executed", "failed", "committed", "rejected"} {
		fmt.Fprintf(tw, "  %s\t%d\n", st, u.ByState[st])
	}
	rate := "none"
	if u.Quota != nil && u.Quota.ClaimsPerSecond > 0 {
		rate = fmt.Sprintf("%g/s, burst %d", u.Quota.ClaimsPerSecond, max(u.Quota.Burst, 1))
	}
	fmt.Fprintf(tw, "claims quota\t%s\n", rate)
	return tw.Flush()
}

// ofQuota writes n, and "of MAX" when the quota sets a maximum.
func ofQuota(n int, q *client.NamespaceQuota, maxOf func(*client.NamespaceQuota) int) string {
	if q == nil || maxOf(q) <= 0 {
		return fmt.Sprint(n)
	}
	return fmt.Sprintf("%d of %d", n, maxOf(q))
}
