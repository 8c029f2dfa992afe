// Command intentctl is the command line client of an intentd cluster: it
// claims, completes and resolves intents, reads them and their audit
// trails, and shows the cluster's status; it manages the gate (policies,
// approvals, execution tokens and their keys, the hash-chained audit log,
// settings) and makes API keys and key-encryption keys. It speaks only
// the HTTP API, and only through the client package; offline it reads
// snapshot files (snapshotfile.go) and makes keys.
// Run "intentctl help" for usage and exit codes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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

// run executes intentctl with args (without the program name), reading
// the process's standard input where a command reads "-", and returns its
// exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runWith(ctx, args, os.Stdin, stdout, stderr)
}

// runWith is run with stdin as the standard input.
func runWith(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr}
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
	case "namespace":
		return cmdNamespace, true
	case "apikey":
		return cmdAPIKey, true
	case "kek":
		return cmdKEK, true
	case "cluster":
		return cmdCluster, true
	case "health":
		return cmdHealth, true
	case "peer":
		return cmdPeer, true
	case "leader":
		return cmdLeader, true
	case "snapshot":
		return cmdSnapshot, true
	case "certs":
		return cmdCerts, true
	case "help":
		return cmdHelp, true
	}
	return nil, false
}

func cmdHelp(_ context.Context, c *cli, _ []string) error {
	fmt.Fprint(c.stdout, usageText)
	return nil
}
