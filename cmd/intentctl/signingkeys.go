package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/intentledger/intentd/client"
)

// cmdKeys is "keys" (the JWKS) and "keys rotate [--force]".
func cmdKeys(ctx context.Context, c *cli, args []string) error {
	sub, rest, fs := c.subcommandFlags("keys", args, "rotate")
	force := fs.Bool("force", false, "keys rotate: drop the oldest key even if tokens it signed may still be live")
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	if *force && sub != "rotate" {
		return usagef("keys: --force goes with keys rotate")
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if sub == "rotate" {
		kid, err := cl.RotateKeyWith(ctx, client.RotateKeyOptions{Force: *force})
		if err != nil {
			return err
		}
		if c.output == "json" {
			return c.printJSON(map[string]string{"status": "ok", "kid": kid})
		}
		fmt.Fprintf(c.stdout, "rotated: new execution tokens are signed with key %s\n", kid)
		return nil
	}
	raw, err := cl.JWKS(ctx)
	if err != nil {
		return err
	}
	if c.output == "json" {
		_, err := fmt.Fprintf(c.stdout, "%s\n", bytes.TrimSpace(raw))
		return err
	}
	var set struct {
		Keys []struct {
			Kid string `json:"kid"`
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			Alg string `json:"alg"`
			Use string `json:"use"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return fmt.Errorf("keys: the server's key set is not JSON: %w", err)
	}
	tw := c.table()
	fmt.Fprintln(tw, "KID\tKTY\tCRV\tALG\tUSE")
	for _, k := range set.Keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.Kid, dash(k.Kty), dash(k.Crv), dash(k.Alg), dash(k.Use))
	}
	return tw.Flush()
}
