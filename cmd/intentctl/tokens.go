package main

import (
	"context"
	"fmt"
	"time"

	"github.com/intentledger/intentd/client"
)

// cmdToken is "token verify TOKEN [--payload JSON|@file] [--tool NAME]".
func cmdToken(ctx context.Context, c *cli, args []string) error {
	_, rest, err := needSubcommand("token", args, "verify")
	if err != nil {
		return err
	}
	fs := c.flags("token verify")
	payload := fs.String("payload", "", "the payload the tool is about to act on: JSON or @file")
	tool := fs.String("tool", "", "the tool about to act: a token granted for another tool is refused, unspent")
	pos, err := c.parse(fs, rest, "TOKEN")
	if err != nil {
		return err
	}
	raw, err := jsonArg("payload", *payload)
	if err != nil {
		return err
	}
	var body any // nil: the payload is not checked
	if raw != nil {
		body = raw
	}
	v, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.TokenVerification, error) {
		var opts []client.VerifyOption
		if *tool != "" {
			opts = append(opts, client.VerifyForTool(*tool))
		}
		return cl.VerifyToken(ctx, pos[0], body, opts...)
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(v)
	}
	unix := func(s int64) string {
		if s == 0 {
			return "-"
		}
		return time.Unix(s, 0).UTC().Format(time.RFC3339)
	}
	tw := c.table()
	for _, r := range [][2]string{
		{"status", v.Status},
		{"valid", fmt.Sprint(v.Valid)},
		{"key", v.Claims.Key},
		{"tool", dash(v.Claims.Tool)},
		{"namespace", v.Claims.Namespace},
		{"owner", dash(v.Claims.Owner)},
		{"fencing_token", fmt.Sprint(v.Claims.FencingToken)},
		{"fingerprint", v.Claims.Fingerprint},
		{"issued_at", unix(v.Claims.IssuedAt)},
		{"expires_at", unix(v.Claims.Expires)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	if v.Intent != nil {
		fmt.Fprintf(tw, "intent_state\t%s\n", v.Intent.State)
		fmt.Fprintf(tw, "tool\t%s\n", v.Intent.Tool)
	}
	return tw.Flush()
}
