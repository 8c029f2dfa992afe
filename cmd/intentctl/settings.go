package main

import (
	"context"
	"fmt"

	"github.com/intentledger/intentd/client"
)

// cmdSettings is "settings" and "settings set --audit-retention N".
func cmdSettings(ctx context.Context, c *cli, args []string) error {
	sub, rest, fs := c.subcommandFlags("settings", args, "set")
	var retention *int
	if sub == "set" {
		retention = fs.Int("audit-retention", 0, "audit events each namespace keeps (0: the default)")
	}
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	if sub == "set" {
		if !setFlags(fs)["audit-retention"] {
			return usagef("settings set needs --audit-retention N")
		}
		if *retention < 0 || *retention > client.MaxAuditRetention {
			return usagef("--audit-retention must be between 0 and %d", client.MaxAuditRetention)
		}
	}
	st, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.Settings, error) {
		if sub == "set" {
			return cl.PutSettings(ctx, client.Settings{AuditRetention: *retention})
		}
		return cl.Settings(ctx)
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]int{"audit_retention": st.AuditRetention})
	}
	ret := fmt.Sprint(st.AuditRetention)
	if st.AuditRetention == 0 {
		ret = fmt.Sprintf("0 (the default, %d)", client.DefaultAuditRetention)
	}
	tw := c.table()
	fmt.Fprintf(tw, "audit_retention\t%s\n", ret)
	return tw.Flush()
}
