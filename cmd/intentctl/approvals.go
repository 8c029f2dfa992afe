package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/intentledger/intentd/client"
)

func cmdDecide(approve bool) func(context.Context, *cli, []string) error {
	name := "reject"
	if approve {
		name = "approve"
	}
	return func(ctx context.Context, c *cli, args []string) error {
		fs := c.flags(name)
		actor := fs.String("actor", "", "who decides (with --api-key: the key's name)")
		reason := fs.String("reason", "", "why")
		fingerprint := fs.String("fingerprint", "", "the fingerprint of the payload reviewed")
		pos, err := c.parse(fs, args, "KEY")
		if err != nil {
			return err
		}
		if err := c.requiredActor(*actor); err != nil {
			return err
		}
		req := client.DecisionRequest{Key: pos[0], Actor: *actor, Reason: *reason, Fingerprint: *fingerprint}
		return c.intentCall(ctx, func(ctx context.Context, cl *client.Client) (*client.IntentResponse, error) {
			if approve {
				return cl.Approve(ctx, req)
			}
			return cl.Reject(ctx, req)
		})
	}
}

// cmdApprovals lists the pending_approval queue.
func cmdApprovals(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("approvals")
	limit := fs.Int("limit", 0, "page size (default: the server's, 100)")
	cursor := fs.String("cursor", "", "continue after this cursor (next_cursor of the previous page)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	page, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.ListPage, error) {
		return cl.List(ctx, client.ListOptions{State: client.StatePendingApproval, Limit: *limit, Cursor: *cursor})
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(page)
	}
	tw := c.table()
	fmt.Fprintln(tw, "KEY\tTOOL\tAPPROVALS\tFINGERPRINT\tCREATED\tAPPROVED_BY")
	for _, in := range page.Intents {
		var by []string
		for _, a := range in.Approvals {
			by = append(by, a.Actor)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%s\t%s\n", in.Key, in.Tool, len(in.Approvals), max(in.ApprovalsRequired, 1),
			short(in.Fingerprint), timeCell(in.CreatedAt), dash(strings.Join(by, ",")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(c.stdout, "next_cursor: %s\n", page.NextCursor)
	}
	return nil
}
