package fsm_test

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// scanUsage computes what namespace ns holds by reading every one of its
// intents: what Machine.NamespaceUsage must equal.
func scanUsage(l *fsm.Machine, namespace string) fsm.Usage {
	u := fsm.Usage{ByState: map[fsm.State]int{}}
	for _, s := range fsm.States {
		u.ByState[s] = 0
	}
	page, _ := l.List(fsm.ListOptions{Namespace: namespace, Limit: 1 << 30})
	for _, in := range page {
		u.Intents++
		u.Bytes += int64(len(in.Key) + len(in.Payload) + len(in.Result))
		u.ByState[in.State]++
	}
	return u
}

func checkUsage(t *testing.T, what string, l *fsm.Machine, namespaces ...string) {
	t.Helper()
	for _, n := range namespaces {
		got, want := l.NamespaceUsage(n), scanUsage(l, n)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: NamespaceUsage(%q) = %+v, a scan says %+v", what, n, got, want)
		}
		if l.NamespaceIntents(n) != want.Intents {
			t.Errorf("%s: NamespaceIntents(%q) = %d, want %d", what, n, l.NamespaceIntents(n), want.Intents)
		}
	}
}

// TestNamespaceUsageFollowsTheRecords: the per-namespace usage index
// equals a scan of the records after grants, reports, approvals, expiry
// and purges, after a Clone and after a snapshot is restored, and a
// namespace left empty is no longer listed.
func TestNamespaceUsageFollowsTheRecords(t *testing.T) {
	h := listLedger(t) // namespaces ns, n and nt
	spaces := []string{ns, "n", "nt", "absent"}
	checkUsage(t, "after the claims", h.l, spaces...)

	// One record in each state in namespace ns, with results.
	for i, s := range fsm.States {
		key := "k" + fmt.Sprint(i)
		grant := h.idx + 1
		for _, st := range toState(s) {
			h.advance(st.advance)
			h.must(rekey(st.cmd, key, grant), st.want)
		}
		checkUsage(t, "toward "+string(s), h.l, spaces...)
	}
	u := h.l.NamespaceUsage(ns)
	if u.ByState[fsm.StateInDoubt] == 0 || u.ByState[fsm.StatePendingApproval] == 0 || u.Bytes == 0 {
		t.Fatalf("the ledger holds no in_doubt or pending intent, or no bytes, in %q: %+v (the check would prove nothing)", ns, u)
	}
	if got := h.l.Namespaces(); !reflect.DeepEqual(got, []string{"n", ns, "nt"}) {
		t.Errorf("Namespaces() = %q", got)
	}

	clone := h.l.Clone()
	var buf bytes.Buffer
	if err := h.l.WriteSnapshot(&buf); err != nil {
		t.Fatal(err)
	}
	restored, err := fsm.Restore(&buf)
	if err != nil {
		t.Fatal(err)
	}

	// Purge everything finished: the usage shrinks with the records.
	h.advance(ms(dedupeMS) * 10)
	var all []string
	page, _ := h.l.List(fsm.ListOptions{Namespace: ns, Limit: 1 << 30})
	for _, in := range page {
		all = append(all, in.Key)
	}
	h.must(purge(all...), fsm.StatusOK)
	checkUsage(t, "after the purge", h.l, spaces...)
	if reflect.DeepEqual(h.l.NamespaceUsage(ns), clone.NamespaceUsage(ns)) {
		t.Fatalf("the purge changed nothing in %q", ns)
	}
	h.must(&fsm.Purge{Keys: []fsm.Ref{{Namespace: "nt", Key: "a"}}}, fsm.StatusOK)
	checkUsage(t, "clone", clone, spaces...)
	checkUsage(t, "restored", restored, spaces...)
	if !reflect.DeepEqual(clone.NamespaceUsage(ns), restored.NamespaceUsage(ns)) {
		t.Errorf("restored usage %+v differs from the ledger's %+v", restored.NamespaceUsage(ns), clone.NamespaceUsage(ns))
	}
}
