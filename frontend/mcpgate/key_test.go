package mcpgate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
)

// keyInput is a KeyInput for pay.charge in scope default at a fixed time,
// with the default host id keys and derivation on.
func keyInput(meta map[string]any) KeyInput {
	return KeyInput{
		Meta: meta, Scope: []string{"default"}, Upstream: "pay", Tool: "charge", LedgerTool: "pay.charge",
		Arguments: []byte(`{"amount":1299,"order":"o1"}`), HostIDKeys: DefaultHostIDKeys,
		Derive: true, Window: time.Minute, Now: time.Unix(1_800_000_030, 0),
	}
}

// derivedOf is the derived key keyInput(nil) resolves to, computed apart.
func derivedOf(t *testing.T, in KeyInput) CallKey {
	t.Helper()
	in.Meta, in.HostIDKeys = nil, nil
	k, ok, err := ResolveKey(in)
	if err != nil || !ok || k.Source != SourceDerived {
		t.Fatalf("derived key of %+v: %+v %v %v", in, k, ok, err)
	}
	return k
}

func TestResolveKeySourceOrder(t *testing.T) {
	derived := derivedOf(t, keyInput(nil))
	if !strings.HasPrefix(derived.Ledger, "mcp:default:d:pay.charge:1800000000:") || len(derived.Value) != keyHashHex {
		t.Fatalf("derived key %+v", derived)
	}
	long := strings.Repeat("x", MaxExplicitKeyBytes+1)
	cases := []struct {
		name       string
		meta       map[string]any
		hostIDKeys []string // nil: DefaultHostIDKeys
		noDerive   bool
		wantOK     bool
		source     KeySource
		hostIDKey  string
		value      string
		ledger     string // "" with source derived: the derived key above
	}{
		{name: "explicit", meta: map[string]any{MetaIdempotencyKey: "k1"},
			wantOK: true, source: SourceExplicit, value: "k1", ledger: "mcp:default:k:pay.charge:k1"},
		{name: "explicit over host id", meta: map[string]any{MetaIdempotencyKey: "k1", "claudecode/toolUseId": "toolu_1"},
			wantOK: true, source: SourceExplicit, value: "k1", ledger: "mcp:default:k:pay.charge:k1"},
		{name: "explicit with derivation off", meta: map[string]any{MetaIdempotencyKey: "k1"}, noDerive: true,
			wantOK: true, source: SourceExplicit, value: "k1", ledger: "mcp:default:k:pay.charge:k1"},
		{name: "explicit key separators are escaped", meta: map[string]any{MetaIdempotencyKey: "a:b%c"},
			wantOK: true, source: SourceExplicit, value: "a:b%c", ledger: "mcp:default:k:pay.charge:a%3Ab%25c"},
		{name: "host id", meta: map[string]any{"claudecode/toolUseId": "toolu_1"},
			wantOK: true, source: SourceHost, hostIDKey: "claudecode/toolUseId", value: "toolu_1", ledger: "mcp:default:h:pay.charge:toolu_1"},
		{name: "host id with derivation off", meta: map[string]any{"claudecode/toolUseId": "toolu_1"}, noDerive: true,
			wantOK: true, source: SourceHost, hostIDKey: "claudecode/toolUseId", value: "toolu_1", ledger: "mcp:default:h:pay.charge:toolu_1"},
		{name: "integer host id", meta: map[string]any{"claudecode/toolUseId": 42.0},
			wantOK: true, source: SourceHost, hostIDKey: "claudecode/toolUseId", value: "42", ledger: "mcp:default:h:pay.charge:42"},
		{name: "integer host id as json.Number", meta: map[string]any{"claudecode/toolUseId": json.Number("42")},
			wantOK: true, source: SourceHost, hostIDKey: "claudecode/toolUseId", value: "42", ledger: "mcp:default:h:pay.charge:42"},
		{name: "host id of 255 bytes", meta: map[string]any{"claudecode/toolUseId": long[1:]},
			wantOK: true, source: SourceHost, hostIDKey: "claudecode/toolUseId", value: long[1:], ledger: client.KeyOf("mcp", "default", "h", "pay.charge", long[1:])},
		{name: "first configured host key wins", meta: map[string]any{"a/id": "A", "b/id": "B"}, hostIDKeys: []string{"b/id", "a/id"},
			wantOK: true, source: SourceHost, hostIDKey: "b/id", value: "B", ledger: "mcp:default:h:pay.charge:B"},
		{name: "first configured host key wins, other order", meta: map[string]any{"a/id": "A", "b/id": "B"}, hostIDKeys: []string{"a/id", "b/id"},
			wantOK: true, source: SourceHost, hostIDKey: "a/id", value: "A", ledger: "mcp:default:h:pay.charge:A"},
		{name: "an absent host key is skipped", meta: map[string]any{"b/id": "B"}, hostIDKeys: []string{"a/id", "b/id"},
			wantOK: true, source: SourceHost, hostIDKey: "b/id", value: "B", ledger: "mcp:default:h:pay.charge:B"},
		// A host id that is not one is no id: the gate looks further (unlike
		// an explicit key, which is an error).
		{name: "empty host id is skipped", meta: map[string]any{"a/id": "", "b/id": "B"}, hostIDKeys: []string{"a/id", "b/id"},
			wantOK: true, source: SourceHost, hostIDKey: "b/id", value: "B", ledger: "mcp:default:h:pay.charge:B"},
		{name: "boolean host id is skipped", meta: map[string]any{"a/id": true, "b/id": "B"}, hostIDKeys: []string{"a/id", "b/id"},
			wantOK: true, source: SourceHost, hostIDKey: "b/id", value: "B", ledger: "mcp:default:h:pay.charge:B"},
		{name: "fractional host id is skipped", meta: map[string]any{"a/id": 1.5, "b/id": "B"}, hostIDKeys: []string{"a/id", "b/id"},
			wantOK: true, source: SourceHost, hostIDKey: "b/id", value: "B", ledger: "mcp:default:h:pay.charge:B"},
		{name: "fractional json.Number host id is skipped", meta: map[string]any{"a/id": json.Number("1.5"), "b/id": "B"}, hostIDKeys: []string{"a/id", "b/id"},
			wantOK: true, source: SourceHost, hostIDKey: "b/id", value: "B", ledger: "mcp:default:h:pay.charge:B"},
		{name: "object host id is skipped", meta: map[string]any{"a/id": map[string]any{"x": 1}}, hostIDKeys: []string{"a/id"},
			wantOK: true, source: SourceDerived},
		{name: "host id over 255 bytes is skipped", meta: map[string]any{"claudecode/toolUseId": long},
			wantOK: true, source: SourceDerived},
		{name: "integer host id in exponent form", meta: map[string]any{"claudecode/toolUseId": json.Number("1e3")},
			wantOK: true, source: SourceHost, hostIDKey: "claudecode/toolUseId", value: "1000", ledger: "mcp:default:h:pay.charge:1000"},
		{name: "negative integer host id", meta: map[string]any{"claudecode/toolUseId": -7.0},
			wantOK: true, source: SourceHost, hostIDKey: "claudecode/toolUseId", value: "-7", ledger: "mcp:default:h:pay.charge:-7"},
		{name: "empty json.Number host id is skipped", meta: map[string]any{"a/id": json.Number(""), "b/id": "B"}, hostIDKeys: []string{"a/id", "b/id"},
			wantOK: true, source: SourceHost, hostIDKey: "b/id", value: "B", ledger: "mcp:default:h:pay.charge:B"},
		{name: "non-UTF-8 host id is skipped", meta: map[string]any{"claudecode/toolUseId": "\xff\xfe"},
			wantOK: true, source: SourceDerived},
		{name: "unlisted host key is not read", meta: map[string]any{"other/toolUseId": "x"},
			wantOK: true, source: SourceDerived},
		{name: "no host keys configured", meta: map[string]any{"claudecode/toolUseId": "toolu_1"}, hostIDKeys: []string{},
			wantOK: true, source: SourceDerived},
		{name: "derived", wantOK: true, source: SourceDerived},
		// Whatever else the call carries (a progress token, anything named
		// like a request id) is not a key.
		{name: "ids that are not keys", meta: map[string]any{"progressToken": "p1", "id": 7.0, "requestId": "r1", "jsonrpc.id": 7.0},
			wantOK: true, source: SourceDerived},
		{name: "derivation off and no key passes through", noDerive: true, wantOK: false},
		{name: "derivation off and an unusable host id", meta: map[string]any{"claudecode/toolUseId": ""}, noDerive: true, wantOK: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := keyInput(tc.meta)
			if tc.hostIDKeys != nil {
				in.HostIDKeys = tc.hostIDKeys
			}
			in.Derive = !tc.noDerive
			got, ok, err := ResolveKey(in)
			if err != nil {
				t.Fatalf("err %v", err)
			}
			if ok != tc.wantOK {
				t.Fatalf("ok %v, want %v (%+v)", ok, tc.wantOK, got)
			}
			if !ok {
				if got != (CallKey{}) {
					t.Errorf("no key, but %+v", got)
				}
				return
			}
			want := CallKey{Source: tc.source, HostIDKey: tc.hostIDKey, Value: tc.value, Ledger: tc.ledger}
			if tc.source == SourceDerived {
				want = derived
			}
			if got != want {
				t.Errorf("key\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestResolveKeyBadExplicitKey(t *testing.T) {
	cases := []struct {
		name string
		key  any
		want string // in the error
	}{
		{"empty", "", "is empty"},
		{"number", 12.0, "not a number"},
		{"json.Number", json.Number("12"), "not a number"},
		{"boolean", true, "not a boolean"},
		{"null", nil, "not null"},
		{"array", []any{"k"}, "not an array"},
		{"object", map[string]any{"k": "v"}, "not an object"},
		{"over 255 bytes", strings.Repeat("k", MaxExplicitKeyBytes+1), "256 bytes, over 255"},
		{"over 255 bytes of multi-byte runes", strings.Repeat("€", 86), "258 bytes, over 255"},
		{"not UTF-8", "k\xff", "not UTF-8"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// A usable host id and derivation are there: a malformed explicit
			// key is still an error, never a fallback.
			in := keyInput(map[string]any{MetaIdempotencyKey: tc.key, "claudecode/toolUseId": "toolu_1"})
			got, ok, err := ResolveKey(in)
			if !errors.Is(err, ErrBadKey) || ok || got != (CallKey{}) {
				t.Fatalf("ResolveKey = %+v, %v, %v; want ErrBadKey and no key", got, ok, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), MetaIdempotencyKey) {
				t.Errorf("error %q does not say %q about %s", err, tc.want, MetaIdempotencyKey)
			}
		})
	}
	// The bounds are inclusive: 255 bytes, in one- or three-byte runes.
	for _, k := range []string{strings.Repeat("k", MaxExplicitKeyBytes), strings.Repeat("€", 85), "k"} {
		got, ok, err := ResolveKey(keyInput(map[string]any{MetaIdempotencyKey: k}))
		if err != nil || !ok || got.Source != SourceExplicit || got.Value != k {
			t.Errorf("key of %d bytes: %+v %v %v", len(k), got, ok, err)
		}
	}
}

func TestResolveKeyDerivedWindows(t *testing.T) {
	base := time.Unix(1_800_000_000, 0) // a multiple of a minute and of 1.5 s
	cases := []struct {
		name   string
		window time.Duration
		at     time.Time
		start  time.Time
	}{
		{"window start", time.Minute, base, base},
		{"inside the window", time.Minute, base.Add(59*time.Second + 999*time.Millisecond), base},
		{"next window", time.Minute, base.Add(time.Minute), base.Add(time.Minute)},
		{"another window length", 7 * time.Second, time.Unix(1_800_000_012, 0), time.Unix(1_800_000_006, 0)}, // 7 × 257142858
		{"a window that is not whole seconds", 1500 * time.Millisecond, base.Add(1600 * time.Millisecond), base.Add(1500 * time.Millisecond)},
		{"before the epoch", time.Minute, time.UnixMilli(-1), time.Unix(-60, 0)},
		{"before the epoch, on a boundary", time.Minute, time.Unix(-60, 0), time.Unix(-60, 0)},
		{"zone does not matter", time.Minute, base.Add(30 * time.Second).In(time.FixedZone("x", 5*3600+1800)), base},
	}
	hash := derivedOf(t, keyInput(nil)).Value
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := keyInput(nil)
			in.Window, in.Now = tc.window, tc.at
			k := derivedOf(t, in)
			if !k.WindowStart.Equal(tc.start) {
				t.Errorf("window start %v, want %v", k.WindowStart, tc.start)
			}
			if k.Value != hash {
				t.Errorf("hash %s changed with the time (want %s)", k.Value, hash)
			}
			unix := func(tm time.Time) string { return strconv.FormatInt(tm.Unix(), 10) }
			if want := "mcp:default:d:pay.charge:" + unix(tc.start) + ":" + hash; k.Ledger != want {
				t.Errorf("ledger key %s, want %s", k.Ledger, want)
			}
			if want := "mcp:default:d:pay.charge:" + unix(tc.start.Add(-tc.window)) + ":" + hash; k.Previous != want {
				t.Errorf("previous %s, want %s", k.Previous, want)
			}
		})
	}

	// Inside a window the key stays; across a boundary it changes, and the
	// new window's previous key is the old window's key (what slide claims).
	in := keyInput(nil)
	in.Now = base.Add(10 * time.Second)
	a := derivedOf(t, in)
	in.Now = base.Add(50 * time.Second)
	b := derivedOf(t, in)
	in.Now = base.Add(70 * time.Second)
	c := derivedOf(t, in)
	if a != b {
		t.Errorf("keys inside one window differ: %+v / %+v", a, b)
	}
	if c.Ledger == a.Ledger || c.Previous != a.Ledger || c.Value != a.Value {
		t.Errorf("across the boundary: %+v, after %+v", c, a)
	}
}

func TestResolveKeyDerivedInputs(t *testing.T) {
	base := derivedOf(t, keyInput(nil))
	cases := []struct {
		name         string
		change       func(*KeyInput)
		sameHash     bool
		wantLedgerIn string
	}{
		{name: "same call", change: func(*KeyInput) {}, sameHash: true},
		{name: "meta that is no key", change: func(in *KeyInput) { in.Meta = map[string]any{"progressToken": 3.0, "x": "y"} }, sameHash: true},
		{name: "another scope", change: func(in *KeyInput) { in.Scope = []string{"team"} }},
		{name: "a scope digest", change: func(in *KeyInput) { in.Scope = append(in.Scope, "0123456789abcdef0123456789abcdef") },
			wantLedgerIn: "mcp:default:0123456789abcdef0123456789abcdef:d:pay.charge:"},
		{name: "scope parts are not joined", change: func(in *KeyInput) { in.Scope = []string{"default:x"} }},
		{name: "another upstream", change: func(in *KeyInput) { in.Upstream = "pay2" }},
		{name: "another tool", change: func(in *KeyInput) { in.Tool = "refund" }},
		{name: "other arguments", change: func(in *KeyInput) { in.Arguments = []byte(`{"amount":1300,"order":"o1"}`) }},
		{name: "no arguments", change: func(in *KeyInput) { in.Arguments = []byte(`{}`) }},
		// The ledger tool names the claim (what policies select by); the hash
		// is of the upstream's tool, so renaming the ledger tool moves the key
		// but not the hash.
		{name: "another ledger tool", change: func(in *KeyInput) { in.LedgerTool = "payments.charge" }, sameHash: true,
			wantLedgerIn: "mcp:default:d:payments.charge:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := keyInput(nil)
			tc.change(&in)
			k, ok, err := ResolveKey(in)
			if err != nil || !ok || k.Source != SourceDerived {
				t.Fatalf("%+v %v %v", k, ok, err)
			}
			if (k.Value == base.Value) != tc.sameHash {
				t.Errorf("hash %s, base %s: want same=%v", k.Value, base.Value, tc.sameHash)
			}
			if tc.sameHash && tc.wantLedgerIn == "" && k.Ledger != base.Ledger {
				t.Errorf("ledger key %s, want %s", k.Ledger, base.Ledger)
			}
			if !tc.sameHash && k.Ledger == base.Ledger {
				t.Errorf("ledger key unchanged: %s", k.Ledger)
			}
			if tc.wantLedgerIn != "" && !strings.HasPrefix(k.Ledger, tc.wantLedgerIn) {
				t.Errorf("ledger key %s, want it to start %s", k.Ledger, tc.wantLedgerIn)
			}
		})
	}
}

func TestResolveKeyScopeDigest(t *testing.T) {
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	names := []string{"Authorization", "X-Tenant"}
	ref := ScopeDigest(hdr("Authorization", "Bearer a", "X-Tenant", "t1"), names, "")
	if len(ref) != keyHashHex {
		t.Fatalf("digest %q", ref)
	}
	cases := []struct {
		name    string
		header  http.Header
		names   []string
		session string
		same    bool
	}{
		{"same values", hdr("Authorization", "Bearer a", "X-Tenant", "t1"), names, "", true},
		{"header names are case-insensitive", hdr("authorization", "Bearer a", "x-tenant", "t1"), []string{"authorization", "x-tenant"}, "", true},
		{"unnamed headers do not count", hdr("Authorization", "Bearer a", "X-Tenant", "t1", "User-Agent", "host/2"), names, "", true},
		{"another caller", hdr("Authorization", "Bearer b", "X-Tenant", "t1"), names, "", false},
		{"another tenant", hdr("Authorization", "Bearer a", "X-Tenant", "t2"), names, "", false},
		{"a header missing", hdr("Authorization", "Bearer a"), names, "", false},
		{"a second field line", hdr("Authorization", "Bearer a", "X-Tenant", "t1", "X-Tenant", "t2"), names, "", false},
		{"a value cannot forge the next header", hdr("Authorization", "Bearer a\nX-Tenant\n\t\"t1\""), names, "", false},
		{"a session", hdr("Authorization", "Bearer a", "X-Tenant", "t1"), names, "s1", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := ScopeDigest(tc.header, tc.names, tc.session)
			if (d == ref) != tc.same {
				t.Errorf("digest %s, reference %s: want same=%v", d, ref, tc.same)
			}
		})
	}
	if ScopeDigest(nil, nil, "s1") == ScopeDigest(nil, nil, "s2") {
		t.Error("two sessions share a digest")
	}

	// The digest follows the scope in every kind of key, so callers with
	// other digests never share a key.
	other := ScopeDigest(hdr("Authorization", "Bearer b", "X-Tenant", "t1"), names, "")
	for _, meta := range []map[string]any{{MetaIdempotencyKey: "k1"}, {"claudecode/toolUseId": "toolu_1"}, nil} {
		in := keyInput(meta)
		in.Scope = []string{"default", ref}
		a, _, errA := ResolveKey(in)
		in.Scope = []string{"default", other}
		b, _, errB := ResolveKey(in)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		if !strings.HasPrefix(a.Ledger, "mcp:default:"+ref+":") || !strings.HasPrefix(b.Ledger, "mcp:default:"+other+":") || a.Ledger == b.Ledger {
			t.Errorf("%s keys: %s / %s", a.Source, a.Ledger, b.Ledger)
		}
	}
}

// TestResolveKeyHasNoRequestID pins that the key cannot come from the
// JSON-RPC id: nothing that carries one reaches ResolveKey, and through the
// gate two calls (two ids) with the same arguments get the key ResolveKey
// derives without any.
func TestResolveKeyHasNoRequestID(t *testing.T) {
	typ := reflect.TypeFor[KeyInput]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if n := strings.ToLower(f.Name); strings.Contains(n, "id") && f.Name != "HostIDKeys" {
			t.Errorf("KeyInput.%s: a request id must not be a key input", f.Name)
		}
	}

	h := newGateHarness(t, func(c *Config) { c.Keys.Window = Duration(time.Minute) })
	cs := h.connect(nil)
	args := map[string]any{"order": "rpcid", "amount": 3}
	first := mustCall(t, cs, "charge", args, nil)
	second := mustCall(t, cs, "charge", args, nil)
	canonical, _, err := CanonicalArguments(mustJSON(t, args))
	if err != nil {
		t.Fatal(err)
	}
	in := KeyInput{Scope: []string{DefaultScope}, Upstream: "pay", Tool: "charge", LedgerTool: "pay.charge", Arguments: canonical,
		Derive: true, Window: time.Minute, Now: h.time()}
	want, _, _ := ResolveKey(in)
	if first.Meta[MetaKey] != want.Ledger || first.Meta[MetaKeySource] != string(SourceDerived) {
		t.Errorf("first call's key %v (%v), want %s", first.Meta[MetaKey], first.Meta[MetaKeySource], want.Ledger)
	}
	if !replayed(second) || second.Meta[MetaKey] != want.Ledger || h.up.count("rpcid") != 1 {
		t.Errorf("second call (a new JSON-RPC id): %+v, %d effects", second.Meta, h.up.count("rpcid"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := h.ledger.Get(ctx, want.Ledger, client.GetOptions{}); err != nil {
		t.Errorf("the ledger has no intent under %s: %v", want.Ledger, err)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
