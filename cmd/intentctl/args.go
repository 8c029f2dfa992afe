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

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
