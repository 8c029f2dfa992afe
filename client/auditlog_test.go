package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/intentledger/intentd/client"
)

// TestAuditLogPagesVerify reads the hash-chained audit log a page at a
// time and verifies it; an altered, missing or reordered event breaks the
// chain.
func TestAuditLogPagesVerify(t *testing.T) {
	n := newNode(t)
	c := newClient(t, []string{n.srv.URL}, client.WithRetries(0))
	ctx := context.Background()
	for i := range 3 {
		if _, err := c.Claim(ctx, claimReq(fmt.Sprintf("job:%d", i), "o")); err != nil {
			t.Fatal(err)
		}
	}

	var head client.AuditHead
	var events []client.AuditRecord
	for since, pages := uint64(0), 0; ; pages++ {
		page, err := c.AuditLog(ctx, "", since, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Events) > 2 || pages > 10 {
			t.Fatalf("page of %d events (page %d)", len(page.Events), pages)
		}
		head, events = page.Head, append(events, page.Events...)
		if page.Next == 0 {
			break
		}
		since = page.Next
	}
	if len(events) < 3 || head.LastSeq != events[len(events)-1].Seq || head.Namespace == "" {
		t.Fatalf("%d events, head %+v", len(events), head)
	}

	verify := func(evs []client.AuditRecord) (int, error) {
		v := client.NewChainVerifier(head)
		for _, r := range evs {
			if err := v.Add(r); err != nil {
				return 0, err
			}
		}
		return v.Finish(head)
	}
	if got, err := verify(events); err != nil || got != len(events) {
		t.Fatalf("verify = %d, %v; want %d events", got, err, len(events))
	}

	altered := append([]client.AuditRecord(nil), events...)
	altered[1].Event = bytes.Replace(bytes.Clone(altered[1].Event), []byte(`"job:`), []byte(`"jab:`), 1)
	if bytes.Equal(altered[1].Event, events[1].Event) {
		t.Fatalf("event 2 names no job to alter: %s", events[1].Event)
	}
	for name, evs := range map[string][]client.AuditRecord{
		"altered":   altered,
		"missing":   append(append([]client.AuditRecord(nil), events[:1]...), events[2:]...),
		"reordered": append([]client.AuditRecord{events[1], events[0]}, events[2:]...),
	} {
		if _, err := verify(evs); !errors.Is(err, client.ErrChainBroken) {
			t.Errorf("%s: %v, want ErrChainBroken", name, err)
		}
	}
}
