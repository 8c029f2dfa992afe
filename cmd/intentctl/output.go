package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/intentledger/intentd/client"
)

// table returns a tab writer over stdout for aligned columns.
func (c *cli) table() *tabwriter.Writer {
	return tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
}

// printJSON writes v as indented JSON to stdout.
func (c *cli) printJSON(v any) error {
	return writeJSON(c.stdout, v)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("print JSON: %w", err)
	}
	return nil
}

// intentRows writes an intent as key/value rows.
func intentRows(tw *tabwriter.Writer, in *client.Intent) {
	if in == nil {
		return
	}
	rows := []struct{ k, v string }{
		{"key", in.Key},
		{"namespace", in.Namespace},
		{"tool", in.Tool},
		{"state", string(in.State)},
		{"owner", dash(in.Owner)},
		{"fencing_token", fmt.Sprint(in.FencingToken)},
		{"generation", fmt.Sprint(in.Generation)},
		{"fingerprint", in.Fingerprint},
		{"lease_deadline", timeCell(in.LeaseDeadline)},
		{"created_at", timeCell(in.CreatedAt)},
		{"updated_at", timeCell(in.UpdatedAt)},
		{"duplicates", fmt.Sprint(in.Duplicates)},
		{"divergent", fmt.Sprint(in.Divergent)},
		{"version", fmt.Sprint(in.Version)},
		{"payload", dash(string(in.Payload))},
		{"result", dash(string(in.Result))},
	}
	if in.Policy != "" {
		rows = append(rows, struct{ k, v string }{"policy", in.Policy})
	}
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", r.k, r.v)
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339Nano)
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

func zeroDash(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
