package main

import (
	"context"
	"fmt"
	"time"

	"github.com/intentledger/intentd/client"
)

// waitSlack is how much longer than its --wait a long-poll may take on the
// wire before intentctl gives up.
const waitSlack = 10 * time.Second

// cmdWait long-polls one intent.
func cmdWait(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("wait")
	after := fs.Uint64("after-version", 0, "answer once the intent's version is above this")
	wait := fs.Duration("wait", 30*time.Second, "answer after this long at the latest (at most 60s)")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	if *wait < 0 || *wait > client.MaxLongPoll {
		return usagef("--wait must be between 0s and %v", client.MaxLongPoll)
	}
	// The call takes up to --wait by design: --timeout bounds what comes
	// on top of it.
	cl, err := c.clientTimeout(max(client.DefaultHTTPTimeout, *wait+waitSlack))
	if err != nil {
		return err
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *wait+max(c.timeout, waitSlack))
		defer cancel()
	}
	in, err := cl.Wait(ctx, pos[0], *after, *wait)
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(client.IntentResponse{Status: client.StatusOK, Intent: in})
	}
	tw := c.table()
	fmt.Fprintf(tw, "changed\t%t\n", in.Version > *after)
	intentRows(tw, in)
	return tw.Flush()
}
