package main

import (
	"context"
	"fmt"
)

// cmdPeer is "peer remove ID": the leader removes server ID from the Raft
// configuration (a dead node that cannot ask for its own removal).
func cmdPeer(ctx context.Context, c *cli, args []string) error {
	_, rest, err := needSubcommand("peer", args, "remove")
	if err != nil {
		return err
	}
	fs := c.flags("peer remove")
	pos, err := c.parse(fs, rest, "ID")
	if err != nil {
		return err
	}
	id := pos[0]
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := cl.RemovePeer(ctx, id); err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]string{"status": "removed", "id": id})
	}
	fmt.Fprintf(c.stdout, "removed %s from the cluster; wipe its data directory before it rejoins\n", id)
	return nil
}

// cmdLeader is "leader transfer [--to ID]": the leader hands its
// leadership to voter ID, or to the most up-to-date voter.
func cmdLeader(ctx context.Context, c *cli, args []string) error {
	_, rest, err := needSubcommand("leader", args, "transfer")
	if err != nil {
		return err
	}
	fs := c.flags("leader transfer")
	to := fs.String("to", "", "the voter to hand leadership to (default: the most up-to-date voter)")
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	leader, err := cl.TransferLeadership(ctx, *to)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]string{"status": "transferred", "leader_id": leader})
	}
	if leader == "" {
		leader = "not yet known"
	}
	fmt.Fprintf(c.stdout, "leadership transferred; the leader is %s\n", leader)
	return nil
}
