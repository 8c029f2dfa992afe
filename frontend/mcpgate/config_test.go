package mcpgate

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// docExample is the configuration file of docs/mcp.md.
const docExample = `{
  "upstreams": [
    { "name": "pay", "command": ["npx", "-y", "some-payments-mcp-server"], "env": { "LOG_LEVEL": "warn" } },
    { "name": "crm", "url": "https://crm.internal/mcp", "headers": { "Authorization": "Bearer …" }, "prefix": "crm" }
  ],
  "tools": [
    { "match": "pay__list_*", "mode": "pass" },
    { "match": "pay__refund", "ledger_tool": "payments.refund", "lease": "2m" },
    { "match": "crm__log_call", "derive": false },
    { "match": "crm__delete_*", "mode": "block" }
  ],
  "scope": "team-billing",
  "scope_headers": ["Authorization"],
  "host_id_keys": ["claudecode/toolUseId"],
  "window": "10m",
  "default_mode": "auto",
  "lease": "30s",
  "call_timeout": "5m"
}`

func ptr[T any](v T) *T { return &v }

func TestParseFileDocExample(t *testing.T) {
	f, err := ParseFile([]byte(docExample))
	if err != nil {
		t.Fatal(err)
	}
	want := &File{
		Upstreams: []Upstream{
			{Name: "pay", Command: []string{"npx", "-y", "some-payments-mcp-server"}, Env: map[string]string{"LOG_LEVEL": "warn"}},
			{Name: "crm", URL: "https://crm.internal/mcp", Headers: map[string]string{"Authorization": "Bearer …"}, Prefix: ptr("crm")},
		},
		Tools: []ToolRule{
			{Match: "pay__list_*", Mode: ModePass},
			{Match: "pay__refund", LedgerTool: "payments.refund", Lease: Duration(2 * time.Minute)},
			{Match: "crm__log_call", Derive: ptr(false)},
			{Match: "crm__delete_*", Mode: ModeBlock},
		},
		KeyPolicy: KeyPolicy{Scope: "team-billing", ScopeHeaders: []string{"Authorization"}, HostIDKeys: []string{"claudecode/toolUseId"},
			Window: Duration(10 * time.Minute), DefaultMode: ModeAuto},
		Lease: Duration(30 * time.Second), CallTimeout: Duration(5 * time.Minute),
	}
	if !reflect.DeepEqual(f, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", f, want)
	}
	// And the gate takes it.
	if _, err := New(Config{Upstreams: f.Upstreams, Tools: f.Tools, Keys: f.KeyPolicy, Ledger: dummyLedger(t)}); err != nil {
		t.Errorf("New refuses the documented file: %v", err)
	}
}

func TestParseFileRefuses(t *testing.T) {
	cases := []struct{ name, file, want string }{
		{"unknown field", `{"upstreams":[],"windw":"1m"}`, `unknown field "windw"`},
		{"unknown upstream field", `{"upstreams":[{"name":"a","cmd":["x"]}]}`, `unknown field "cmd"`},
		{"unknown rule field", `{"upstreams":[],"tools":[{"match":"*","mod":"pass"}]}`, `unknown field "mod"`},
		{"transport is not a file field", `{"upstreams":[{"name":"a","Transport":null}]}`, `unknown field "Transport"`},
		{"duration as a number", `{"upstreams":[],"window":600}`, `a duration is a string such as "30s"`},
		{"duration without a unit", `{"upstreams":[],"lease":"30"}`, `missing unit`},
		{"negative duration", `{"upstreams":[],"tools":[{"match":"*","timeout":"-1s"}]}`, `duration "-1s" is negative`},
		{"upstreams not a list", `{"upstreams":{"name":"a"}}`, `cannot unmarshal`},
		{"derive not a boolean", `{"upstreams":[],"tools":[{"match":"*","derive":"no"}]}`, `cannot unmarshal`},
		{"not an object", `["upstreams"]`, `cannot unmarshal`},
		{"empty", ``, `EOF`},
		{"truncated", `{"upstreams":[`, `unexpected EOF`},
		{"two objects", `{"upstreams":[]} {"upstreams":[]}`, `data after the JSON value`},
		{"data after the object", `{"upstreams":[]} x`, `after`},
		{"a stray closing brace", `{"upstreams":[]}}`, `after`},
		{"a stray closing bracket", "{\"upstreams\":[]}\n]\n", `after`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFile([]byte(tc.file))
			if err == nil || f != nil {
				t.Fatalf("ParseFile(%s) = %+v, %v; want an error", tc.file, f, err)
			}
			if !strings.HasPrefix(err.Error(), "config: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
	for _, ok := range []string{`{}`, "{\"upstreams\":[]}\n", " \t{\"upstreams\":[]} \r\n\n"} {
		if _, err := ParseFile([]byte(ok)); err != nil {
			t.Errorf("ParseFile(%q): %v", ok, err)
		}
	}
}

func TestParseUpstreamFlag(t *testing.T) {
	cases := []struct {
		flag string
		want Upstream
		err  string
	}{
		{flag: "pay=http://127.0.0.1:9000/mcp", want: Upstream{Name: "pay", URL: "http://127.0.0.1:9000/mcp"}},
		{flag: "pay=https://pay.example/mcp", want: Upstream{Name: "pay", URL: "https://pay.example/mcp"}},
		{flag: " crm = crm-mcp  --stdio -v ", want: Upstream{Name: "crm", Command: []string{"crm-mcp", "--stdio", "-v"}}},
		{flag: "a-b_C9=x", want: Upstream{Name: "a-b_C9", Command: []string{"x"}}},
		{flag: "pay=x=y", want: Upstream{Name: "pay", Command: []string{"x=y"}}},
		{flag: "pay", err: "want NAME=URL or NAME=COMMAND"},
		{flag: "pay=", err: "want NAME=URL or NAME=COMMAND"},
		{flag: "pay=   ", err: "want NAME=URL or NAME=COMMAND"},
		{flag: "=cmd", err: `upstream name ""`},
		{flag: "pa__y=cmd", err: `upstream name "pa__y"`},
		{flag: "pa.y=cmd", err: `upstream name "pa.y"`},
		{flag: strings.Repeat("a", 65) + "=cmd", err: "upstream name"},
		{flag: "pay=http://", err: "url \"http://\": want http(s)://host[:port]/path"},
	}
	for _, tc := range cases {
		t.Run(tc.flag, func(t *testing.T) {
			got, err := ParseUpstreamFlag(tc.flag)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Errorf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	if _, err := ParseUpstreamFlag(strings.Repeat("a", 64) + "=cmd"); err != nil {
		t.Errorf("a 64-byte name: %v", err)
	}
}

// dummyLedger is a client of a ledger nobody asks: New does not call it.
func dummyLedger(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New([]string{"http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewValidatesTheSetup(t *testing.T) {
	cmd := func(name string) Upstream { return Upstream{Name: name, Command: []string{"srv"}} }
	cases := []struct {
		name   string
		change func(*Config)
		want   string // "": accepted
	}{
		{name: "one command upstream", change: func(*Config) {}},
		{name: "an HTTP upstream", change: func(c *Config) { c.Upstreams = []Upstream{{Name: "pay", URL: "https://pay.example/mcp"}} }},
		{name: "an embedded transport", change: func(c *Config) {
			c.Upstreams = []Upstream{{Name: "pay", Transport: func() mcp.Transport { return nil }}}
		}},
		{name: "several upstreams prefixed by name", change: func(c *Config) { c.Upstreams = []Upstream{cmd("pay"), cmd("crm")} }},
		{name: "several upstreams without prefixes", change: func(c *Config) {
			c.Upstreams = []Upstream{{Name: "pay", Command: []string{"a"}, Prefix: ptr("")}, {Name: "crm", Command: []string{"b"}, Prefix: ptr("")}}
		}},
		{name: "a prefix of one's own", change: func(c *Config) {
			c.Upstreams = []Upstream{{Name: "pay", Command: []string{"a"}, Prefix: ptr("p")}, cmd("crm")}
		}},
		{name: "rules and key policy", change: func(c *Config) {
			c.Tools = []ToolRule{{Match: "*", Mode: ModeBlock, Window: Duration(time.Second)}, {Match: "pay__[a-c]*", Mode: ModeAuto}, {Match: "x", LedgerTool: strings.Repeat("t", 256)}}
			c.Keys = KeyPolicy{DefaultMode: ModeGate, Window: Duration(time.Second), HostIDKeys: []string{}}
		}},

		{name: "no upstream", change: func(c *Config) { c.Upstreams = nil }, want: "no upstream"},
		{name: "an empty name", change: func(c *Config) { c.Upstreams = []Upstream{cmd("")} }, want: `upstream name ""`},
		{name: "a name with the separator", change: func(c *Config) { c.Upstreams = []Upstream{cmd("a__b")} }, want: `upstream name "a__b"`},
		{name: "a name twice", change: func(c *Config) { c.Upstreams = []Upstream{cmd("pay"), cmd("pay")} }, want: `upstream name "pay" is used twice`},
		{name: "neither command nor url", change: func(c *Config) { c.Upstreams = []Upstream{{Name: "pay"}} }, want: "give a command or a url"},
		{name: "both command and url", change: func(c *Config) {
			c.Upstreams = []Upstream{{Name: "pay", Command: []string{"srv"}, URL: "http://x/mcp"}}
		}, want: "not both"},
		{name: "an empty command", change: func(c *Config) { c.Upstreams = []Upstream{{Name: "pay", Command: []string{""}}} }, want: "the command is empty"},
		{name: "a url that is not http", change: func(c *Config) { c.Upstreams = []Upstream{{Name: "pay", URL: "ftp://x/mcp"}} }, want: `url "ftp://x/mcp"`},
		{name: "a url without host", change: func(c *Config) { c.Upstreams = []Upstream{{Name: "pay", URL: "http:///mcp"}} }, want: `url "http:///mcp"`},
		{name: "a bad prefix", change: func(c *Config) { c.Upstreams = []Upstream{{Name: "pay", Command: []string{"a"}, Prefix: ptr("p__q")}} },
			want: `prefix "p__q"`},
		{name: "a prefix that is another upstream's name", change: func(c *Config) {
			c.Upstreams = []Upstream{cmd("pay"), {Name: "crm", Command: []string{"b"}, Prefix: ptr("pay")}}
		}, want: `upstreams pay and crm have the same prefix "pay"`},
		{name: "a rule without match", change: func(c *Config) { c.Tools = []ToolRule{{Mode: ModeGate}} }, want: "match is required"},
		{name: "a bad pattern", change: func(c *Config) { c.Tools = []ToolRule{{Match: "pay__[", Mode: ModeGate}} }, want: `tool rule "pay__["`},
		{name: "a bad mode", change: func(c *Config) { c.Tools = []ToolRule{{Match: "*", Mode: "deny"}} }, want: `mode "deny": want gate, pass, block or auto`},
		{name: "a rule window under a second", change: func(c *Config) { c.Tools = []ToolRule{{Match: "*", Window: Duration(999 * time.Millisecond)}} },
			want: "window 999ms is under 1s"},
		{name: "a ledger tool over 256 bytes", change: func(c *Config) { c.Tools = []ToolRule{{Match: "*", LedgerTool: strings.Repeat("t", 257)}} },
			want: `tool rule "*": ledger_tool: invalid tool name`},
		{name: "a ledger tool with upper case", change: func(c *Config) { c.Tools = []ToolRule{{Match: "*", LedgerTool: "Payments.Refund"}} },
			want: `ledger_tool: invalid tool name: "Payments.Refund"`},
		{name: "a ledger tool with a slash", change: func(c *Config) { c.Tools = []ToolRule{{Match: "*", LedgerTool: "payments/refund"}} },
			want: `byte '/' is not allowed here`},
		{name: "a ledger tool with an empty segment", change: func(c *Config) { c.Tools = []ToolRule{{Match: "*", LedgerTool: "payments..refund"}} },
			want: "empty segment"},
		{name: "default mode block", change: func(c *Config) { c.Keys.DefaultMode = ModeBlock }, want: `default_mode "block": want auto, gate or pass`},
		{name: "a bad default mode", change: func(c *Config) { c.Keys.DefaultMode = "GATE" }, want: `default_mode "GATE"`},
		{name: "a window under a second", change: func(c *Config) { c.Keys.Window = Duration(500 * time.Millisecond) }, want: "window 500ms is under 1s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Upstreams: []Upstream{cmd("pay")}, Ledger: dummyLedger(t)}
			tc.change(&cfg)
			g, err := New(cfg)
			if tc.want == "" {
				if err != nil || g == nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{Upstreams: []Upstream{cmd("pay")}}); err == nil {
		t.Error("New without a ledger")
	}
	// The scope New defaults cannot be empty; validateSetup refuses one.
	if err := validateSetup([]Upstream{cmd("pay")}, nil, KeyPolicy{}); err == nil || !strings.Contains(err.Error(), "scope is empty") {
		t.Errorf("empty scope: %v", err)
	}
}

func TestClassify(t *testing.T) {
	no, yes := false, true
	readOnly := &mcp.ToolAnnotations{ReadOnlyHint: true}
	cases := []struct {
		name        string
		rule        *ToolRule
		defaultMode Mode
		ann         *mcp.ToolAnnotations
		want        Mode
	}{
		{name: "no annotations", want: ModeGate},
		{name: "empty annotations", ann: &mcp.ToolAnnotations{}, want: ModeGate},
		{name: "destructive", ann: &mcp.ToolAnnotations{DestructiveHint: &yes}, want: ModeGate},
		{name: "additive (destructiveHint false)", ann: &mcp.ToolAnnotations{DestructiveHint: &no}, want: ModeGate},
		{name: "idempotent", ann: &mcp.ToolAnnotations{IdempotentHint: true}, want: ModeGate},
		{name: "open world", ann: &mcp.ToolAnnotations{OpenWorldHint: &yes}, want: ModeGate},
		{name: "read-only", ann: readOnly, want: ModePass},
		{name: "read-only and (contradicting) destructive", ann: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, want: ModePass},
		{name: "default auto", defaultMode: ModeAuto, ann: readOnly, want: ModePass},
		{name: "default gate overrides read-only", defaultMode: ModeGate, ann: readOnly, want: ModeGate},
		{name: "default pass passes a destructive tool", defaultMode: ModePass, ann: &mcp.ToolAnnotations{DestructiveHint: &yes}, want: ModePass},
		{name: "rule gate over read-only", rule: &ToolRule{Mode: ModeGate}, ann: readOnly, want: ModeGate},
		{name: "rule gate over default pass", rule: &ToolRule{Mode: ModeGate}, defaultMode: ModePass, want: ModeGate},
		{name: "rule pass over default gate", rule: &ToolRule{Mode: ModePass}, defaultMode: ModeGate, want: ModePass},
		{name: "rule block", rule: &ToolRule{Mode: ModeBlock}, ann: readOnly, want: ModeBlock},
		{name: "rule block over default pass", rule: &ToolRule{Mode: ModeBlock}, defaultMode: ModePass, want: ModeBlock},
		{name: "a rule without mode defers", rule: &ToolRule{Derive: &no}, ann: readOnly, want: ModePass},
		{name: "a rule without mode defers to the default", rule: &ToolRule{Derive: &no}, defaultMode: ModeGate, ann: readOnly, want: ModeGate},
		// Classify's documented order: "auto" on a rule is no mode, so
		// default_mode still applies.
		{name: "rule auto defers to the default", rule: &ToolRule{Mode: ModeAuto}, defaultMode: ModeGate, ann: readOnly, want: ModeGate},
		{name: "rule auto, default auto", rule: &ToolRule{Mode: ModeAuto}, ann: readOnly, want: ModePass},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.rule, tc.defaultMode, tc.ann); got != tc.want {
				t.Errorf("Classify = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestMatchRuleAndNames(t *testing.T) {
	rules := []ToolRule{{Match: "pay__list_*", Mode: ModePass}, {Match: "pay__*", Mode: ModeGate}, {Match: "*", Mode: ModeBlock}}
	for name, want := range map[string]string{
		"pay__list_charges": "pay__list_*", // the first match, not the most specific
		"pay__charge":       "pay__*",
		"crm__note":         "*",
		"charge":            "*",
	} {
		if r := matchRule(rules, name); r == nil || r.Match != want {
			t.Errorf("%s: rule %+v, want %s", name, r, want)
		}
	}
	if r := matchRule(rules[:2], "crm__note"); r != nil {
		t.Errorf("crm__note matched %+v", r)
	}
	if r := matchRule([]ToolRule{{Match: "pay"}}, "pay__charge"); r != nil {
		t.Errorf("a pattern matched a longer name: %+v", r)
	}

	for _, tc := range []struct {
		u    Upstream
		n    int
		want string
	}{
		{Upstream{Name: "pay"}, 1, ""},
		{Upstream{Name: "pay"}, 2, "pay"},
		{Upstream{Name: "pay", Prefix: ptr("p")}, 1, "p"},
		{Upstream{Name: "pay", Prefix: ptr("")}, 3, ""},
	} {
		if got := effectivePrefix(tc.u, tc.n); got != tc.want {
			t.Errorf("effectivePrefix(%+v, %d) = %q, want %q", tc.u, tc.n, got, tc.want)
		}
	}
	if DownstreamName("", "charge") != "charge" || DownstreamName("pay", "charge") != "pay__charge" {
		t.Error("DownstreamName")
	}
	if DefaultLedgerTool("pay", "charge") != "pay.charge" {
		t.Error("DefaultLedgerTool")
	}
}

// TestGateToolPlans runs a gate with two upstreams and checks what it
// lists and how it would serve each tool: prefixes, modes (from rules,
// default mode, annotations), and the rules' per-tool settings.
func TestGateToolPlans(t *testing.T) {
	no := false
	type plan struct {
		mode       Mode
		noDerive   bool
		window     time.Duration
		lease      time.Duration
		timeout    time.Duration
		policy     string
		ledgerTool string
	}
	cases := []struct {
		name  string
		rules []ToolRule
		def   Mode
		want  map[string]*plan // by downstream name; nil: not listed
	}{
		{name: "from annotations", want: map[string]*plan{
			"pay__charge": {mode: ModeGate}, "pay__read": {mode: ModePass}, "crm__charge": {mode: ModeGate}, "crm__read": {mode: ModePass},
			"crm__note": {mode: ModeGate}, "crm__tag": {mode: ModeGate},
		}},
		{name: "default gate", def: ModeGate, want: map[string]*plan{
			"pay__charge": {mode: ModeGate}, "pay__read": {mode: ModeGate}, "crm__charge": {mode: ModeGate}, "crm__read": {mode: ModeGate},
			"crm__note": {mode: ModeGate}, "crm__tag": {mode: ModeGate},
		}},
		{name: "rules", def: ModeAuto, rules: []ToolRule{
			{Match: "crm__charge", Mode: ModeBlock},
			{Match: "pay__read", Mode: ModeGate, Window: Duration(2 * time.Minute), Policy: "reads"},
			{Match: "crm__*", Derive: &no, LedgerTool: "crm.any", Lease: Duration(9 * time.Second), Timeout: Duration(time.Minute)},
			{Match: "*", Mode: ModePass},
		}, want: map[string]*plan{
			"crm__charge": nil,
			"pay__read":   {mode: ModeGate, window: 2 * time.Minute, policy: "reads"},
			"crm__read":   {mode: ModePass, noDerive: true, ledgerTool: "crm.any", lease: 9 * time.Second, timeout: time.Minute},
			"crm__note":   {mode: ModeGate, noDerive: true, ledgerTool: "crm.any", lease: 9 * time.Second, timeout: time.Minute},
			"crm__tag":    {mode: ModeGate, noDerive: true, ledgerTool: "crm.any", lease: 9 * time.Second, timeout: time.Minute},
			"pay__charge": {mode: ModePass},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crm := newFakeUpstream(t)
			yes := true
			crm.server.AddTool(&mcp.Tool{Name: "note", InputSchema: map[string]any{"type": "object"}}, noop)
			crm.server.AddTool(&mcp.Tool{Name: "tag", InputSchema: map[string]any{"type": "object"},
				Annotations: &mcp.ToolAnnotations{DestructiveHint: &no, IdempotentHint: true, OpenWorldHint: &yes}}, noop)
			h := newGateHarness(t, func(c *Config) {
				c.Upstreams = append(c.Upstreams, Upstream{Name: "crm", Transport: crm.transport})
				c.Tools, c.Keys.DefaultMode = tc.rules, tc.def
				c.Keys.Window = Duration(time.Minute)
			})
			cs := h.connect(nil)
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			listed := map[string]*mcp.Tool{}
			for _, tl := range res.Tools {
				listed[tl.Name] = tl
			}
			if listed[StatusTool] == nil || listed["charge"] != nil || listed["read"] != nil {
				t.Errorf("listed %v: want the status tool and only prefixed names", slices.Sorted(maps.Keys(listed)))
			}
			for name, w := range tc.want {
				p := h.gate.planOf(name)
				if w == nil {
					if listed[name] != nil || p != nil {
						t.Errorf("%s is listed (%v)", name, p)
					}
					continue
				}
				if listed[name] == nil || p == nil {
					t.Errorf("%s is not listed", name)
					continue
				}
				if got := listed[name].Meta[MetaGate]; got != string(w.mode) {
					t.Errorf("%s: _meta %s %v, want %s", name, MetaGate, got, w.mode)
				}
				up, tool, _ := strings.Cut(name, PrefixSeparator)
				want := plan{mode: w.mode, noDerive: w.noDerive, window: time.Minute, lease: h.gate.cfg.Lease, timeout: h.gate.cfg.CallTimeout,
					ledgerTool: up + "." + tool}
				if w.window != 0 {
					want.window = w.window
				}
				if w.lease != 0 {
					want.lease = w.lease
				}
				if w.timeout != 0 {
					want.timeout = w.timeout
				}
				if w.ledgerTool != "" {
					want.ledgerTool = w.ledgerTool
				}
				want.policy = w.policy
				got := plan{mode: p.mode, noDerive: !p.derive, window: p.window, lease: p.lease, timeout: p.timeout, policy: p.policy, ledgerTool: p.ledgerTool}
				if got != want || p.up.spec.Name != up || p.tool.Name != tool {
					t.Errorf("%s: plan %+v on %s/%s, want %+v", name, got, p.up.spec.Name, p.tool.Name, want)
				}
			}
		})
	}
}

func noop(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{}, nil
}
