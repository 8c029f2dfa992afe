package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/intentledger/intentd/client"
)

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

// auditVerifyExport is "audit verify FILE|-": the auditor's check of a
// JSON-lines export (audit-log export, GET /v1/audit?format=jsonl, the
// console's Export button), from a file or standard input, with no access
// to the cluster. It runs the SDK's client.ChainVerifier, the check the
// console mirrors in the browser; exit 12 names the first broken link.
func auditVerifyExport(c *cli, args []string) error {
	fs := c.flags("audit verify")
	pos, err := c.parse(fs, args, "FILE|-")
	if err != nil {
		return err
	}
	if pos[0] == "-" {
		return c.verifyExport("standard input", c.stdin)
	}
	return c.verifyFile(pos[0])
}

// verifyFile verifies an export file (verifyExport).
func (c *cli) verifyFile(name string) error {
	f, err := os.Open(name)
	if err != nil {
		return usagef("audit verify: %v", err)
	}
	defer f.Close()
	return c.verifyExport(name, f)
}

// verifyExport verifies an export read from r (called name in messages):
// the chain from its head's anchor (or, for a partial export, from its
// first event's prev), through the head's last event, whose hash must be
// the head's.
func (c *cli) verifyExport(name string, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxExportLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return fmt.Errorf("audit verify: %s: %w", name, err)
		}
		return usagef("audit verify: %s is empty", name)
	}
	var first struct {
		Head  *client.AuditHead `json:"head"`
		Since uint64            `json:"since"`
	}
	if err := json.Unmarshal(sc.Bytes(), &first); err != nil || first.Head == nil {
		return usagef("audit verify: %s does not start with a {\"head\":...} line; is it an audit log export?", name)
	}
	head := *first.Head
	k := newChainCheck(head, first.Since)
	for line := 2; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r client.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return c.printVerified(k.res, fmt.Errorf("%w at line %d of %s (after seq %d): not an audit record: %w", client.ErrChainBroken, line, name, k.res.LastSeq, err))
		}
		if err := k.add(r); err != nil {
			return c.printVerified(k.res, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("audit verify: %s: %w", name, err)
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
