package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/intentledger/intentd/client"
)

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
	page, err := call(ctx, c, func(ctx context.Context, cl *client.Client) (*client.AuditLogPage, error) {
		return cl.AuditLog(ctx, *ns, *since, *limit)
	})
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
