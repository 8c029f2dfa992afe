// Command intentctl is the command line client of an intentd cluster: it
// claims, completes and resolves intents, reads them and their audit
// trails, and shows the cluster's status; it manages the gate (policies,
// approvals, execution tokens and their keys, the hash-chained audit log,
// settings) and makes API keys and key-encryption keys. It speaks only
// the HTTP API, through the client package (settings directly: the client
// has no call for them yet).
// Run "intentctl help" for usage and exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/intentledger/intentd/client"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Exit codes; "intentctl help" documents them.
const (
	exitOK           = 0 // granted, duplicate, ok, pending_approval
	exitError        = 1 // any other error
	exitUsage        = 2 // usage or bad input (400, 413, 422 except divergent)
	exitInFlight     = 3
	exitDivergent    = 4
	exitInDoubt      = 5
	exitFenced       = 6
	exitNotFound     = 7
	exitUnavailable  = 8  // 503, network errors, outcome unknown
	exitRefused      = 9  // rejected, blocked or invalid state
	exitUnauthorized = 10 // 401, 403 forbidden, not an approver
	exitTokenRefused = 11 // execution token used, expired or invalid
	exitChainBroken  = 12 // audit log hash chain does not verify
)

// defaultAddr is used when neither --addr nor INTENTCTL_ADDR is set.
const defaultAddr = "http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103,http://127.0.0.1:8100"

const usageText = `intentctl: the intent ledger's command line client

Usage:
  intentctl [global flags] COMMAND [ARGS] [flags]

Commands:
  claim KEY --tool T --payload JSON|@file [--owner O] [--lease 30s] [--policy P]
        ask for the right to execute the effect named by KEY; prints the grant
        (fencing token, execution token) or the recorded outcome (duplicate).
        The owner defaults to a fresh host/pid/random name: keep it to complete.
  complete KEY --owner O --token N --outcome executed|failed [--result JSON|@file]
        report the effect's outcome as the lease holder
  renew KEY --owner O --token N --lease D
        extend the holder's lease while the effect runs
  commit KEY --owner O
        acknowledge an executed intent's result
  resolve KEY --outcome executed|failed --actor A --reason R [--result JSON|@file]
        settle an in_doubt intent after checking the tool's side
  approve KEY --actor A [--reason R] [--fingerprint FP]
  reject KEY --actor A [--reason R] [--fingerprint FP]
        decide a pending intent. --fingerprint binds the decision to the
        payload you reviewed: a different payload is refused (exit 4). With
        --api-key the server takes the actor from the key and --actor is
        optional (likewise for resolve)
  approvals [--limit N] [--cursor C]
        the intents waiting for approval: key, tool, approvals n/N,
        fingerprint (short; "get KEY" shows it whole), creation time
  wait KEY [--after-version V] [--wait 30s]
        long-poll: print the intent as soon as its version is above V (it
        changed, or appeared), or after --wait (at most 60s) as it is
  get KEY [--stale]
        read one intent (linearizable; --stale reads the answering node)
  list [--state S] [--prefix P] [--limit N] [--cursor C] [--stale]
        list intents in key order, a page at a time
  audit KEY
        every recorded attempt on KEY
  policy put NAME [--tools 'payments.*,refunds.*'] [--priority N]
        [--dedupe-window 24h] [--lease 30s] [--token-ttl 15m]
        [--require-approval] [--approvals N] [--approvers a,b,c] [--allow-self-approval] [--blocked]
        [--max-payload-bytes N] [--expect-version V]
  policy put NAME --file policy.json [--expect-version V]
        create or replace (whole) the policy NAME (admin); --approvals and
        --approvers imply --require-approval; --expect-version makes it a
        compare-and-set (exit 9 if the policy changed meanwhile)
  policy get NAME
  policy list
        the policies: the default first, then in matching order
  policy delete NAME
  token verify TOKEN [--payload JSON|@file]
        the tool side's check of an execution token (role tool): signed,
        unexpired, bound to the payload and the current grant, unused. A
        valid token is spent: a second verify fails (exit 11)
  keys
        the execution-token signing keys (JWKS; --output json prints it raw)
  keys rotate
        sign new execution tokens with a new key (admin)
  audit-log [--since N] [--limit N] [--namespace NS]
        a page of the namespace's hash-chained audit log (--output json is
        compact: each event's bytes are the ones its hash covers)
  audit-log export [--since N] [--namespace NS] > FILE.jsonl
        the whole log as JSON lines: {"head":...}, then one event per line,
        up to the head read first (--since N: a partial export, its first
        line also holds "since")
  audit-log verify [--file FILE.jsonl] [--since N] [--namespace NS]
        recompute the hash chain, live or from an export; exit 12 and the
        first break (its seq) if it does not verify
  settings
  settings set --audit-retention N
        cluster-wide settings (set: admin); retention is how many audit
        events each namespace keeps (0: the default)
  apikey new --name N [--namespace NS] --roles agent,approver [--env]
        make an API key (offline): prints the plaintext key once, and the
        entry for the server's keys file (--env: the INTENTD_API_KEYS form
        name:namespace:role+role:sha256 instead). Roles: agent, tool,
        approver, reader, admin
  kek new --out FILE
        make a key-encryption key (offline) into FILE, mode 0600, never
        replacing one: give every node the same one (intentd --kek-file
        FILE) to seal execution-token signing seeds in the log and snapshots
  cluster
        the cluster's nodes, roles, leader, term, commit and applied index
  health
        liveness and readiness of every address
  snapshot save FILE
        stream a consistent snapshot of the whole ledger into FILE (verified
        against its SHA-256 trailer before FILE is written)
  snapshot restore FILE [--force]
        replace the ledger of a fresh cluster with FILE (--force: also a
        ledger that holds intents, destroying them)
  snapshot dump FILE [--out OUT]
        verify FILE and write it as JSON lines (one intent per line, for jq;
        a view: restore refuses it)
  certs [--dir certs] [--nodes n1,n2,n3] [--hosts h,...]
        write a development CA, node and client certificates
  help
        this text

Global flags (before or after the command):
  --addr LIST      comma separated node addresses (env INTENTCTL_ADDR;
                   default ` + defaultAddr + `)
  --output FORMAT  table or json (default table); json prints the API's JSON
  --timeout D      give up after D (default 10s)
  --retries N      retries of a call the cluster could not answer (default 4)
  --ca FILE        PEM CA that signs the nodes' HTTPS certificates (env INTENTCTL_CA)
  --cert, --key    PEM client certificate and key, for nodes that require one
                   (env INTENTCTL_CERT, INTENTCTL_KEY)
  --api-key KEY    API key for clusters that run with --auth=required
                   (env INTENTCTL_API_KEY; prefer the environment: a flag
                   shows in the process list)

Exit codes:
  0  success: granted, duplicate, ok, pending_approval
  1  other error
  2  usage error or bad input (HTTP 400, 413, 422 except divergent)
  3  in_flight: another owner holds the lease; do not execute
  4  divergent: the payload differs from the recorded one
  5  in_doubt: the lease passed without a report; resolve it
  6  fenced: stale owner or fencing token
  7  not found
  8  unavailable or outcome unknown (HTTP 503, network error, timeout):
     retry the same command
  9  rejected, blocked by policy, or invalid in the intent's (or the
     policy's) state
  10 not authorized: no or wrong API key (401), or its roles or namespace
     do not allow the call (403)
  11 token refused: the execution token was already used, expired, or is
     not valid (malformed, forged, unknown key, other payload or grant);
     do not act
  12 audit chain broken: the audit log's hash chain does not verify
`

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// globals are the flags every command accepts.
type globals struct {
	addr    string
	output  string
	timeout time.Duration
	retries int
	// TLS (ops.go): CA bundle, client certificate and key.
	ca, cert, key string
	// apiKey is sent as a bearer token (gate.go).
	apiKey string
}

func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.addr, "addr", g.addr, "comma separated node addresses")
	fs.StringVar(&g.output, "output", g.output, "table or json")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "give up after this long")
	fs.IntVar(&g.retries, "retries", g.retries, "retries of a call the cluster could not answer")
	fs.StringVar(&g.ca, "ca", g.ca, "PEM CA of the nodes' certificates")
	fs.StringVar(&g.cert, "cert", g.cert, "PEM client certificate")
	fs.StringVar(&g.key, "key", g.key, "PEM client key")
	fs.StringVar(&g.apiKey, "api-key", g.apiKey, "API key")
}

// cli is one invocation.
type cli struct {
	globals
	stdout, stderr io.Writer
	// problem is the last error answer, printed as JSON in json output.
	problem *client.Problem
}

// run executes intentctl with args (without the program name) and returns
// its exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr}
	c.addr = defaultAddr
	if env := os.Getenv("INTENTCTL_ADDR"); env != "" {
		c.addr = env
	}
	c.output, c.timeout, c.retries = "table", 10*time.Second, client.DefaultRetries
	c.ca, c.cert, c.key = os.Getenv("INTENTCTL_CA"), os.Getenv("INTENTCTL_CERT"), os.Getenv("INTENTCTL_KEY")
	c.apiKey = os.Getenv("INTENTCTL_API_KEY")

	fs := flag.NewFlagSet("intentctl", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usageText)
			return exitOK
		}
		return c.fail(usagef("%v", err))
	}
	if fs.NArg() == 0 {
		fmt.Fprint(stderr, usageText)
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	cmd, ok := command(name)
	if !ok {
		return c.fail(usagef("unknown command %q", name))
	}
	if err := cmd(ctx, c, rest); err != nil {
		return c.fail(err)
	}
	return exitOK
}

// command returns the implementation of the command called name.
func command(name string) (func(context.Context, *cli, []string) error, bool) {
	switch name {
	case "claim":
		return cmdClaim, true
	case "complete":
		return cmdComplete, true
	case "renew":
		return cmdRenew, true
	case "commit":
		return cmdCommit, true
	case "resolve":
		return cmdResolve, true
	case "approve":
		return cmdDecide(true), true
	case "reject":
		return cmdDecide(false), true
	case "get":
		return cmdGet, true
	case "list":
		return cmdList, true
	case "audit":
		return cmdAudit, true
	case "approvals":
		return cmdApprovals, true
	case "wait":
		return cmdWait, true
	case "policy":
		return cmdPolicy, true
	case "token":
		return cmdToken, true
	case "keys":
		return cmdKeys, true
	case "audit-log":
		return cmdAuditLog, true
	case "settings":
		return cmdSettings, true
	case "apikey":
		return cmdAPIKey, true
	case "kek":
		return cmdKEK, true
	case "cluster":
		return cmdCluster, true
	case "health":
		return cmdHealth, true
	case "snapshot":
		return cmdSnapshot, true
	case "certs":
		return cmdCerts, true
	case "help":
		return cmdHelp, true
	}
	return nil, false
}

// flags returns a flag set for command name that also takes the global
// flags.
func (c *cli) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("intentctl "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	return fs
}

// parse parses args, flags and positional arguments in any order
// (everything after "--" is positional), and checks the number of
// positional arguments.
func (c *cli) parse(fs *flag.FlagSet, args []string, positional ...string) ([]string, error) {
	var tail []string
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, usagef("see 'intentctl help'")
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	pos = append(pos, tail...)
	if len(pos) != len(positional) {
		if len(positional) == 0 {
			return nil, usagef("%s takes no arguments, got %q", fs.Name(), pos)
		}
		return nil, usagef("%s needs %s", fs.Name(), strings.Join(positional, " "))
	}
	if c.output != "table" && c.output != "json" {
		return nil, usagef("--output must be table or json, not %q", c.output)
	}
	return pos, nil
}

// client returns a client for --addr.
func (c *cli) client() (*client.Client, error) {
	return c.clientTimeout(0)
}

// clientTimeout returns a client for --addr whose HTTP requests may take
// up to httpTimeout (0: the client package's default), for long polls.
func (c *cli) clientTimeout(httpTimeout time.Duration) (*client.Client, error) {
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	if httpTimeout > 0 {
		if hc == nil {
			hc = &http.Client{}
		}
		hc.Timeout = httpTimeout
	}
	opts := []client.Option{client.WithRetries(c.retries), client.WithHTTPClient(hc)}
	if c.apiKey != "" {
		opts = append(opts, client.WithAPIKey(c.apiKey))
	}
	cl, err := client.New(strings.Split(c.addr, ","), opts...)
	if err != nil {
		return nil, usagef("--addr: %v", err)
	}
	return cl, nil
}

// connect returns the client and ctx bounded by --timeout; call cancel
// when the command is done.
func (c *cli) connect(ctx context.Context) (*client.Client, context.Context, context.CancelFunc, error) {
	cl, err := c.client()
	if err != nil {
		return nil, ctx, func() {}, err
	}
	ctx, cancel := c.withTimeout(ctx)
	return cl, ctx, cancel, nil
}

// withTimeout bounds ctx by --timeout.
func (c *cli) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

// fail reports err and returns its exit code.
func (c *cli) fail(err error) int {
	code := exitCode(err)
	var p *client.Problem
	if c.output == "json" && errors.As(err, &p) {
		c.printJSON(p)
	}
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(c.stderr, "intentctl: %v\nRun 'intentctl help' for usage.\n", err)
	case errors.As(err, &p):
		fmt.Fprintf(c.stderr, "intentctl: %s (%d): %s\n", p.Code, p.Status, p.Title)
		if p.Detail != "" {
			fmt.Fprintf(c.stderr, "  detail: %s\n", p.Detail)
		}
		if p.RequestFingerprint != "" {
			fmt.Fprintf(c.stderr, "  recorded fingerprint: %s\n  request fingerprint:  %s\n", p.Fingerprint, p.RequestFingerprint)
		}
		if p.Intent != nil {
			fmt.Fprintf(c.stderr, "  intent: state %s, owner %q, fencing token %d\n", p.Intent.State, p.Intent.Owner, p.Intent.FencingToken)
		}
		if p.RetryAfter > 0 {
			fmt.Fprintf(c.stderr, "  retry after: %v\n", p.RetryAfter)
		}
		if err != error(p) {
			fmt.Fprintf(c.stderr, "  (%v)\n", err)
		}
	default:
		fmt.Fprintf(c.stderr, "intentctl: %v\n", err)
	}
	return code
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ue *usageError
	var p *client.Problem
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, client.ErrOutcomeUnknown), errors.Is(err, client.ErrNoLeader),
		errors.Is(err, client.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	case errors.Is(err, client.ErrInFlight):
		return exitInFlight
	case errors.Is(err, client.ErrDivergent):
		return exitDivergent
	case errors.Is(err, client.ErrInDoubt):
		return exitInDoubt
	case errors.Is(err, client.ErrFenced):
		return exitFenced
	case errors.Is(err, client.ErrNotFound):
		return exitNotFound
	case errors.Is(err, client.ErrRejected), errors.Is(err, client.ErrBlocked), errors.Is(err, client.ErrInvalidState):
		return exitRefused
	case errors.Is(err, client.ErrBadRequest):
		return exitUsage
	case errors.Is(err, client.ErrUnauthorized):
		return exitUnauthorized
	case errors.Is(err, client.ErrTokenUsed), errors.Is(err, client.ErrTokenExpired), errors.Is(err, client.ErrTokenInvalid):
		return exitTokenRefused
	case errors.Is(err, client.ErrChainBroken):
		return exitChainBroken
	case errors.As(err, &p) && p.Status == 503:
		return exitUnavailable
	case errors.As(err, &p) && (p.Status == 401 || p.Status == 403):
		return exitUnauthorized
	}
	return exitError
}
