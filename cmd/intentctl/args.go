package main

import (
	"encoding/json"
	"flag"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/intentledger/intentd/client"
)

// jsonArg reads a JSON flag value: inline JSON, or @file. Empty stays
// empty.
func jsonArg(flagName, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	data := []byte(v)
	if name, ok := strings.CutPrefix(v, "@"); ok {
		var err error
		if data, err = os.ReadFile(name); err != nil {
			return nil, usagef("--%s: %v", flagName, err)
		}
	}
	if !json.Valid(data) {
		return nil, usagef("--%s is not valid JSON", flagName)
	}
	return json.RawMessage(data), nil
}

func outcomeArg(v string) (client.Outcome, error) {
	switch o := client.Outcome(v); o {
	case client.OutcomeExecuted, client.OutcomeFailed:
		return o, nil
	case "":
		return "", usagef("--outcome is required (executed or failed)")
	default:
		return "", usagef("--outcome must be executed or failed, not %q", v)
	}
}

// requiredActor requires --actor unless an API key names the caller: with
// auth on, the server takes the actor from the key.
func (c *cli) requiredActor(actor string) error {
	if c.apiKey != "" {
		return nil
	}
	return required("actor", actor)
}

// holderFlags registers --owner and --token: the lease holder and its
// grant's fencing token.
func holderFlags(fs *flag.FlagSet) (owner *string, token *uint64) {
	return fs.String("owner", "", "the lease holder"), fs.Uint64("token", 0, "the grant's fencing token")
}

// requireHolder requires --owner and --token.
func requireHolder(owner string, token uint64) error {
	if err := required("owner", owner); err != nil {
		return err
	}
	if token == 0 {
		return usagef("--token is required")
	}
	return nil
}

func required(name, v string) error {
	if v == "" {
		return usagef("--%s is required", name)
	}
	return nil
}

// subcommand splits "NAME SUB ARGS..." when args starts with one of subs;
// otherwise sub is "".
func subcommand(args []string, subs ...string) (sub string, rest []string) {
	if len(args) > 0 && slices.Contains(subs, args[0]) {
		return args[0], args[1:]
	}
	return "", args
}

// needSubcommand is subcommand for command name, which means nothing
// without one of subs: it refuses a missing or unknown one.
func needSubcommand(name string, args []string, subs ...string) (sub string, rest []string, err error) {
	if sub, rest = subcommand(args, subs...); sub != "" {
		return sub, rest, nil
	}
	list := subs[0]
	if n := len(subs); n > 1 {
		list = strings.Join(subs[:n-1], ", ") + " or " + subs[n-1]
	}
	if len(args) == 0 {
		return "", nil, usagef("%s needs %s", name, list)
	}
	return "", nil, usagef("%s: unknown subcommand %q (%s)", name, args[0], list)
}

// subcommandFlags is subcommand for command name, which also runs
// without one, and the flag set named after both.
func (c *cli) subcommandFlags(name string, args []string, subs ...string) (sub string, rest []string, fs *flag.FlagSet) {
	if sub, rest = subcommand(args, subs...); sub != "" {
		name += " " + sub
	}
	return sub, rest, c.flags(name)
}

// setFlags returns the names of the flags set on the command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
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
