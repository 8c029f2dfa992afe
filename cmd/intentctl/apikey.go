package main

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/intentledger/intentd/auth"
	cmdcli "github.com/intentledger/intentd/internal/cli"
	"github.com/intentledger/intentd/internal/namespace"
)

// cmdAPIKey is "apikey new": it makes a key offline.
func cmdAPIKey(_ context.Context, c *cli, args []string) error {
	_, rest, err := needSubcommand("apikey", args, "new")
	if err != nil {
		return err
	}
	fs := c.flags("apikey new")
	name := fs.String("name", "", "the key's name, for logs and audit")
	ns := fs.String("namespace", namespace.Default, "the namespace the key acts in")
	rolesArg := fs.String("roles", "", "comma separated roles: agent, tool, approver, reconciler, reader, admin")
	tools := fs.String("tools", "", "tool keys: comma separated tool patterns whose execution tokens the key may verify (default any)")
	prefixes := fs.String("key-prefixes", "", "comma separated idempotency-key prefixes reserved to this key (a front end's: idem:, mcp:)")
	env := fs.Bool("env", false, "print the INTENTD_API_KEYS entry instead of the keys file entry")
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	if err := required("name", *name); err != nil {
		return err
	}
	if !namespace.Valid(*ns) {
		return usagef("--namespace %q must match [a-z0-9][a-z0-9_-]{0,62}", *ns)
	}
	var roles []auth.Role
	for _, r := range cmdcli.SplitList(*rolesArg) {
		role := auth.Role(r)
		if !slices.Contains(auth.Roles(), role) {
			return usagef("--roles: unknown role %q; want one or more of %v", r, auth.Roles())
		}
		if slices.Contains(roles, role) {
			return usagef("--roles: %q is listed twice", r)
		}
		roles = append(roles, role)
	}
	if len(roles) == 0 {
		return usagef("--roles is required: one or more of %v", auth.Roles())
	}
	plain, sum, err := auth.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	if auth.HashKey(plain) != sum {
		return errors.New("apikey: the key's hash does not match; not printing it")
	}
	entry := auth.KeyConfig{Name: *name, Namespace: *ns, Roles: roles, SHA256: sum,
		Tools: cmdcli.SplitList(*tools), KeyPrefixes: cmdcli.SplitList(*prefixes)}
	if *env && (len(entry.Tools) > 0 || len(entry.KeyPrefixes) > 0) {
		return usagef("apikey new: --tools and --key-prefixes need the keys file (the %s compact form has no room for them)", auth.EnvVar)
	}
	entryJSON, err := json.Marshal(entry)
	if err != nil {
		return err
	}
	// The server's own parser is the judge of the entry (the name's rules
	// live there).
	if _, err := auth.Parse([]byte(`{"keys":[` + string(entryJSON) + `]}`)); err != nil {
		return usagef("apikey new: %v", err)
	}
	var rs []string
	for _, r := range roles {
		rs = append(rs, string(r))
	}
	envEntry := fmt.Sprintf("%s:%s:%s:%s", *name, *ns, strings.Join(rs, "+"), sum)
	if c.output == "json" {
		return c.printJSON(map[string]any{"api_key": plain, "entry": entry, "env": envEntry})
	}
	fmt.Fprintf(c.stdout, "API key (shown only now; intentd keeps only its hash; give it to the caller as --api-key or INTENTCTL_API_KEY):\n  %s\n", plain)
	if *env {
		fmt.Fprintf(c.stdout, "%s entry (join entries with commas):\n  %s\n", auth.EnvVar, envEntry)
	} else {
		fmt.Fprintf(c.stdout, "keys file entry (add it to the \"keys\" list of the file --api-keys-file names):\n  %s\n", entryJSON)
	}
	return nil
}
