package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/intentledger/intentd/frontend/mcpgate"
)

// These tests read the command's flags, environment and configuration file
// in process; nothing is built or started.

// gateFile is a configuration file in the shape of docs/mcp.md's example.
const gateFile = `{
  "upstreams": [
    { "name": "pay", "command": ["pay-mcp", "--flag with space"], "env": { "LOG_LEVEL": "warn" }, "dir": "/srv" },
    { "name": "crm", "url": "https://crm.internal/mcp", "headers": { "Authorization": "Bearer x" }, "prefix": "" }
  ],
  "tools": [
    { "match": "pay__list_*", "mode": "pass" },
    { "match": "pay__refund", "ledger_tool": "payments.refund", "lease": "2m", "timeout": "1m", "window": "1h", "policy": "refunds" },
    { "match": "log_call", "derive": false },
    { "match": "delete_*", "mode": "block" }
  ],
  "scope": "team-billing",
  "scope_headers": ["Authorization"],
  "session_scope": true,
  "host_id_keys": ["claudecode/toolUseId", "other/callId"],
  "window": "20m",
  "default_mode": "gate",
  "lease": "45s",
  "call_timeout": "3m"
}`

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gate.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func parse(t *testing.T, getenv func(string) string, args ...string) (config, string, error) {
	t.Helper()
	if getenv == nil {
		getenv = env(nil)
	}
	var stderr bytes.Buffer
	c, err := parseConfig(args, getenv, &stderr)
	return c, stderr.String(), err
}

func ptr[T any](v T) *T { return &v }

func TestParseConfigFile(t *testing.T) {
	file := writeFile(t, gateFile)
	c, _, err := parse(t, nil, "--ledger", "http://n1:8101, http://n2:8101,", "--config", file,
		"--upstream", "web=http://127.0.0.1:9000/mcp", "--upstream", "tick=tick-mcp --fast", "--name", "cli", "--", "srv", "--x", "y z")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.ledger, []string{"http://n1:8101", "http://n2:8101"}) {
		t.Errorf("ledger %q", c.ledger)
	}
	// Upstreams: the file's, then --upstream flags, then the command after --.
	wantUps := []mcpgate.Upstream{
		{Name: "pay", Command: []string{"pay-mcp", "--flag with space"}, Env: map[string]string{"LOG_LEVEL": "warn"}, Dir: "/srv"},
		{Name: "crm", URL: "https://crm.internal/mcp", Headers: map[string]string{"Authorization": "Bearer x"}, Prefix: ptr("")},
		{Name: "web", URL: "http://127.0.0.1:9000/mcp"},
		{Name: "tick", Command: []string{"tick-mcp", "--fast"}},
		{Name: "cli", Command: []string{"srv", "--x", "y z"}},
	}
	if !reflect.DeepEqual(c.upstreams, wantUps) {
		t.Errorf("upstreams\n%+v\nwant\n%+v", c.upstreams, wantUps)
	}
	wantTools := []mcpgate.ToolRule{
		{Match: "pay__list_*", Mode: mcpgate.ModePass},
		{Match: "pay__refund", LedgerTool: "payments.refund", Lease: mcpgate.Duration(2 * time.Minute), Timeout: mcpgate.Duration(time.Minute),
			Window: mcpgate.Duration(time.Hour), Policy: "refunds"},
		{Match: "log_call", Derive: ptr(false)},
		{Match: "delete_*", Mode: mcpgate.ModeBlock},
	}
	if !reflect.DeepEqual(c.tools, wantTools) {
		t.Errorf("tools\n%+v\nwant\n%+v", c.tools, wantTools)
	}
	wantKeys := mcpgate.KeyPolicy{Scope: "team-billing", ScopeHeaders: []string{"Authorization"}, SessionScope: true,
		HostIDKeys: []string{"claudecode/toolUseId", "other/callId"}, Window: mcpgate.Duration(20 * time.Minute), DefaultMode: mcpgate.ModeGate}
	if !reflect.DeepEqual(c.keys, wantKeys) {
		t.Errorf("keys\n%+v\nwant\n%+v", c.keys, wantKeys)
	}
	if c.lease != 45*time.Second || c.callTimeout != 3*time.Minute {
		t.Errorf("lease %v, call timeout %v; want the file's 45s and 3m", c.lease, c.callTimeout)
	}
	// What the file does not set keeps the flags' defaults.
	if c.maxWait != mcpgate.DefaultMaxWait || c.ledgerTimeout != mcpgate.DefaultLedgerTimeout || c.reportTimeout != mcpgate.DefaultReportTimeout ||
		c.maxPayload != mcpgate.DefaultMaxPayload || c.maxResult != mcpgate.DefaultMaxResult || c.commit || c.listen != "" {
		t.Errorf("defaults changed: %+v", c)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, _, err := parse(t, nil, "--ledger", "http://n1:8101", "--", "srv")
	if err != nil {
		t.Fatal(err)
	}
	want := mcpgate.KeyPolicy{Scope: mcpgate.DefaultScope, Window: mcpgate.Duration(mcpgate.DefaultWindow), DefaultMode: mcpgate.ModeAuto,
		HostIDKeys: mcpgate.DefaultHostIDKeys}
	if !reflect.DeepEqual(c.keys, want) || c.tools != nil {
		t.Errorf("keys %+v, tools %+v; want %+v and no rules", c.keys, c.tools, want)
	}
	if !reflect.DeepEqual(c.upstreams, []mcpgate.Upstream{{Name: mcpgate.DefaultUpstreamName, Command: []string{"srv"}}}) {
		t.Errorf("upstreams %+v", c.upstreams)
	}
	if c.lease != 0 || c.callTimeout != mcpgate.DefaultCallTimeout {
		t.Errorf("lease %v, call timeout %v", c.lease, c.callTimeout)
	}
}

// TestParseConfigPrecedence: flags win over the environment, the
// environment over the file, the file over the defaults (docs/mcp.md).
func TestParseConfigPrecedence(t *testing.T) {
	file := writeFile(t, `{"upstreams":[{"name":"pay","command":["srv"]}],"scope":"file","window":"2m","default_mode":"pass",
		"host_id_keys":["file/id"],"lease":"40s","call_timeout":"4m"}`)
	bare := writeFile(t, `{"upstreams":[{"name":"pay","command":["srv"]}]}`)
	noIDs := writeFile(t, `{"upstreams":[{"name":"pay","command":["srv"]}],"host_id_keys":[]}`)
	type got struct {
		scope       string
		window      time.Duration
		mode        mcpgate.Mode
		hostIDs     []string
		lease, call time.Duration
	}
	fileWants := got{"file", 2 * time.Minute, mcpgate.ModePass, []string{"file/id"}, 40 * time.Second, 4 * time.Minute}
	cases := []struct {
		name string
		file string
		env  map[string]string
		args []string
		want got
	}{
		{name: "the file over the defaults", file: file, want: fileWants},
		{name: "defaults without the file's settings", file: bare,
			want: got{mcpgate.DefaultScope, mcpgate.DefaultWindow, mcpgate.ModeAuto, mcpgate.DefaultHostIDKeys, 0, mcpgate.DefaultCallTimeout}},
		{name: "flags over the file", file: file,
			args: []string{"--scope", "flag", "--window", "3m", "--default-mode", "gate", "--host-id-keys", "a/id, b/id", "--lease", "5s", "--call-timeout", "1m"},
			want: got{"flag", 3 * time.Minute, mcpgate.ModeGate, []string{"a/id", "b/id"}, 5 * time.Second, time.Minute}},
		{name: "the environment over the file", file: file,
			env: map[string]string{"INTENT_MCP_SCOPE": "env", "INTENT_MCP_WINDOW": "4m", "INTENT_MCP_DEFAULT_MODE": "gate",
				"INTENT_MCP_HOST_ID_KEYS": "env/id", "INTENT_MCP_LEASE": "6s", "INTENT_MCP_CALL_TIMEOUT": "2m"},
			want: got{"env", 4 * time.Minute, mcpgate.ModeGate, []string{"env/id"}, 6 * time.Second, 2 * time.Minute}},
		{name: "flags over the environment", file: file,
			env:  map[string]string{"INTENT_MCP_SCOPE": "env", "INTENT_MCP_WINDOW": "4m", "INTENT_MCP_LEASE": "6s"},
			args: []string{"--scope", "flag", "--window", "3m", "--lease", "5s"},
			want: got{"flag", 3 * time.Minute, mcpgate.ModePass, []string{"file/id"}, 5 * time.Second, 4 * time.Minute}},
		{name: "flags set to their default values still win", file: file,
			args: []string{"--scope", "default", "--window", "10m", "--default-mode", "auto", "--lease", "0", "--call-timeout", "5m"},
			want: got{"default", 10 * time.Minute, mcpgate.ModeAuto, []string{"file/id"}, 0, 5 * time.Minute}},
		{name: "host ids none by flag", file: file, args: []string{"--host-id-keys", "none"},
			want: got{"file", 2 * time.Minute, mcpgate.ModePass, []string{}, 40 * time.Second, 4 * time.Minute}},
		{name: "host ids empty by flag", file: file, args: []string{"--host-id-keys="},
			want: got{"file", 2 * time.Minute, mcpgate.ModePass, []string{}, 40 * time.Second, 4 * time.Minute}},
		{name: "host ids none by the file", file: noIDs,
			want: got{mcpgate.DefaultScope, mcpgate.DefaultWindow, mcpgate.ModeAuto, []string{}, 0, mcpgate.DefaultCallTimeout}},
		{name: "an empty variable is unset", file: file, env: map[string]string{"INTENT_MCP_SCOPE": "", "INTENT_MCP_HOST_ID_KEYS": ""}, want: fileWants},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parse(t, env(tc.env), append([]string{"--ledger", "http://n1:8101", "--config", tc.file}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			g := got{c.keys.Scope, time.Duration(c.keys.Window), c.keys.DefaultMode, c.keys.HostIDKeys, c.lease, c.callTimeout}
			if !reflect.DeepEqual(g, tc.want) {
				t.Errorf("got  %+v\nwant %+v", g, tc.want)
			}
			// nil would make the gate read the default host id key: "none"
			// must reach it as an empty, non-nil list.
			if len(tc.want.hostIDs) == 0 && c.keys.HostIDKeys == nil {
				t.Error("host id keys nil: the gate would read the default")
			}
		})
	}

	// --api-key, then INTENT_MCP_API_KEY, then INTENTD_API_KEY.
	for _, tc := range []struct {
		env  map[string]string
		args []string
		want string
	}{
		{env: map[string]string{"INTENTD_API_KEY": "ik_b"}, want: "ik_b"},
		{env: map[string]string{"INTENTD_API_KEY": "ik_b", "INTENT_MCP_API_KEY": "ik_a"}, want: "ik_a"},
		{env: map[string]string{"INTENTD_API_KEY": "ik_b", "INTENT_MCP_API_KEY": "ik_a"}, args: []string{"--api-key", "ik_f"}, want: "ik_f"},
	} {
		c, _, err := parse(t, env(tc.env), append([]string{"--ledger", "http://n1:8101", "--config", bare}, tc.args...)...)
		if err != nil || c.apiKey != tc.want {
			t.Errorf("env %v args %v: api key %q (%v), want %q", tc.env, tc.args, c.apiKey, err, tc.want)
		}
	}
}

// TestParseConfigUpstreamFromEnvOrFlags: INTENT_MCP_UPSTREAM is the
// upstream when no --upstream is given; --upstream flags replace it, as any
// flag given on the command line wins over its environment variable.
func TestParseConfigUpstreamFromEnvOrFlags(t *testing.T) {
	e := env(map[string]string{"INTENT_MCP_UPSTREAM": "envsrv=http://env:9000/mcp"})
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "the environment alone", want: []string{"envsrv"}},
		{name: "one flag", args: []string{"--upstream", "pay=http://pay:9000/mcp"}, want: []string{"pay"}},
		{name: "two flags", args: []string{"--upstream", "pay=http://pay:9000/mcp", "--upstream", "mail=srv --stdio"}, want: []string{"pay", "mail"}},
		{name: "a command after --", args: []string{"--", "srv"}, want: []string{"envsrv", "main"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parse(t, e, append([]string{"--ledger", "http://n1"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, u := range c.upstreams {
				names = append(names, u.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("upstreams %v, want %v", names, tc.want)
			}
		})
	}
}

func TestParseConfigRefuses(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.json")
	cases := []struct {
		name string
		file string // content; "" for no --config
		env  map[string]string
		args []string
		want []string // all in the error
	}{
		{name: "no ledger", args: []string{"--", "srv"}, want: []string{"--ledger is required"}},
		{name: "an empty ledger list", args: []string{"--ledger", " , ", "--", "srv"}, want: []string{"--ledger is required"}},
		{name: "no upstream", args: []string{"--ledger", "http://n1"}, want: []string{"no upstream"}},
		{name: "no upstream in the file either", file: `{"upstreams":[]}`, args: []string{"--ledger", "http://n1"}, want: []string{"no upstream"}},
		{name: "a missing file", args: []string{"--ledger", "http://n1", "--config", missing}, want: []string{"--config", "absent.json"}},
		{name: "an unknown field", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"scopes":"x"}`,
			want: []string{"--config", "gate.json", `unknown field "scopes"`}},
		{name: "an unknown upstream field", file: `{"upstreams":[{"name":"pay","commands":["srv"]}]}`, want: []string{`unknown field "commands"`}},
		{name: "an unknown rule field", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"tools":[{"match":"*","ledgerTool":"x"}]}`,
			want: []string{`unknown field "ledgerTool"`}},
		{name: "a duration that is a number", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"lease":30}`, want: []string{"a duration is a string"}},
		{name: "a negative duration", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"call_timeout":"-5m"}`, want: []string{`"-5m" is negative`}},
		{name: "a bad duration", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"window":"soon"}`, want: []string{`"soon"`}},
		{name: "not JSON", file: `upstreams: [pay]`, want: []string{"--config", "invalid character"}},
		{name: "two JSON values", file: `{"upstreams":[{"name":"pay","command":["srv"]}]} {}`, want: []string{"data after the JSON value"}},
		{name: "a stray brace", file: `{"upstreams":[{"name":"pay","command":["srv"]}]}}`, want: []string{"data after the JSON value"}},
		{name: "a bad --upstream", args: []string{"--ledger", "http://n1", "--upstream", "pay"}, want: []string{"want NAME=URL or NAME=COMMAND"}},
		{name: "a bad --upstream name", args: []string{"--ledger", "http://n1", "--upstream", "p__y=srv"}, want: []string{`upstream name "p__y"`}},
		{name: "an unknown flag", args: []string{"--ledger", "http://n1", "--scpoe", "x", "--", "srv"}, want: []string{"flag provided but not defined: -scpoe"}},
		{name: "a bad flag duration", args: []string{"--ledger", "http://n1", "--window", "10", "--", "srv"}, want: []string{"-window"}},
		{name: "an OTLP endpoint that is no URL", args: []string{"--ledger", "http://n1", "--otlp-endpoint", "collector:4318", "--", "srv"}, want: []string{"--otlp-endpoint", "http://"}},
		{name: "a bad OTLP endpoint in the environment", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "grpc://c:4317"}, args: []string{"--ledger", "http://n1", "--", "srv"},
			want: []string{"grpc://c:4317"}},
		{name: "a bad environment value", env: map[string]string{"INTENT_MCP_MAX_WAIT": "long"}, args: []string{"--ledger", "http://n1", "--", "srv"},
			want: []string{"INTENT_MCP_MAX_WAIT", `"long"`}},
		{name: "a bad --upstream in the environment", env: map[string]string{"INTENT_MCP_UPSTREAM": "=srv"}, args: []string{"--ledger", "http://n1"},
			want: []string{"INTENT_MCP_UPSTREAM"}},
		{name: "a zero --max-payload", args: []string{"--ledger", "http://n1", "--max-payload", "0", "--", "srv"}, want: []string{"--max-payload and --max-result must be positive"}},
		{name: "a negative --max-result", args: []string{"--ledger", "http://n1", "--max-result", "-1", "--", "srv"}, want: []string{"must be positive"}},
		{name: "a negative --lease", args: []string{"--ledger", "http://n1", "--lease", "-1s", "--", "srv"}, want: []string{"durations must be positive"}},
		{name: "a zero --max-wait", args: []string{"--ledger", "http://n1", "--max-wait", "0s", "--", "srv"}, want: []string{"durations must be positive"}},
		{name: "a zero --call-timeout", args: []string{"--ledger", "http://n1", "--call-timeout", "0s", "--", "srv"}, want: []string{"durations must be positive"}},
		{name: "a zero --shutdown-timeout", args: []string{"--ledger", "http://n1", "--shutdown-timeout", "0s", "--", "srv"}, want: []string{"durations must be positive"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.file != "" {
				args = append([]string{"--ledger", "http://n1", "--config", writeFile(t, tc.file)}, args...)
			}
			_, stderr, err := parse(t, env(tc.env), args...)
			if err == nil {
				t.Fatalf("accepted %v", args)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error()+stderr, w) {
					t.Errorf("error %q (stderr %q) does not say %q", err, stderr, w)
				}
			}
		})
	}
	if _, _, err := parse(t, nil, "--help"); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("--help: %v", err)
	}
}

// TestRunRefusesBadSetups runs the command in process with setups that
// parse but that the gate refuses (modes, windows, names, prefixes): it
// exits 1 or 2 with the reason, and starts nothing.
func TestRunRefusesBadSetups(t *testing.T) {
	cases := []struct {
		name string
		file string
		args []string
		code int
		want string
	}{
		{name: "a bad mode", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"tools":[{"match":"*","mode":"deny"}]}`,
			code: 1, want: `mode \"deny\": want gate, pass, block or auto`},
		{name: "default mode block", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"default_mode":"block"}`,
			code: 1, want: `default_mode \"block\"`},
		{name: "a bad --default-mode", args: []string{"--default-mode", "never"}, code: 1, want: `default_mode \"never\"`},
		{name: "a window under a second", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"window":"500ms"}`,
			code: 1, want: "window 500ms is under 1s"},
		{name: "a --window under a second", args: []string{"--window", "10ms"}, code: 1, want: "window 10ms is under 1s"},
		{name: "a rule window under a second", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"tools":[{"match":"*","window":"1ms"}]}`,
			code: 1, want: "window 1ms is under 1s"},
		{name: "a name in the file and a flag", file: `{"upstreams":[{"name":"main","command":["srv"]}]}`,
			code: 1, want: `upstream name \"main\" is used twice`},
		{name: "a bad --name", args: []string{"--name", "a__b"}, code: 1, want: `upstream name \"a__b\"`},
		{name: "a bad url in the file", file: `{"upstreams":[{"name":"pay","url":"ftp://x/mcp"}]}`, code: 1, want: `url \"ftp://x/mcp\"`},
		{name: "command and url", file: `{"upstreams":[{"name":"pay","url":"http://x/mcp","command":["srv"]}]}`, code: 1, want: "not both"},
		{name: "the same prefix twice", file: `{"upstreams":[{"name":"pay","command":["a"]},{"name":"crm","command":["b"],"prefix":"pay"}]}`,
			code: 1, want: `same prefix \"pay\"`},
		{name: "a bad pattern", file: `{"upstreams":[{"name":"pay","command":["srv"]}],"tools":[{"match":"[","mode":"gate"}]}`,
			code: 1, want: `tool rule \"[\"`},
		{name: "a bad log format", args: []string{"--log-format", "xml"}, code: 2, want: "--log-format must be text or json"},
		{name: "an unknown field", file: `{"upstreams":[],"mode":"gate"}`, code: 2, want: `unknown field "mode"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--ledger", "http://127.0.0.1:1", "--start-timeout", "1s", "--shutdown-timeout", "1s", "--log-format", "json"}
			if tc.file != "" {
				args = append(args, "--config", writeFile(t, tc.file))
			}
			args = append(append(args, tc.args...), "--", "intent-mcp-test-no-such-command")
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), args, env(nil), io.NopCloser(strings.NewReader("")), nopWriteCloser{&stdout}, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, want %d; stderr %s\nwant it to say %s", code, tc.code, stderr.String(), tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q: stdio hosts read it", stdout.String())
			}
		})
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// TestParseConfigOTLPEndpoint: parseConfig resolves its --otlp-endpoint
// and the environment with tracing.Endpoint (whose own test covers the
// order and the checks; TestParseConfigErrors the refusals): the flag and
// the standard variable reach the config.
func TestParseConfigOTLPEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag", nil, []string{"--otlp-endpoint", "http://c:4318"}, "http://c:4318"},
		{"standard variable", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, nil, "http://c:4318/v1/traces"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, err := parse(t, env(tc.env), append(append([]string{"--ledger", "http://n1:8101"}, tc.args...), "--", "srv")...)
			if err != nil {
				t.Fatal(err)
			}
			if c.otlpEndpoint != tc.want {
				t.Errorf("otlpEndpoint %q, want %q", c.otlpEndpoint, tc.want)
			}
		})
	}
}
