package main

import (
	"context"
	"fmt"

	"github.com/intentledger/intentd/client"
)

func cmdClaim(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("claim")
	tool := fs.String("tool", "", "the tool (destination) of the effect")
	payload := fs.String("payload", "", "the effect's payload: JSON or @file")
	owner := fs.String("owner", "", "the owner of this attempt (default: a fresh host/pid/random)")
	lease := fs.Duration("lease", 0, "lease length (default: the server's, 30s)")
	policy := fs.String("policy", "", "policy name")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	if err := required("tool", *tool); err != nil {
		return err
	}
	if err := required("payload", *payload); err != nil {
		return err
	}
	p, err := jsonArg("payload", *payload)
	if err != nil {
		return err
	}
	if *lease < 0 {
		return usagef("--lease must not be negative")
	}
	resp, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.ClaimResponse, error) {
		return cl.Claim(ctx, client.ClaimRequest{Key: pos[0], Tool: *tool, Payload: p, Owner: *owner, Policy: *policy, Lease: *lease})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(resp)
	}
	status := string(resp.Status)
	if resp.Created {
		status += " (new)"
	}
	tw := c.table()
	fmt.Fprintf(tw, "status\t%s\n", status)
	fmt.Fprintf(tw, "claimed_as\t%s\n", resp.Owner)
	if resp.ExecutionToken != "" {
		fmt.Fprintf(tw, "execution_token\t%s\n", resp.ExecutionToken)
	}
	intentRows(tw, resp.Intent)
	return tw.Flush()
}

func cmdComplete(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("complete")
	owner, token := holderFlags(fs)
	outcome := fs.String("outcome", "", "executed or failed")
	result := fs.String("result", "", "the effect's result: JSON or @file")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	if err := requireHolder(*owner, *token); err != nil {
		return err
	}
	o, err := outcomeArg(*outcome)
	if err != nil {
		return err
	}
	r, err := jsonArg("result", *result)
	if err != nil {
		return err
	}
	return c.intentCall(ctx, func(ctx context.Context, cl *client.Client) (*client.IntentResponse, error) {
		return cl.Complete(ctx, client.CompleteRequest{Key: pos[0], Owner: *owner, FencingToken: *token, Outcome: o, Result: r})
	})
}

func cmdRenew(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("renew")
	owner, token := holderFlags(fs)
	lease := fs.Duration("lease", 0, "the new lease length, from now")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	if err := requireHolder(*owner, *token); err != nil {
		return err
	}
	if *lease <= 0 {
		return usagef("--lease is required and must be positive")
	}
	return c.intentCall(ctx, func(ctx context.Context, cl *client.Client) (*client.IntentResponse, error) {
		return cl.Renew(ctx, client.RenewRequest{Key: pos[0], Owner: *owner, FencingToken: *token, Lease: *lease})
	})
}

func cmdCommit(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("commit")
	owner := fs.String("owner", "", "the owner that executed the effect")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	if err := required("owner", *owner); err != nil {
		return err
	}
	return c.intentCall(ctx, func(ctx context.Context, cl *client.Client) (*client.IntentResponse, error) {
		return cl.Commit(ctx, client.CommitRequest{Key: pos[0], Owner: *owner})
	})
}

func cmdResolve(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("resolve")
	outcome := fs.String("outcome", "", "executed or failed")
	result := fs.String("result", "", "the effect's result: JSON or @file")
	actor := fs.String("actor", "", "who checked the tool's side (with --api-key: the key's name)")
	reason := fs.String("reason", "", "what the check found")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	o, err := outcomeArg(*outcome)
	if err != nil {
		return err
	}
	if err := c.requiredActor(*actor); err != nil {
		return err
	}
	if err := required("reason", *reason); err != nil {
		return err
	}
	r, err := jsonArg("result", *result)
	if err != nil {
		return err
	}
	return c.intentCall(ctx, func(ctx context.Context, cl *client.Client) (*client.IntentResponse, error) {
		return cl.Resolve(ctx, client.ResolveRequest{Key: pos[0], Outcome: o, Result: r, Actor: *actor, Reason: *reason})
	})
}

// intentCall runs a call that answers with one intent and prints it.
func (c *cli) intentCall(ctx context.Context, fn func(context.Context, *client.Client) (*client.IntentResponse, error)) error {
	resp, err := call(ctx, c, fn)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(resp)
	}
	tw := c.table()
	fmt.Fprintf(tw, "status\t%s\n", resp.Status)
	intentRows(tw, resp.Intent)
	return tw.Flush()
}

func cmdGet(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("get")
	stale := fs.Bool("stale", false, "read the answering node's replica, possibly behind")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	in, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.Intent, error) {
		return cl.Get(ctx, pos[0], client.GetOptions{Stale: *stale})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(client.IntentResponse{Status: client.StatusOK, Intent: in})
	}
	tw := c.table()
	intentRows(tw, in)
	return tw.Flush()
}

func cmdList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("list")
	state := fs.String("state", "", "only intents in this state")
	prefix := fs.String("prefix", "", "only keys with this prefix")
	limit := fs.Int("limit", 0, "page size (default: the server's, 100)")
	cursor := fs.String("cursor", "", "continue after this cursor (next_cursor of the previous page)")
	stale := fs.Bool("stale", false, "read the answering node's replica, possibly behind")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	page, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.ListPage, error) {
		return cl.List(ctx, client.ListOptions{State: client.State(*state), Prefix: *prefix, Limit: *limit, Cursor: *cursor, Stale: *stale})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(page)
	}
	tw := c.table()
	fmt.Fprintln(tw, "KEY\tSTATE\tOWNER\tTOKEN\tGEN\tTOOL\tUPDATED")
	for _, in := range page.Intents {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", in.Key, in.State, dash(in.Owner), in.FencingToken, in.Generation,
			in.Tool, timeCell(in.UpdatedAt))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(c.stdout, "next_cursor: %s\n", page.NextCursor)
	}
	return nil
}

// cmdAudit is "audit KEY" (the key's trail) and "audit verify FILE|-"
// (an export's hash chain, offline: auditverify.go). A key named verify
// reads as "audit -- verify".
func cmdAudit(ctx context.Context, c *cli, args []string) error {
	if sub, rest := subcommand(args, "verify"); sub != "" {
		return auditVerifyExport(c, rest)
	}
	fs := c.flags("audit")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	trail, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.AuditTrail, error) {
		return cl.Audit(ctx, pos[0])
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(trail)
	}
	if trail.Dropped > 0 {
		fmt.Fprintf(c.stdout, "(%d older events dropped)\n", trail.Dropped)
	}
	tw := c.table()
	fmt.Fprintln(tw, "INDEX\tAT\tOP\tSTATUS\tSTATE\tOWNER/ACTOR\tTOKEN\tOUTCOME\tREASON")
	for _, ev := range trail.Events {
		who := ev.Owner
		if ev.Actor != "" {
			who = ev.Actor
		}
		token := "-"
		if ev.FencingToken != 0 {
			token = fmt.Sprint(ev.FencingToken)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ev.Index, timeCell(ev.At), ev.Op, ev.Status, ev.State,
			dash(who), token, dash(string(ev.Outcome)), dash(ev.Reason))
	}
	return tw.Flush()
}
