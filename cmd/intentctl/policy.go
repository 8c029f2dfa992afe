package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/intentledger/intentd/client"
	cmdcli "github.com/intentledger/intentd/internal/cli"
)

// cmdPolicy is "policy put|get|list|delete".
func cmdPolicy(ctx context.Context, c *cli, args []string) error {
	sub, rest, err := needSubcommand("policy", args, "put", "get", "list", "delete")
	if err != nil {
		return err
	}
	switch sub {
	case "put":
		return policyPut(ctx, c, rest)
	case "get":
		return policyGet(ctx, c, rest)
	case "list":
		return policyList(ctx, c, rest)
	default: // "delete"
		return policyDelete(ctx, c, rest)
	}
}

// policyFieldFlags are the flags of "policy put" that set a policy field;
// --file excludes them.
var policyFieldFlags = []string{"tools", "priority", "dedupe-window", "lease", "token-ttl", "require-approval",
	"approvals", "approvers", "blocked", "max-payload-bytes", "allow-self-approval"}

func policyPut(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("policy put")
	tools := fs.String("tools", "", "comma separated tool patterns (path.Match), e.g. 'payments.*,refunds.*'")
	priority := fs.Int("priority", 0, "matching order: higher first, then by name")
	dedupe := fs.Duration("dedupe-window", 0, "how long a finished record blocks reuse of its key")
	lease := fs.Duration("lease", 0, "lease of a grant whose claim asks for none")
	tokenTTL := fs.Duration("token-ttl", 0, "execution token lifetime")
	requireApproval := fs.Bool("require-approval", false, "new intents wait for approval")
	approvals := fs.Int("approvals", 0, "approvals required (N of the approvers; implies --require-approval)")
	approvers := fs.String("approvers", "", "comma separated approvers allowed to decide (implies --require-approval)")
	blocked := fs.Bool("blocked", false, "refuse every claim the policy selects")
	selfApproval := fs.Bool("allow-self-approval", false, "let the API key that claimed an intent approve it (implies --require-approval)")
	maxPayload := fs.Int("max-payload-bytes", 0, "cap on the canonical payload")
	expect := fs.Uint64("expect-version", 0, "only replace the policy at this version (compare-and-set)")
	file := fs.String("file", "", "the policy as JSON (what 'policy get NAME --output json' prints)")
	pos, err := c.parse(fs, args, "NAME")
	if err != nil {
		return err
	}
	name := pos[0]
	var p client.Policy
	if *file != "" {
		set := setFlags(fs)
		for _, f := range policyFieldFlags {
			if set[f] {
				return usagef("policy put: --file and --%s exclude each other", f)
			}
		}
		if p, err = readPolicyFile(*file); err != nil {
			return err
		}
		switch {
		case p.Name == "":
			p.Name = name
		case p.Name != name:
			return usagef("policy put: %s names policy %q, not %q", *file, p.Name, name)
		}
		p.Version = 0 // the server sets it; --expect-version is the compare-and-set
	} else {
		p = client.Policy{Name: name, Tools: cmdcli.SplitList(*tools), Priority: *priority, RequireApproval: *requireApproval,
			ApprovalsRequired: *approvals, Approvers: cmdcli.SplitList(*approvers), Blocked: *blocked, MaxPayloadBytes: *maxPayload,
			AllowSelfApproval: *selfApproval}
		if p.DedupeWindowMS, err = durationMS("dedupe-window", *dedupe); err != nil {
			return err
		}
		if p.LeaseMS, err = durationMS("lease", *lease); err != nil {
			return err
		}
		if p.TokenTTLMS, err = durationMS("token-ttl", *tokenTTL); err != nil {
			return err
		}
		if p.ApprovalsRequired < 0 {
			return usagef("--approvals must not be negative")
		}
		if p.ApprovalsRequired > 0 || len(p.Approvers) > 0 || p.AllowSelfApproval {
			p.RequireApproval = true
		}
	}
	stored, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.Policy, error) {
		return cl.PutPolicy(ctx, p, *expect)
	})
	if err != nil {
		return err
	}
	return c.printPolicy(stored)
}

// readPolicyFile reads a client.Policy; unknown fields are errors, so a
// misspelt field never silently drops a restriction.
func readPolicyFile(name string) (client.Policy, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return client.Policy{}, usagef("--file: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p client.Policy
	if err := dec.Decode(&p); err != nil {
		return client.Policy{}, usagef("--file %s: not a policy: %v", name, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return client.Policy{}, usagef("--file %s: data after the policy", name)
	}
	return p, nil
}

func policyGet(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("policy get")
	pos, err := c.parse(fs, args, "NAME")
	if err != nil {
		return err
	}
	p, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.Policy, error) {
		return cl.Policy(ctx, pos[0])
	})
	if err != nil {
		return err
	}
	return c.printPolicy(p)
}

func (c *cli) printPolicy(p *client.Policy) error {
	if p == nil {
		return errors.New("the server answered without a policy")
	}
	if c.output == "json" {
		return c.printJSON(p)
	}
	approvers := strings.Join(p.Approvers, ",")
	tw := c.table()
	for _, r := range [][2]string{
		{"name", p.Name},
		{"version", fmt.Sprint(p.Version)},
		{"tools", dash(strings.Join(p.Tools, ","))},
		{"priority", fmt.Sprint(p.Priority)},
		{"dedupe_window", msCell(p.DedupeWindowMS)},
		{"lease", msCell(p.LeaseMS)},
		{"token_ttl", msCell(p.TokenTTLMS)},
		{"require_approval", fmt.Sprint(p.RequireApproval)},
		{"allow_self_approval", fmt.Sprint(p.AllowSelfApproval)},
		{"approvals_required", approvalsCell(p)},
		{"approvers", dash(approvers)},
		{"blocked", fmt.Sprint(p.Blocked)},
		{"max_payload_bytes", zeroDash(p.MaxPayloadBytes)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}

// approvalsCell is N of an approval policy ("-" without approval).
func approvalsCell(p *client.Policy) string {
	if !p.RequireApproval {
		return "-"
	}
	n := max(p.ApprovalsRequired, 1)
	if len(p.Approvers) > 0 {
		return fmt.Sprintf("%d of %d", n, len(p.Approvers))
	}
	return fmt.Sprint(n)
}

func policyList(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("policy list")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	ps, err := call(ctx, c, func(ctx context.Context, cl *client.Client) ([]client.Policy, error) {
		return cl.Policies(ctx)
	})
	if err != nil {
		return err
	}
	if c.output == "json" {
		if ps == nil {
			ps = []client.Policy{}
		}
		return c.printJSON(map[string]any{"policies": ps})
	}
	tw := c.table()
	fmt.Fprintln(tw, "NAME\tVERSION\tPRIORITY\tTOOLS\tAPPROVALS\tBLOCKED\tLEASE\tTOKEN_TTL\tDEDUPE\tMAX_PAYLOAD")
	for i := range ps {
		p := &ps[i]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%t\t%s\t%s\t%s\t%s\n", p.Name, p.Version, p.Priority, dash(strings.Join(p.Tools, ",")),
			approvalsCell(p), p.Blocked, msCell(p.LeaseMS), msCell(p.TokenTTLMS), msCell(p.DedupeWindowMS), zeroDash(p.MaxPayloadBytes))
	}
	return tw.Flush()
}

func policyDelete(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("policy delete")
	pos, err := c.parse(fs, args, "NAME")
	if err != nil {
		return err
	}
	if _, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (any, error) {
		return nil, cl.DeletePolicy(ctx, pos[0])
	}); err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]string{"status": "deleted", "policy": pos[0]})
	}
	fmt.Fprintf(c.stdout, "deleted policy %s\n", pos[0])
	return nil
}
