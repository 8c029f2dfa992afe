package fsm_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/intentledger/intentd/fsm"
)

// listLedger holds, in namespace ns: a (executed), b/1 (declared),
// b/2 (failed), b/3 (declared), ba (declared), c (pending_approval);
// in namespace "n" (a prefix of "ns"): b/0; in namespace "nt": a.
func listLedger(t *testing.T) *harness {
	h := newHarness(t)
	in := func(namespace string, c *fsm.Claim) *fsm.Claim { c.Namespace = namespace; return c }
	h.must(claim("a", "A", payloadA), fsm.StatusGranted)
	h.must(complete("a", "A", 1, fsm.OutcomeExecuted, ""), fsm.StatusOK)
	h.must(claim("b/3", "A", payloadA), fsm.StatusGranted)
	h.must(claim("b/2", "A", payloadA), fsm.StatusGranted)
	h.must(complete("b/2", "A", 4, fsm.OutcomeFailed, ""), fsm.StatusOK)
	h.must(claim("b/1", "A", payloadA), fsm.StatusGranted)
	h.must(claim("ba", "A", payloadA), fsm.StatusGranted)
	h.must(claimApproval("c", "A", payloadA), fsm.StatusPendingApproval)
	h.must(in("n", claim("b/0", "A", payloadA)), fsm.StatusGranted)
	h.must(in("nt", claim("a", "A", payloadA)), fsm.StatusGranted)
	return h
}

func keysOf(page []*fsm.Intent) string {
	var ks []string
	for _, in := range page {
		ks = append(ks, in.Namespace+"/"+in.Key)
	}
	return strings.Join(ks, " ")
}

func TestList(t *testing.T) {
	h := listLedger(t)
	cases := []struct {
		name string
		opts fsm.ListOptions
		want string
		next string
	}{
		{"namespace", fsm.ListOptions{Namespace: ns}, "ns/a ns/b/1 ns/b/2 ns/b/3 ns/ba ns/c", ""},
		{"other namespace", fsm.ListOptions{Namespace: "n"}, "n/b/0", ""},
		{"third namespace", fsm.ListOptions{Namespace: "nt"}, "nt/a", ""},
		{"unknown namespace", fsm.ListOptions{Namespace: "zz"}, "", ""},
		{"prefix", fsm.ListOptions{Namespace: ns, Prefix: "b/"}, "ns/b/1 ns/b/2 ns/b/3", ""},
		{"prefix b", fsm.ListOptions{Namespace: ns, Prefix: "b"}, "ns/b/1 ns/b/2 ns/b/3 ns/ba", ""},
		{"prefix matching nothing", fsm.ListOptions{Namespace: ns, Prefix: "bb"}, "", ""},
		{"state", fsm.ListOptions{Namespace: ns, State: fsm.StateDeclared}, "ns/b/1 ns/b/3 ns/ba", ""},
		{"state and prefix", fsm.ListOptions{Namespace: ns, Prefix: "b/", State: fsm.StateDeclared}, "ns/b/1 ns/b/3", ""},
		{"state nobody is in", fsm.ListOptions{Namespace: ns, State: fsm.StateInDoubt}, "", ""},
		{"limit", fsm.ListOptions{Namespace: ns, Limit: 2}, "ns/a ns/b/1", "b/1"},
		{"limit equal to the rest", fsm.ListOptions{Namespace: ns, Limit: 6}, "ns/a ns/b/1 ns/b/2 ns/b/3 ns/ba ns/c", ""},
		{"after", fsm.ListOptions{Namespace: ns, After: "b/2"}, "ns/b/3 ns/ba ns/c", ""},
		{"after a missing key", fsm.ListOptions{Namespace: ns, After: "b/15"}, "ns/b/2 ns/b/3 ns/ba ns/c", ""},
		{"after below the prefix", fsm.ListOptions{Namespace: ns, Prefix: "b/", After: "a"}, "ns/b/1 ns/b/2 ns/b/3", ""},
		{"after beyond the prefix", fsm.ListOptions{Namespace: ns, Prefix: "b/", After: "c"}, "", ""},
		{"after the last", fsm.ListOptions{Namespace: ns, After: "c"}, "", ""},
		{"state with limit", fsm.ListOptions{Namespace: ns, State: fsm.StateDeclared, Limit: 2}, "ns/b/1 ns/b/3", "b/3"},
		{"limit whose last match ends the range", fsm.ListOptions{Namespace: ns, Prefix: "b/", State: fsm.StateDeclared, Limit: 2},
			"ns/b/1 ns/b/3", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			page, next := h.l.List(tc.opts)
			eq(t, "page", keysOf(page), tc.want)
			eq(t, "next", next, tc.next)
			for _, in := range page {
				if !reflect.DeepEqual(in, h.l.Get(in.Namespace, in.Key)) {
					t.Fatalf("listed record is not the stored one")
				}
			}
		})
	}
}

func TestListPaging(t *testing.T) {
	h := newHarness(t)
	const n = 23
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("key-%02d", (i*7)%n) // not in key order
		r := h.must(claim(key, "A", payloadA), fsm.StatusGranted)
		if i%3 == 0 {
			h.must(complete(key, "A", r.Intent.FencingToken, fsm.OutcomeExecuted, ""), fsm.StatusOK)
		}
	}
	other := claim("key-05", "A", payloadA)
	other.Namespace = "other"
	h.must(other, fsm.StatusGranted)

	for _, state := range []fsm.State{"", fsm.StateDeclared, fsm.StateExecuted} {
		for _, prefix := range []string{"", "key-1", "key-"} {
			all, next := h.l.List(fsm.ListOptions{Namespace: ns, Prefix: prefix, State: state, Limit: 1000})
			if next != "" {
				t.Fatalf("one big page has a next cursor %q", next)
			}
			if len(all) == 0 {
				t.Fatalf("state %q prefix %q: nothing listed", state, prefix)
			}
			for limit := 1; limit <= len(all)+1; limit++ {
				var got []*fsm.Intent
				seen := map[string]bool{}
				after, pages := "", 0
				for {
					page, next := h.l.List(fsm.ListOptions{Namespace: ns, Prefix: prefix, State: state, After: after, Limit: limit})
					pages++
					if len(page) > limit {
						t.Fatalf("page of %d over limit %d", len(page), limit)
					}
					for _, in := range page {
						if seen[in.Key] {
							t.Fatalf("state %q prefix %q limit %d: %s on two pages", state, prefix, limit, in.Key)
						}
						seen[in.Key] = true
						if (state != "" && in.State != state) || !strings.HasPrefix(in.Key, prefix) || in.Namespace != ns {
							t.Fatalf("listed %s/%s in %s", in.Namespace, in.Key, in.State)
						}
					}
					got = append(got, page...)
					if next == "" {
						break
					}
					if len(page) != limit || next != page[len(page)-1].Key {
						t.Fatalf("cursor %q after a page of %d (limit %d)", next, len(page), limit)
					}
					after = next
					if pages > len(all)+1 {
						t.Fatalf("paging does not end")
					}
				}
				if !reflect.DeepEqual(got, all) {
					t.Fatalf("state %q prefix %q limit %d: pages cover %s, want %s", state, prefix, limit, keysOf(got), keysOf(all))
				}
				if wantPages := (len(all) + limit - 1) / limit; pages != wantPages {
					t.Fatalf("limit %d: %d pages for %d records, want %d", limit, pages, len(all), wantPages)
				}
			}
		}
	}
}

func TestListDefaultLimit(t *testing.T) {
	h := newHarness(t)
	for i := 0; i < 120; i++ {
		h.must(claim(fmt.Sprintf("k%03d", i), "A", payloadA), fsm.StatusGranted)
	}
	for _, limit := range []int{0, -1} {
		page, next := h.l.List(fsm.ListOptions{Namespace: ns, Limit: limit})
		eq(t, "len(page)", len(page), 100)
		eq(t, "next", next, "k099")
	}
}

func TestDueLeasesOrderAndMax(t *testing.T) {
	h := newHarness(t)
	withLease := func(key, namespace string, lease int64) *fsm.Claim {
		c := claim(key, "A", payloadA)
		c.Namespace, c.LeaseMS = namespace, lease
		return c
	}
	h.must(withLease("z", ns, 300), fsm.StatusGranted)     // t0+300ms
	h.must(withLease("m", ns, 100), fsm.StatusGranted)     // t0+100ms
	h.must(withLease("a", ns, 200), fsm.StatusGranted)     // t0+200ms
	h.must(withLease("b", "m", 200), fsm.StatusGranted)    // t0+200ms, namespace "m" < "ns"
	h.must(withLease("late", ns, 5000), fsm.StatusGranted) // t0+5s
	h.must(complete("m", "A", 2, fsm.OutcomeExecuted, ""), fsm.StatusOK)
	h.must(withLease("n", ns, 100), fsm.StatusGranted) // t0+100ms

	ref := func(namespace, key string) fsm.Ref { return fsm.Ref{Namespace: namespace, Key: key} }
	cases := []struct {
		now  int64
		max  int
		want []fsm.Ref
	}{
		{t0 + ms(100), 10, nil}, // a deadline is due only once it has passed
		{t0 + ms(100) + 1, 10, []fsm.Ref{ref(ns, "n")}},
		{t0 + ms(1000), 10, []fsm.Ref{ref(ns, "n"), ref("m", "b"), ref(ns, "a"), ref(ns, "z")}},
		{t0 + ms(1000), 3, []fsm.Ref{ref(ns, "n"), ref("m", "b"), ref(ns, "a")}},
		{t0 + ms(1000), 1, []fsm.Ref{ref(ns, "n")}},
		{t0 + ms(1000), 0, nil},
		{t0 + ms(9000), 10, []fsm.Ref{ref(ns, "n"), ref("m", "b"), ref(ns, "a"), ref(ns, "z"), ref(ns, "late")}},
	}
	for _, tc := range cases {
		got := h.l.DueLeases(tc.now, tc.max)
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("DueLeases(t0+%dms, %d) = %v, want %v", (tc.now-t0)/ms(1), tc.max, got, tc.want)
		}
	}
}

func TestDuePurgesOrderAndMax(t *testing.T) {
	h := newHarness(t)
	finished := func(key, namespace string, window int64, o fsm.Outcome) {
		c := claim(key, "A", payloadA)
		c.Namespace, c.DedupeWindowMS = namespace, window
		r := h.must(c, fsm.StatusGranted)
		cp := complete(key, "A", r.Intent.FencingToken, o, "")
		cp.Namespace = namespace
		h.must(cp, fsm.StatusOK)
	}
	finished("z", ns, 3000, fsm.OutcomeExecuted) // purge at t0+3s
	finished("y", ns, 1000, fsm.OutcomeFailed)   // t0+1s
	finished("x", ns, 2000, fsm.OutcomeExecuted) // t0+2s
	finished("w", "m", 2000, fsm.OutcomeFailed)  // t0+2s, namespace "m" < "ns"
	h.must(claim("live", "A", payloadA), fsm.StatusGranted)
	h.must(commit("z", "A"), fsm.StatusOK) // still t0: purge time unchanged

	ref := func(namespace, key string) fsm.Ref { return fsm.Ref{Namespace: namespace, Key: key} }
	cases := []struct {
		now  int64
		max  int
		want []fsm.Ref
	}{
		{t0 + ms(1000) - 1, 10, nil},
		{t0 + ms(1000), 10, []fsm.Ref{ref(ns, "y")}}, // due at the end of its window
		{t0 + ms(2500), 10, []fsm.Ref{ref(ns, "y"), ref("m", "w"), ref(ns, "x")}},
		{t0 + ms(2500), 2, []fsm.Ref{ref(ns, "y"), ref("m", "w")}},
		{t0 + ms(9000), 10, []fsm.Ref{ref(ns, "y"), ref("m", "w"), ref(ns, "x"), ref(ns, "z")}},
		{t0 + ms(9000), 0, nil},
	}
	for _, tc := range cases {
		got := h.l.DuePurges(tc.now, tc.max)
		if !reflect.DeepEqual(got, tc.want) {
			t.Fatalf("DuePurges(t0+%dms, %d) = %v, want %v", (tc.now-t0)/ms(1), tc.max, got, tc.want)
		}
	}
}

func TestCloneIsIndependent(t *testing.T) {
	h := listLedger(t)
	clone := h.l.Clone()
	digest, counts, n := clone.Digest(), clone.Counts(), clone.Len()
	h.must(claim("new", "A", payloadA), fsm.StatusGranted)
	h.must(complete("b/1", "A", 6, fsm.OutcomeExecuted, ""), fsm.StatusOK)
	h.advance(ms(10 * dedupeMS))
	h.must(purge("a", "b/1", "b/2"), fsm.StatusOK)
	eq(t, "clone Digest", clone.Digest(), digest)
	eq(t, "clone Len", clone.Len(), n)
	if !reflect.DeepEqual(clone.Counts(), counts) {
		t.Fatalf("clone counts moved: %v, want %v", clone.Counts(), counts)
	}
	eq(t, "clone b/1 state", clone.Get(ns, "b/1").State, fsm.StateDeclared)
	if clone.Get(ns, "new") != nil || clone.Get(ns, "a") == nil {
		t.Fatalf("clone sees the original's changes")
	}
	// And the other way round: applying to the clone leaves the original alone.
	data, err := fsm.Encode(h.at, claim("only-in-clone", "A", payloadA))
	if err != nil {
		t.Fatal(err)
	}
	clone.Apply(h.idx+1, data)
	if h.get("only-in-clone") != nil {
		t.Fatalf("original sees the clone's changes")
	}
	if clone.Get(ns, "only-in-clone") == nil {
		t.Fatalf("clone did not apply")
	}
}
