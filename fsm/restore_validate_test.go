package fsm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"unique"
)

// richLedger applies a log that leaves everything a snapshot carries: an
// intent in every state (two namespaces; a regranted one, a spent token,
// a divergent retry, one that dropped audit events, one with a raw
// fingerprint), a purge, a default and a gated policy with an N-of-M
// approval, rotated signing keys (the oldest already dropped), and an
// audit retention short enough that every audit log dropped events.
func richLedger(t testing.TB) *Machine {
	t.Helper()
	l := New()
	var idx uint64
	at := int64(1_767_225_600) * 1e9 // 2026-01-01
	apply := func(cmd Command, want Status) *Result {
		t.Helper()
		idx++
		at += 1e6
		cmd.header().At = at
		r := l.ApplyCommand(idx, cmd)
		if r.Status != want {
			t.Fatalf("command %d (%T): %s %s, want %s", idx, cmd, r.Status, r.Detail, want)
		}
		return r
	}
	claim := func(ns, key, tool, owner, payload string) *Claim {
		canonical, fp, err := Fingerprint(tool, []byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		return &Claim{Namespace: ns, Key: key, Tool: tool, Owner: owner, Payload: canonical, Fingerprint: fp,
			DefaultLeaseMS: 1000, DedupeWindowMS: 60_000}
	}
	complete := func(key, owner string, fence uint64, o Outcome, result string) *Complete {
		c := &Complete{Namespace: "ns", Key: key, Owner: owner, FencingToken: fence, Outcome: o}
		if result != "" {
			c.Result = []byte(result)
		}
		return c
	}

	apply(&SetSettings{Settings: Settings{AuditRetention: 5}, Actor: "admin"}, StatusOK)
	for i := range MaxSigningKeys + 1 {
		apply(&AddSigningKey{Key: SigningKey{ID: fmt.Sprintf("key-%d", i), Seed: bytes.Repeat([]byte{byte(i + 1)}, 32)}}, StatusOK)
	}
	apply(&PutPolicy{Policy: Policy{Name: DefaultPolicyName, LeaseMS: 2000, DedupeWindowMS: 60_000, TokenTTLMS: 60_000}}, StatusOK)
	apply(&PutPolicy{Policy: Policy{Name: "gated", Tools: []string{"gated.*"}, RequireApproval: true, ApprovalsRequired: 2,
		Approvers: []string{"alice", "bob", "carol"}, Priority: 5}}, StatusOK)

	fence := func(r *Result) uint64 { return r.Intent.FencingToken }
	// by binds a claim to the API key principal.
	by := func(principal string, c *Claim) *Claim { c.Principal = principal; return c }
	apply(by("agents", claim("ns", "declared", "t", "o", `{"a":1}`)), StatusGranted)
	f := fence(apply(claim("ns", "executed", "t", "o", `{"a":2}`), StatusGranted))
	apply(complete("executed", "o", f, OutcomeExecuted, `{"id":"x"}`), StatusOK)
	f = fence(apply(claim("ns", "committed", "t", "o", `{"a":3}`), StatusGranted))
	apply(complete("committed", "o", f, OutcomeExecuted, ""), StatusOK)
	apply(&Commit{Namespace: "ns", Key: "committed", Owner: "o"}, StatusOK)
	f = fence(apply(claim("ns", "failed", "t", "o", `{"a":4}`), StatusGranted))
	apply(complete("failed", "o", f, OutcomeFailed, `{"error":"no"}`), StatusOK)
	f = fence(apply(by("agents", claim("ns", "regranted", "t", "o", `{"a":5}`)), StatusGranted))
	apply(complete("regranted", "o", f, OutcomeFailed, ""), StatusOK)
	apply(by("agents-2", claim("ns", "regranted", "t", "p", `{"a":5}`)), StatusGranted)
	r := apply(claim("ns", "used", "t", "o", `{"a":6}`), StatusGranted)
	apply(&UseToken{Namespace: "ns", Key: "used", Owner: "o", FencingToken: fence(r), Fingerprint: r.Intent.Fingerprint,
		Expires: at/1e9 + 3600}, StatusOK)
	apply(claim("ns", "divergent", "t", "o", `{"a":7}`), StatusGranted)
	apply(claim("ns", "divergent", "t", "o", `{"a":8}`), StatusDivergent)
	for range MaxAuditEvents + 3 {
		apply(claim("ns", "noisy", "t", "o", `{"a":9}`), StatusGranted) // repeated by its owner
	}
	raw := claim("ns", "rawfp", "t", "o", `{"a":10}`)
	raw.Fingerprint = "not-hex"
	apply(raw, StatusGranted)
	apply(by("agents", claim("ns", "pending", "gated.a", "o", `{"b":1}`)), StatusPendingApproval)
	apply(&Approve{Namespace: "ns", Key: "pending", Actor: "alice"}, StatusOK)
	apply(claim("ns", "approved", "gated.b", "o", `{"b":2}`), StatusPendingApproval)
	apply(&Approve{Namespace: "ns", Key: "approved", Actor: "alice", Reason: "ok"}, StatusOK)
	apply(&Approve{Namespace: "ns", Key: "approved", Actor: "bob"}, StatusOK)
	apply(claim("ns", "rejected", "gated.c", "o", `{"b":3}`), StatusPendingApproval)
	apply(&Reject{Namespace: "ns", Key: "rejected", Actor: "carol", Reason: "no"}, StatusOK)
	apply(claim("other", "k", "t", "o", `{"c":1}`), StatusGranted)
	f = fence(apply(claim("ns", "gone", "t", "o", `{"d":1}`), StatusGranted))
	apply(complete("gone", "o", f, OutcomeExecuted, ""), StatusOK)
	apply(claim("ns", "in_doubt", "t", "o", `{"e":1}`), StatusGranted)
	at += 61_000 * 1e6 // past every lease and the dedupe window
	if r := apply(&Expire{Keys: []Ref{{Namespace: "ns", Key: "in_doubt"}}}, StatusOK); r.Count != 1 {
		t.Fatalf("expired %d", r.Count)
	}
	if r := apply(&Purge{Keys: []Ref{{Namespace: "ns", Key: "gone"}}}, StatusOK); r.Count != 1 {
		t.Fatalf("purged %d", r.Count)
	}
	return l
}

// snapshotParts is a snapshot taken apart, for a test to alter and put
// together again with a correct trailer: what anyone can do.
type snapshotParts struct {
	hdr     snapshotHeader
	records []*record
	events  []snapshotEvent
}

func takeApart(t testing.TB, snap []byte) *snapshotParts {
	t.Helper()
	p := &snapshotParts{}
	br := bufio.NewReader(bytes.NewReader(snap))
	line, err := readLine(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(line, &p.hdr); err != nil {
		t.Fatal(err)
	}
	read := frameReader(br, sha256.New())
	for i := range p.hdr.Count {
		raw, err := read(i)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRecord(raw)
		if err != nil {
			t.Fatal(err)
		}
		p.records = append(p.records, r)
	}
	for range p.hdr.Events {
		line, err := readLine(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		ev := snapshotEvent{ChainEvent: new(ChainEvent)}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatal(err)
		}
		p.events = append(p.events, ev)
	}
	return p
}

// bytes encodes the parts as WriteSnapshot does, with a trailer that
// matches.
func (p *snapshotParts) bytes(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p.hdr); err != nil {
		t.Fatal(err)
	}
	for _, r := range p.records {
		frame := appendRecord(nil, r)
		b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(frame))))
		b.Write(frame)
	}
	for _, ev := range p.events {
		if err := enc.Encode(ev); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(b.Bytes())
	fmt.Fprintf(&b, `{"sha256":%q}`+"\n", hex.EncodeToString(sum[:]))
	return b.Bytes()
}

// record returns the record of ns/key.
func (p *snapshotParts) record(t testing.TB, key string) *record {
	t.Helper()
	for _, r := range p.records {
		if r.namespace() == "ns" && r.key == key {
			return r
		}
	}
	t.Fatalf("no record ns/%s", key)
	return nil
}

// terms changes the grant terms of ns/key.
func (p *snapshotParts) terms(t testing.TB, key string, change func(*grantTerms)) {
	r := p.record(t, key)
	g := r.terms.Value()
	change(&g)
	r.terms = unique.Make(g)
}

// extra changes the rarely set fields of ns/key.
func (p *snapshotParts) extra(t testing.TB, key string, change func(*recordExtra)) {
	r := p.record(t, key)
	x := recordExtra{}
	if r.x != nil {
		x = *r.x
	}
	change(&x)
	r.x = &x
}

// audit changes the audit trail of ns/key.
func (p *snapshotParts) audit(t testing.TB, key string, change func([]AuditEvent)) {
	r := p.record(t, key)
	in := r.intent()
	change(in.Audit)
	r.trail = encodeTrail(in.Audit, trailContext{owner: in.Owner, fingerprint: in.Fingerprint, version: in.Version,
		createdAt: in.CreatedAt})
}

// event changes the body of audit log event i and hashes it again.
func (p *snapshotParts) event(t testing.TB, i int, change func(*ChainBody)) {
	t.Helper()
	ev := p.events[i]
	var body ChainBody
	if err := json.Unmarshal(ev.Body, &body); err != nil {
		t.Fatal(err)
	}
	change(&body)
	raw := appendChainBody(nil, &body)
	p.events[i] = snapshotEvent{Namespace: ev.Namespace, ChainEvent: &ChainEvent{Seq: ev.Seq, Hash: ChainEventHash(raw), Body: raw}}
}

// eventOf is the index in p.events of the n-th event (0 first) of the
// namespace's audit log.
func (p *snapshotParts) eventOf(t testing.TB, ns string, n int) int {
	t.Helper()
	for i, ev := range p.events {
		if ev.Namespace == ns {
			if n == 0 {
				return i
			}
			n--
		}
	}
	t.Fatalf("audit log %q has too few events", ns)
	return 0
}

func TestTakeApartRoundTrips(t *testing.T) {
	l := richLedger(t)
	for _, s := range States {
		if l.Counts()[s] == 0 {
			t.Fatalf("the rich ledger has no %s intent", s)
		}
	}
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	if got := takeApart(t, snap.Bytes()).bytes(t); !bytes.Equal(got, snap.Bytes()) {
		t.Fatal("a snapshot taken apart and put together again differs")
	}
}

// TestRestoreRefusesInvalidValues: a snapshot whose trailer is right (as
// anyone can make it) but which holds a value no ledger can hold is
// refused, with an error that says which.
func TestRestoreRefusesInvalidValues(t *testing.T) {
	base := richLedger(t)
	var snap bytes.Buffer
	if err := base.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	seed := func(n int) []byte { return bytes.Repeat([]byte{7}, n) }
	cases := []struct {
		name   string
		change func(t *testing.T, p *snapshotParts)
		want   error  // ErrInvalidSnapshot unless set
		text   string // in the error
	}{
		// The header: index, clock, settings, keys, policies.
		{"applied index 2^64-1", func(t *testing.T, p *snapshotParts) { p.hdr.Index = math.MaxUint64 }, nil,
			"applied index 18446744073709551615 is over the limit"},
		{"applied index past the limit", func(t *testing.T, p *snapshotParts) { p.hdr.Index = MaxSnapshotIndex + 1 }, nil,
			"is over the limit of 9007199254740991"},
		{"applied index below a fencing token", func(t *testing.T, p *snapshotParts) {
			p.hdr.Index = p.record(t, "in_doubt").fence - 1
		}, nil, "(the applied index)"},
		{"applied index 0 with a ledger", func(t *testing.T, p *snapshotParts) { p.hdr.Index = 0 }, nil, "applied index 0"},
		{"more intents than commands", func(t *testing.T, p *snapshotParts) { p.hdr.Index = uint64(p.hdr.Count - 1) }, nil,
			"commands applied"},
		{"clock near 2^63", func(t *testing.T, p *snapshotParts) { p.hdr.Now = math.MaxInt64 - 1 }, nil, "clock 9223372036854775806 is outside"},
		{"clock past the year 2200", func(t *testing.T, p *snapshotParts) { p.hdr.Now = MaxSnapshotTime + 1 }, nil, "the year 2200"},
		{"negative clock", func(t *testing.T, p *snapshotParts) { p.hdr.Now = -1 }, nil, "clock -1 is outside"},
		{"clock behind the records", func(t *testing.T, p *snapshotParts) {
			p.hdr.Now = p.record(t, "in_doubt").updatedAt - 1
		}, nil, "is outside"},
		{"negative audit retention", func(t *testing.T, p *snapshotParts) { p.hdr.Settings.AuditRetention = -1 }, nil, "audit_retention"},
		{"3-byte signing seed", func(t *testing.T, p *snapshotParts) { p.hdr.Keys[0].Seed = seed(3) }, nil, "seed of 3 bytes, not 32"},
		{"empty signing seed", func(t *testing.T, p *snapshotParts) { p.hdr.Keys[3].Seed = nil }, nil, "seed of 0 bytes"},
		{"64-byte signing seed (a private key)", func(t *testing.T, p *snapshotParts) { p.hdr.Keys[1].Seed = seed(64) }, nil, "seed of 64 bytes"},
		{"duplicate key ids", func(t *testing.T, p *snapshotParts) { p.hdr.Keys[2].ID = p.hdr.Keys[1].ID }, nil, "signing key key-2 twice"},
		{"malformed key id", func(t *testing.T, p *snapshotParts) { p.hdr.Keys[0].ID = "key 1/../" }, nil, "is not 1..64"},
		{"empty key id", func(t *testing.T, p *snapshotParts) { p.hdr.Keys[0].ID = "" }, nil, "is not 1..64"},
		{"too many keys", func(t *testing.T, p *snapshotParts) {
			p.hdr.Keys = append(p.hdr.Keys, SigningKey{ID: "extra", Seed: seed(32), CreatedAt: p.hdr.Now})
		}, nil, "5 signing keys, at most 4"},
		{"keys not oldest first", func(t *testing.T, p *snapshotParts) {
			p.hdr.Keys[0], p.hdr.Keys[1] = p.hdr.Keys[1], p.hdr.Keys[0]
		}, nil, "the previous key's time"},
		{"key from the future", func(t *testing.T, p *snapshotParts) { p.hdr.Keys[3].CreatedAt = p.hdr.Now + 1 }, nil, "and the clock"},
		{"invalid policy", func(t *testing.T, p *snapshotParts) { p.hdr.Policies[1].LeaseMS = 5 }, nil, "lease_ms: 5 is outside"},
		{"policy of approvers it cannot have", func(t *testing.T, p *snapshotParts) { p.hdr.Policies[1].ApprovalsRequired = 9 }, nil,
			"approvals_required 9 is more than the 3 approvers"},
		{"policy version above the index", func(t *testing.T, p *snapshotParts) { p.hdr.Policies[0].Version = p.hdr.Index + 1 }, nil,
			"(the applied index)"},
		{"policy version 0", func(t *testing.T, p *snapshotParts) { p.hdr.Policies[0].Version = 0 }, nil, "has version 0"},
		{"policy twice", func(t *testing.T, p *snapshotParts) { p.hdr.Policies = append(p.hdr.Policies, p.hdr.Policies[1]) }, nil, "twice"},
		{"null policy", func(t *testing.T, p *snapshotParts) { p.hdr.Policies = append(p.hdr.Policies, nil) }, nil, "is null"},

		// Records: state, indexes, times, terms, approvals, trails.
		{"invalid state byte", func(t *testing.T, p *snapshotParts) { p.record(t, "declared").state = 0xee },
			ErrBadSnapshot, "unknown state code 238"},
		{"fencing token above the applied index", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "declared")
			r.fence, r.version = p.hdr.Index+1, p.hdr.Index+1
		}, nil, "(the applied index)"},
		{"fencing token above the record's version", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "declared")
			r.fence = r.version + 1
		}, nil, "above the record's version"},
		{"generation 2^64-1", func(t *testing.T, p *snapshotParts) { p.record(t, "executed").generation = math.MaxUint64 }, nil,
			"does not go with fencing token"},
		{"grant without a generation", func(t *testing.T, p *snapshotParts) { p.record(t, "executed").generation = 0 }, nil,
			"does not go with fencing token"},
		{"used token above the fencing token", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "used", func(x *recordExtra) { x.tokenUsed = p.record(t, "used").fence + 1 })
		}, nil, "used token"},
		{"policy version above the record's", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "failed", func(g *grantTerms) { g.policyVersion = p.record(t, "failed").version + 1 })
		}, nil, "policy version"},
		{"duplicates counted beyond any log", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "noisy", func(x *recordExtra) { x.duplicates = math.MaxUint64 })
		}, nil, "commands make"},
		{"negative created_at", func(t *testing.T, p *snapshotParts) { p.record(t, "executed").createdAt = -1 }, nil,
			"created_at -1 is outside"},
		{"updated_at after the clock", func(t *testing.T, p *snapshotParts) { p.record(t, "executed").updatedAt = p.hdr.Now + 1 }, nil,
			"updated_at"},
		{"updated_at before created_at", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "executed")
			r.updatedAt = r.createdAt - 1
		}, nil, "updated_at"},
		{"granted without a grant time", func(t *testing.T, p *snapshotParts) { p.record(t, "executed").grantedAt = 0 }, nil,
			"granted_at 0 is outside"},
		{"granted before it was created", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "executed")
			r.grantedAt = r.createdAt - 1
		}, nil, "granted_at"},
		{"granted_at after the last change", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "executed")
			r.grantedAt = r.updatedAt + 1
		}, nil, "granted_at"},
		{"lease that overflows", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "declared", func(g *grantTerms) { g.leaseMS = math.MaxInt64 })
		}, nil, "overflows when added to a time"},
		{"lease deadline at the end of time", func(t *testing.T, p *snapshotParts) {
			p.record(t, "declared").leaseDeadline = math.MaxInt64
		}, nil, "lease deadline 9223372036854775807"},
		{"lease deadline before the grant", func(t *testing.T, p *snapshotParts) {
			p.record(t, "declared").leaseDeadline = math.MinInt64
		}, nil, "lease deadline -9223372036854775808"},
		{"dedupe window that overflows", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "executed", func(g *grantTerms) { g.dedupeWindowMS = math.MaxInt64 / 1_000_000 })
		}, nil, "overflows when added to a time"},
		{"token lifetime no policy allows", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "declared", func(g *grantTerms) { g.tokenTTLMS = math.MaxInt64 })
		}, nil, "token_ttl_ms"},
		{"malformed token key", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "declared", func(g *grantTerms) { g.tokenKey = "../key" })
		}, nil, "token key"},
		{"malformed policy name", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "declared", func(g *grantTerms) { g.policy = "Not A Policy" })
		}, nil, "policy name"},
		{"principal over its limit", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "declared", func(g *grantTerms) { g.principal = strings.Repeat("k", MaxPrincipalBytes+1) })
		}, nil, "principal of 257 bytes"},
		{"principal not UTF-8", func(t *testing.T, p *snapshotParts) {
			p.terms(t, "pending", func(g *grantTerms) { g.principal = "agents\xff" })
		}, ErrBadSnapshot, "not UTF-8"},
		{"declared without an owner", func(t *testing.T, p *snapshotParts) { p.record(t, "declared").owner = "" }, nil,
			"needs an owner"},
		{"declared with a result", func(t *testing.T, p *snapshotParts) { p.record(t, "declared").result = `{"x":1}` }, nil,
			"declared with a result"},
		{"executed but never granted", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "executed")
			r.fence, r.generation = 0, 0
		}, nil, "never granted"},
		{"pending but granted", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "pending")
			r.fence, r.generation = r.version, 1
		}, nil, "yet granted"},
		{"rejected with an owner", func(t *testing.T, p *snapshotParts) { p.record(t, "rejected").owner = "o" }, nil,
			"never granted), yet"},
		{"approved without require_approval", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "approved", func(x *recordExtra) { x.requireApproval = false })
		}, nil, "without require_approval"},
		{"in_doubt while its lease runs", func(t *testing.T, p *snapshotParts) {
			r := p.record(t, "in_doubt")
			r.leaseDeadline = r.updatedAt
		}, nil, "yet its lease runs"},
		{"approvals without require_approval", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "declared", func(x *recordExtra) { x.approvals = []Approval{{Actor: "alice"}} })
		}, nil, "without require_approval"},
		{"approval by a stranger", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "pending", func(x *recordExtra) { x.approvals[0].Actor = "mallory" })
		}, nil, "not an approver"},
		{"two approvals by one approver", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "approved", func(x *recordExtra) { x.approvals[1].Actor = x.approvals[0].Actor })
		}, nil, "two approvals"},
		{"more approvals than required", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "approved", func(x *recordExtra) { x.approvals = append(x.approvals, Approval{Actor: "carol"}) })
		}, nil, "3 approvals, when 2"},
		{"approval gate no policy has", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "pending", func(x *recordExtra) { x.approvalsRequired = 1000 })
		}, nil, "approval gate"},
		{"approval from the future", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "pending", func(x *recordExtra) { x.approvals[0].At = p.hdr.Now + 1 })
		}, nil, "approval 0 at"},
		{"audit event after the clock", func(t *testing.T, p *snapshotParts) {
			p.audit(t, "executed", func(evs []AuditEvent) { evs[len(evs)-1].At = p.hdr.Now + 1 })
		}, nil, "audit event 1 at"},
		{"audit event above the record's version", func(t *testing.T, p *snapshotParts) {
			p.audit(t, "executed", func(evs []AuditEvent) { evs[len(evs)-1].Index = p.record(t, "executed").version + 1 })
		}, nil, "the record's version"},
		{"audit events out of order", func(t *testing.T, p *snapshotParts) {
			p.audit(t, "executed", func(evs []AuditEvent) { evs[0].At, evs[1].At = evs[1].At, evs[0].At })
		}, nil, "audit event 1 at"},
		{"dropped audit events with a short trail", func(t *testing.T, p *snapshotParts) {
			p.extra(t, "executed", func(x *recordExtra) { x.auditDropped = 1 })
		}, nil, "only 2 kept"},

		// Audit logs.
		{"audit log that dropped events it does not count", func(t *testing.T, p *snapshotParts) { p.hdr.Chains[0].Dropped++ }, nil,
			"dropped events"},
		{"audit log anchored elsewhere", func(t *testing.T, p *snapshotParts) {
			p.hdr.Chains[0].Anchor = strings.Repeat("x", 64)
		}, nil, "not a hex SHA-256"},
		{"audit log ending at another hash", func(t *testing.T, p *snapshotParts) {
			p.hdr.Chains[1].LastHash = p.hdr.Chains[1].Anchor
		}, nil, "not at its last hash"},
		{"audit log counting more events", func(t *testing.T, p *snapshotParts) { p.hdr.Chains[0].LastSeq++ }, nil, "the header counts"},
		{"audit event numbered twice", func(t *testing.T, p *snapshotParts) {
			p.event(t, p.eventOf(t, "ns", 2), func(b *ChainBody) { b.Seq-- })
		}, nil, "names seq"},
		{"audit event chained from a forged hash", func(t *testing.T, p *snapshotParts) {
			p.event(t, p.eventOf(t, "ns", 2), func(b *ChainBody) { b.Prev = zeroHash })
		}, nil, "chains from"},
		{"audit event above the applied index", func(t *testing.T, p *snapshotParts) {
			p.event(t, p.eventOf(t, "ns", 4), func(b *ChainBody) { b.Index = p.hdr.Index + 1 })
		}, nil, "has index"},
		{"audit event at index 0", func(t *testing.T, p *snapshotParts) {
			p.event(t, p.eventOf(t, SystemNamespace, 0), func(b *ChainBody) { b.Index = 0 })
		}, nil, "has index 0"},
		{"audit event from the future", func(t *testing.T, p *snapshotParts) {
			p.event(t, p.eventOf(t, "other", 0), func(b *ChainBody) { b.At = p.hdr.Now + 1 })
		}, nil, "and the clock"},
		{"audit event back in time", func(t *testing.T, p *snapshotParts) {
			p.event(t, p.eventOf(t, "ns", 1), func(b *ChainBody) { b.At = -1 })
		}, nil, "the previous event's time"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := takeApart(t, snap.Bytes())
			tc.change(t, p)
			l, err := Restore(bytes.NewReader(p.bytes(t)))
			want := tc.want
			if want == nil {
				want = ErrInvalidSnapshot
			}
			if !errors.Is(err, want) || !errors.Is(err, ErrBadSnapshot) || l != nil {
				t.Fatalf("Restore: %v, want %v", err, want)
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Restore: %v, want it to say %q", err, tc.text)
			}
		})
	}
}

// TestRestoreKeepsWhatLedgersHold: the rich ledger restores to the same
// digest, and a ledger whose values sit at the limits restores too.
func TestRestoreKeepsWhatLedgersHold(t *testing.T) {
	l := richLedger(t)
	var snap bytes.Buffer
	if err := l.WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	back, err := Restore(bytes.NewReader(snap.Bytes()))
	if err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if back.Digest() != l.Digest() {
		t.Fatal("the restored ledger differs")
	}

	p := takeApart(t, snap.Bytes())
	p.hdr.Index, p.hdr.Now = MaxSnapshotIndex, MaxSnapshotTime
	if _, err := Restore(bytes.NewReader(p.bytes(t))); err != nil {
		t.Fatalf("a ledger at the largest index and time: %v", err)
	}
}

// TestRestoreRefusesBadFrames: record frames and audit log events must
// come as WriteSnapshot writes them: as many as the header counts, in
// strictly increasing (namespace, key) and (namespace, seq) order. A
// record or an event repeated anywhere would replace its twin and lose
// another.
func TestRestoreRefusesBadFrames(t *testing.T) {
	var snap bytes.Buffer
	if err := richLedger(t).WriteSnapshot(&snap); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		change func(p *snapshotParts)
		text   string
	}{
		{"two records swapped", func(p *snapshotParts) { p.records[1], p.records[2] = p.records[2], p.records[1] }, "intent 2 out of order"},
		{"namespaces out of order", func(p *snapshotParts) {
			last := p.records[len(p.records)-1] // other/k
			p.records = append([]*record{last}, p.records[:len(p.records)-1]...)
		}, "intent 1 out of order"},
		{"a record twice", func(p *snapshotParts) {
			p.records = slices.Insert(p.records, 3, p.records[2])
			p.hdr.Count++
		}, "intent 3 out of order"},
		{"count above the frames", func(p *snapshotParts) { p.hdr.Count++ }, "intent"},
		{"count below the frames", func(p *snapshotParts) { p.hdr.Count-- }, "audit event 0"},
		{"an audit event repeated after another namespace's", func(p *snapshotParts) {
			n := len(p.events)
			if p.events[n-1].Namespace != "other" || p.events[n-2].Namespace != "ns" || p.events[n-3].Namespace != "ns" {
				t.Fatalf("unexpected layout: %q %q %q", p.events[n-3].Namespace, p.events[n-2].Namespace, p.events[n-1].Namespace)
			}
			p.events[n-2], p.events[n-1] = p.events[n-1], p.events[n-3]
		}, "out of order"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := takeApart(t, snap.Bytes())
			tc.change(p)
			l, err := Restore(bytes.NewReader(p.bytes(t)))
			if !errors.Is(err, ErrBadSnapshot) || l != nil || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Restore: %v, want ErrBadSnapshot saying %q", err, tc.text)
			}
		})
	}
}

// TestSigningKeyValidateIsAddSigningKeysRule: Validate accepts exactly the
// keys AddSigningKey accepts, so a restored key is one rotation could
// have added.
func TestSigningKeyValidateIsAddSigningKeysRule(t *testing.T) {
	for _, k := range []SigningKey{
		{ID: "k1", Seed: make([]byte, 32)},
		{ID: strings.Repeat("a", 64), Seed: make([]byte, 32)},
		{ID: strings.Repeat("a", 65), Seed: make([]byte, 32)},
		{ID: "", Seed: make([]byte, 32)},
		{ID: "k 1", Seed: make([]byte, 32)},
		{ID: "k1", Seed: make([]byte, 3)},
		{ID: "k1", Seed: make([]byte, 64)},
		{ID: "k1"},
	} {
		r := New().ApplyCommand(1, &AddSigningKey{Key: k})
		if added, valid := r.Status == StatusOK, k.Validate() == nil; added != valid {
			t.Errorf("key %q with a %d-byte seed: added %v, Validate accepts %v", k.ID, len(k.Seed), added, valid)
		}
	}
}
