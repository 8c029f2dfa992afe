package main

// The gate's commands: policies, approvals, long-poll, execution tokens and
// their signing keys, the hash-chained audit log, settings, and API keys.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/intentledger/intentd/auth"
	"github.com/intentledger/intentd/client"
	"github.com/intentledger/intentd/fsm"
	"github.com/intentledger/intentd/ledger"
)

// maxWait is the longest long-poll the server accepts (ledger.MaxWait).
const maxWait = 60 * time.Second

// waitSlack is how much longer than its --wait a long-poll may take on the
// wire before intentctl gives up.
const waitSlack = 10 * time.Second

// subcommand splits "NAME SUB ARGS..." when args starts with one of subs;
// otherwise sub is "".
func subcommand(args []string, subs ...string) (sub string, rest []string) {
	if len(args) > 0 && slices.Contains(subs, args[0]) {
		return args[0], args[1:]
	}
	return "", args
}

// setFlags returns the names of the flags set on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// short cuts a hash for a table.
func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return dash(h)
}

// msCell shows a millisecond setting as a duration; zero defers to the
// default policy.
func msCell(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

func durationMS(name string, d time.Duration) (int64, error) {
	if d < 0 {
		return 0, usagef("--%s must not be negative", name)
	}
	if d > 0 && d < time.Millisecond {
		return 0, usagef("--%s: %v is less than a millisecond", name, d)
	}
	return d.Milliseconds(), nil
}

// ---- policy ----

// cmdPolicy is "policy put|get|list|delete".
func cmdPolicy(ctx context.Context, c *cli, args []string) error {
	sub, rest := subcommand(args, "put", "get", "list", "delete")
	switch sub {
	case "put":
		return policyPut(ctx, c, rest)
	case "get":
		return policyGet(ctx, c, rest)
	case "list":
		return policyList(ctx, c, rest)
	case "delete":
		return policyDelete(ctx, c, rest)
	}
	if len(args) == 0 {
		return usagef("policy needs put, get, list or delete")
	}
	return usagef("policy: unknown subcommand %q (put, get, list or delete)", args[0])
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
		p = client.Policy{Name: name, Tools: splitList(*tools), Priority: *priority, RequireApproval: *requireApproval,
			ApprovalsRequired: *approvals, Approvers: splitList(*approvers), Blocked: *blocked, MaxPayloadBytes: *maxPayload,
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
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	stored, err := cl.PutPolicy(ctx, p, *expect)
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
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	p, err := cl.Policy(ctx, pos[0])
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

func zeroDash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
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
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	ps, err := cl.Policies(ctx)
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
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := cl.DeletePolicy(ctx, pos[0]); err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]string{"status": "deleted", "policy": pos[0]})
	}
	fmt.Fprintf(c.stdout, "deleted policy %s\n", pos[0])
	return nil
}

// ---- approvals and wait ----

// cmdApprovals lists the pending_approval queue.
func cmdApprovals(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("approvals")
	limit := fs.Int("limit", 0, "page size (default: the server's, 100)")
	cursor := fs.String("cursor", "", "continue after this cursor (next_cursor of the previous page)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	page, err := cl.List(ctx, client.ListOptions{State: client.StatePendingApproval, Limit: *limit, Cursor: *cursor})
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

// cmdWait long-polls one intent.
func cmdWait(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("wait")
	after := fs.Uint64("after-version", 0, "answer once the intent's version is above this")
	wait := fs.Duration("wait", 30*time.Second, "answer after this long at the latest (at most 60s)")
	pos, err := c.parse(fs, args, "KEY")
	if err != nil {
		return err
	}
	if *wait < 0 || *wait > maxWait {
		return usagef("--wait must be between 0s and %v", maxWait)
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

// ---- execution tokens and their keys ----

// cmdToken is "token verify TOKEN [--payload JSON|@file]".
func cmdToken(ctx context.Context, c *cli, args []string) error {
	sub, rest := subcommand(args, "verify")
	if sub == "" {
		if len(args) == 0 {
			return usagef("token needs verify")
		}
		return usagef("token: unknown subcommand %q (verify)", args[0])
	}
	fs := c.flags("token verify")
	payload := fs.String("payload", "", "the payload the tool is about to act on: JSON or @file")
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
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	v, err := cl.VerifyToken(ctx, pos[0], body)
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

// cmdKeys is "keys" (the JWKS) and "keys rotate".
func cmdKeys(ctx context.Context, c *cli, args []string) error {
	sub, rest := subcommand(args, "rotate")
	name := "keys"
	if sub != "" {
		name += " " + sub
	}
	fs := c.flags(name)
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if sub == "rotate" {
		kid, err := cl.RotateKey(ctx)
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

// ---- the hash-chained audit log ----

// cmdAuditLog is "audit-log", "audit-log export" and "audit-log verify".
func cmdAuditLog(ctx context.Context, c *cli, args []string) error {
	sub, rest := subcommand(args, "export", "verify")
	switch sub {
	case "export":
		return auditExport(ctx, c, rest)
	case "verify":
		return auditVerify(ctx, c, rest)
	}
	fs := c.flags("audit-log")
	since := fs.Uint64("since", 0, "first seq to show (default: the first retained)")
	limit := fs.Int("limit", 0, "page size (default: the server's, 100)")
	ns := fs.String("namespace", "", "another namespace's log (admin; default: the caller's)")
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	if *limit < 0 {
		return usagef("--limit must not be negative")
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	page, err := cl.AuditLog(ctx, *ns, *since, *limit)
	if err != nil {
		return err
	}
	if c.output == "json" {
		// Compact, so each event's bytes are the ones its hash covers.
		enc := json.NewEncoder(c.stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(page)
	}
	h := page.Head
	fmt.Fprintf(c.stdout, "namespace %s: seq %d..%d, head hash %s, %d dropped\n", h.Namespace, h.FirstSeq, h.LastSeq, dash(h.LastHash), h.Dropped)
	tw := c.table()
	fmt.Fprintln(tw, "SEQ\tHASH\tAT\tOP\tSTATUS\tKEY\tACTOR/OWNER")
	for _, r := range page.Events {
		var ev struct {
			At     int64  `json:"at"`
			Op     string `json:"op"`
			Status string `json:"status"`
			Key    string `json:"key"`
			Owner  string `json:"owner"`
			Actor  string `json:"actor"`
		}
		if err := json.Unmarshal(r.Event, &ev); err != nil {
			fmt.Fprintf(tw, "%d\t%s\t(unreadable event: %v)\n", r.Seq, short(r.Hash), err)
			continue
		}
		who := ev.Owner
		if ev.Actor != "" {
			who = ev.Actor
		}
		at := "-"
		if ev.At != 0 {
			at = time.Unix(0, ev.At).UTC().Format(time.RFC3339Nano)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Seq, short(r.Hash), at, dash(ev.Op), dash(ev.Status), dash(ev.Key), dash(who))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != 0 {
		fmt.Fprintf(c.stdout, "next: --since %d\n", page.Next)
	}
	return nil
}

// auditExport writes the log as JSON lines: {"head":...}, then one
// client.AuditRecord per line, each event's bytes exactly as hashed. It
// stops at the head read first, so the file is the log as of that head
// and verifies against it.
func auditExport(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("audit-log export")
	since := fs.Uint64("since", 0, "first seq to export (default: the first retained)")
	ns := fs.String("namespace", "", "another namespace's log (admin; default: the caller's)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	w := bufio.NewWriter(c.stdout)
	var head *client.AuditHead
	next := *since
	for {
		page, err := cl.AuditLog(ctx, *ns, next, 0)
		if err != nil {
			return err
		}
		if head == nil {
			head = &page.Head
			first := map[string]any{"head": head}
			if *since > 0 {
				first["since"] = *since
			}
			line, err := json.Marshal(first)
			if err != nil {
				return err
			}
			w.Write(append(line, '\n'))
		}
		done := page.Next == 0
		for _, r := range page.Events {
			if r.Seq > head.LastSeq {
				done = true
				break
			}
			if bytes.ContainsAny(r.Event, "\r\n") {
				return fmt.Errorf("audit-log export: event %d holds a line break; it cannot be written as a JSON line unchanged", r.Seq)
			}
			hash, err := json.Marshal(r.Hash)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, `{"seq":%d,"hash":%s,"event":%s}`+"\n", r.Seq, hash, r.Event)
		}
		if done {
			break
		}
		if page.Next <= next {
			return fmt.Errorf("audit-log export: the server's next page (%d) does not advance past %d", page.Next, next)
		}
		next = page.Next
	}
	return w.Flush()
}

// verified is the result of an audit log verification.
type verified struct {
	Namespace string `json:"namespace"`
	Verified  int    `json:"verified"`
	FirstSeq  uint64 `json:"first_seq,omitempty"`
	LastSeq   uint64 `json:"last_seq,omitempty"`
	HeadHash  string `json:"head_hash,omitempty"`
	// Partial: the verification started after the log's first retained
	// event, anchored at the first event's own prev hash.
	Partial bool   `json:"partial,omitempty"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
}

// chainCheck runs a ChainVerifier over records in order.
type chainCheck struct {
	head client.AuditHead // the head the check starts from
	// from is the first seq asked for; above the head's first retained
	// seq, the check is partial.
	from     uint64
	v        *client.ChainVerifier
	res      verified
	hashAt   map[uint64]string // the hash at the head's last seq, once seen
	lastHash string
}

func newChainCheck(head client.AuditHead, from uint64) *chainCheck {
	return &chainCheck{head: head, from: from, res: verified{Namespace: head.Namespace}, hashAt: map[uint64]string{}}
}

// firstSeq is the first seq the check expects.
func (k *chainCheck) firstSeq() uint64 { return max(k.from, k.head.FirstSeq) }

func (k *chainCheck) add(r client.AuditRecord) error {
	if k.v == nil {
		start := k.head
		if k.from > start.FirstSeq {
			// A partial log (--since): chain from the first event's own
			// prev; the events before it are not checked.
			start.FirstSeq, start.Anchor, k.res.Partial = k.from, "", true
			if r.Seq == k.from {
				var body struct {
					Prev string `json:"prev"`
				}
				_ = json.Unmarshal(r.Event, &body) // Add reports bad JSON
				start.Anchor = body.Prev
			}
		}
		k.v = client.NewChainVerifier(start)
		k.res.FirstSeq = r.Seq
	}
	if err := k.v.Add(r); err != nil {
		return err
	}
	k.res.LastSeq, k.lastHash = r.Seq, r.Hash
	if r.Seq == k.head.LastSeq {
		k.hashAt[r.Seq] = r.Hash
	}
	return nil
}

// finish checks the chain against head (read at or after the last event).
func (k *chainCheck) finish(head client.AuditHead) error {
	if k.v == nil {
		k.res.HeadHash = head.LastHash
		return nil
	}
	n, err := k.v.Finish(head)
	k.res.Verified, k.res.HeadHash = n, k.lastHash
	return err
}

func (c *cli) printVerified(res verified, err error) error {
	res.OK = err == nil
	if err != nil {
		res.Error = err.Error()
	}
	if c.output == "json" {
		if perr := c.printJSON(res); perr != nil && err == nil {
			return perr
		}
		return err
	}
	if err != nil {
		return err
	}
	if res.Verified == 0 {
		fmt.Fprintf(c.stdout, "verified 0 events: namespace %s holds none from there on, head hash %s\n", res.Namespace, dash(res.HeadHash))
		return nil
	}
	fmt.Fprintf(c.stdout, "verified %d events, seq %d..%d, head hash %s\n", res.Verified, res.FirstSeq, res.LastSeq, res.HeadHash)
	if res.Partial {
		fmt.Fprintf(c.stdout, "(partial: from seq %d, chained from that event's own prev hash; the events before it were not checked)\n", res.FirstSeq)
	}
	return nil
}

// auditVerify recomputes the hash chain, live or from an export file.
func auditVerify(ctx context.Context, c *cli, args []string) error {
	fs := c.flags("audit-log verify")
	file := fs.String("file", "", "an export (audit-log export) to verify instead of the live log")
	since := fs.Uint64("since", 0, "live: first seq to verify (default: the first retained)")
	ns := fs.String("namespace", "", "live: another namespace's log (admin; default: the caller's)")
	if _, err := c.parse(fs, args); err != nil {
		return err
	}
	if *file != "" {
		if set := setFlags(fs); set["since"] || set["namespace"] {
			return usagef("audit-log verify: --file verifies what the file holds; --since and --namespace are for the live log")
		}
		return c.verifyFile(*file)
	}
	cl, ctx, cancel, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var k *chainCheck
	next := *since
	for {
		page, err := cl.AuditLog(ctx, *ns, next, 0)
		if err != nil {
			return err
		}
		if k == nil {
			k = newChainCheck(page.Head, *since)
		}
		for _, r := range page.Events {
			if err := k.add(r); err != nil {
				return c.printVerified(k.res, err)
			}
		}
		if page.Next == 0 {
			return c.printVerified(k.res, k.finish(page.Head))
		}
		if page.Next <= next {
			return fmt.Errorf("audit-log verify: the server's next page (%d) does not advance past %d", page.Next, next)
		}
		next = page.Next
	}
}

// maxExportLine bounds one line of an export file.
const maxExportLine = 16 << 20

// verifyFile verifies an export: the chain from its head's anchor (or, for
// a partial export, from its first event's prev), through the head's last
// event, whose hash must be the head's.
func (c *cli) verifyFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return usagef("--file: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), maxExportLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return fmt.Errorf("audit-log verify: %s: %w", name, err)
		}
		return usagef("audit-log verify: %s is empty", name)
	}
	var first struct {
		Head  *client.AuditHead `json:"head"`
		Since uint64            `json:"since"`
	}
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Head == nil {
		return usagef("audit-log verify: %s does not start with a {\"head\":...} line; is it an audit-log export?", name)
	}
	head := *first.Head
	k := newChainCheck(head, first.Since)
	for line := 2; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r client.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return c.printVerified(k.res, fmt.Errorf("%w at line %d of %s (after seq %d): not an audit record: %v", client.ErrChainBroken, line, name, k.res.LastSeq, err))
		}
		if err := k.add(r); err != nil {
			return c.printVerified(k.res, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit-log verify: %s: %w", name, err)
	}
	// The export ends at its head: an event missing at the end is a break,
	// events past it (a server-side export made while the log grew) must
	// chain through the head's last event.
	fin := head
	switch {
	case k.v == nil && head.LastSeq > 0 && k.firstSeq() <= head.LastSeq:
		return c.printVerified(k.res, fmt.Errorf("%w: %s holds no events, its head says the log holds seq %d..%d", client.ErrChainBroken, name, k.firstSeq(), head.LastSeq))
	case k.v != nil && k.res.LastSeq < head.LastSeq:
		return c.printVerified(k.res, fmt.Errorf("%w after seq %d: %s ends there, its head says the log goes to seq %d", client.ErrChainBroken, k.res.LastSeq, name, head.LastSeq))
	case k.v != nil && k.res.LastSeq > head.LastSeq:
		if h, ok := k.hashAt[head.LastSeq]; ok && h != head.LastHash {
			return c.printVerified(k.res, fmt.Errorf("%w at seq %d: hash %s, the head says %s", client.ErrChainBroken, head.LastSeq, h, head.LastHash))
		}
		fin.LastSeq, fin.LastHash = k.res.LastSeq, k.lastHash
	}
	return c.printVerified(k.res, k.finish(fin))
}

// ---- settings ----

// cmdSettings is "settings" and "settings set --audit-retention N". The
// client package has no call for /v1/settings yet, so this one speaks
// HTTP directly.
func cmdSettings(ctx context.Context, c *cli, args []string) error {
	sub, rest := subcommand(args, "set")
	name := "settings"
	if sub != "" {
		name += " " + sub
	}
	fs := c.flags(name)
	var retention *int
	if sub == "set" {
		retention = fs.Int("audit-retention", 0, "audit events each namespace keeps (0: the default)")
	}
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var st fsm.Settings
	if sub == "set" {
		if !setFlags(fs)["audit-retention"] {
			return usagef("settings set needs --audit-retention N")
		}
		if *retention < 0 || *retention > fsm.MaxAuditRetention {
			return usagef("--audit-retention must be between 0 and %d", fsm.MaxAuditRetention)
		}
		if err := c.rawCall(ctx, http.MethodPut, "/v1/settings", map[string]int{"audit_retention": *retention}, &st); err != nil {
			return err
		}
	} else if err := c.rawCall(ctx, http.MethodGet, "/v1/settings", nil, &st); err != nil {
		return err
	}
	if c.output == "json" {
		return c.printJSON(map[string]int{"audit_retention": st.AuditRetention})
	}
	ret := fmt.Sprint(st.AuditRetention)
	if st.AuditRetention == 0 {
		ret = fmt.Sprintf("0 (the default, %d)", fsm.DefaultAuditRetention)
	}
	tw := c.table()
	fmt.Fprintf(tw, "audit_retention\t%s\n", ret)
	return tw.Flush()
}

// rawCall sends one JSON request to the first node that can answer it,
// with the API key, and decodes a success into out or a problem document
// into a *client.Problem. Only for idempotent calls: a node that cannot
// answer (network error, 503) is followed by the next.
func (c *cli) rawCall(ctx context.Context, method, path string, body, out any) error {
	cl, err := c.client() // for the normalized addresses
	if err != nil {
		return err
	}
	hc, err := c.httpClient()
	if err != nil {
		return err
	}
	if hc == nil {
		hc = &http.Client{Timeout: client.DefaultHTTPTimeout}
	}
	var payload []byte
	if body != nil {
		if payload, err = json.Marshal(body); err != nil {
			return err
		}
	}
	var lastErr error
	for _, base := range cl.Addrs() {
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(payload))
		if err != nil {
			return err
		}
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.apiKey != "" {
			req.Header.Set("Authorization", "Bearer "+c.apiKey)
		}
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%w: %s %s: %w", client.ErrUnavailable, method, path, ctx.Err())
			}
			lastErr = fmt.Errorf("%w: %s %s%s: %v", client.ErrUnavailable, method, base, path, err)
			continue
		}
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			lastErr = fmt.Errorf("%w: %s %s%s: %v", client.ErrUnavailable, method, base, path, err)
			continue
		}
		if resp.StatusCode/100 == 2 {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("%s %s: the answer is not JSON: %w", method, path, err)
			}
			return nil
		}
		p := problemOf(resp, data)
		if p.Status == http.StatusServiceUnavailable || p.Status == http.StatusBadGateway || p.Status == http.StatusGatewayTimeout {
			lastErr = p
			continue
		}
		return p
	}
	return lastErr
}

// problemOf reads an error answer into a *client.Problem.
func problemOf(resp *http.Response, data []byte) *client.Problem {
	var w struct {
		Type               string         `json:"type"`
		Title              string         `json:"title"`
		Status             int            `json:"status"`
		Detail             string         `json:"detail"`
		Code               string         `json:"code"`
		Field              string         `json:"field"`
		Intent             *client.Intent `json:"intent"`
		Fingerprint        string         `json:"fingerprint"`
		RequestFingerprint string         `json:"request_fingerprint"`
		RetryAfterMS       int64          `json:"retry_after_ms"`
	}
	_ = json.Unmarshal(data, &w) // a proxy's page: the status speaks
	p := &client.Problem{Status: resp.StatusCode, Code: w.Code, Title: w.Title, Detail: w.Detail, Type: w.Type,
		Field: w.Field, Intent: w.Intent, Fingerprint: w.Fingerprint, RequestFingerprint: w.RequestFingerprint,
		RetryAfter: time.Duration(w.RetryAfterMS) * time.Millisecond}
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	if p.Code == "" {
		switch resp.StatusCode {
		case http.StatusBadRequest:
			p.Code = "bad_request"
		case http.StatusNotFound:
			p.Code = "not_found"
		case http.StatusUnauthorized:
			p.Code = "unauthenticated"
		case http.StatusForbidden:
			p.Code = "forbidden"
		case http.StatusUnprocessableEntity:
			p.Code = "unprocessable"
		case http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
			p.Code = "unavailable"
		}
	}
	return p
}

// ---- API keys ----

// cmdAPIKey is "apikey new": it makes a key offline.
func cmdAPIKey(_ context.Context, c *cli, args []string) error {
	sub, rest := subcommand(args, "new")
	if sub == "" {
		if len(args) == 0 {
			return usagef("apikey needs new")
		}
		return usagef("apikey: unknown subcommand %q (new)", args[0])
	}
	fs := c.flags("apikey new")
	name := fs.String("name", "", "the key's name, for logs and audit")
	ns := fs.String("namespace", ledger.DefaultNamespace, "the namespace the key acts in")
	rolesArg := fs.String("roles", "", "comma separated roles: agent, tool, approver, reader, admin")
	env := fs.Bool("env", false, "print the INTENTD_API_KEYS entry instead of the keys file entry")
	if _, err := c.parse(fs, rest); err != nil {
		return err
	}
	if err := required("name", *name); err != nil {
		return err
	}
	if !ledger.ValidNamespace(*ns) {
		return usagef("--namespace %q must match [a-z0-9][a-z0-9_-]{0,62}", *ns)
	}
	var roles []auth.Role
	for _, r := range splitList(*rolesArg) {
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
	entry := auth.KeyConfig{Name: *name, Namespace: *ns, Roles: roles, SHA256: sum}
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
