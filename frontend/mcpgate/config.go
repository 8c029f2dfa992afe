package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults of Config and of the configuration file.
const (
	DefaultScope         = "default"
	DefaultWindow        = 10 * time.Minute
	DefaultCallTimeout   = 5 * time.Minute
	DefaultMaxWait       = 30 * time.Second
	DefaultLedgerTimeout = 10 * time.Second
	DefaultReportTimeout = 30 * time.Second
	DefaultMaxPayload    = 64 << 10
	DefaultMaxResult     = 64 << 10
	// DefaultUpstreamName names the upstream given on the command line
	// after "--".
	DefaultUpstreamName = "main"
	// minWindow is the shortest derivation window: windows start on whole
	// seconds.
	minWindow = time.Second
)

// Mode is what the gate does with the calls of a tool.
type Mode string

// The modes. ModeAuto decides from the tool's annotations.
const (
	ModeAuto  Mode = "auto"
	ModeGate  Mode = "gate"
	ModePass  Mode = "pass"
	ModeBlock Mode = "block"
)

// Duration is a time.Duration written as a Go duration string in JSON
// ("30s", "10m").
type Duration time.Duration

// UnmarshalJSON reads "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %q is negative", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes "30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Upstream is one MCP server behind the gate: a command the gate runs and
// speaks to over stdio, or a streamable-HTTP endpoint.
type Upstream struct {
	// Name identifies the upstream in tool names (the prefix), ledger tool
	// names ("<name>.<tool>") and logs: letters, digits, '-' and '_', no
	// "__".
	Name string `json:"name"`
	// Command is the program and its arguments (stdio).
	Command []string `json:"command,omitempty"`
	// Env adds variables to the command's environment; Dir is its working
	// directory.
	Env map[string]string `json:"env,omitempty"`
	Dir string            `json:"dir,omitempty"`
	// URL is a streamable-HTTP endpoint ("http://host:port/mcp").
	URL string `json:"url,omitempty"`
	// Headers are sent with every HTTP request to URL (Authorization ...).
	Headers map[string]string `json:"headers,omitempty"`
	// Prefix is put before the upstream's tool names with "__"; unset, it is
	// Name when the gate has several upstreams and nothing with one; "" never
	// prefixes.
	Prefix *string `json:"prefix,omitempty"`

	// Transport, when set, replaces Command and URL: it makes the transport
	// of each connection (embedding, tests).
	Transport func() mcp.Transport `json:"-"`
}

// ToolRule configures the tools whose downstream name matches Match; the
// first matching rule of the list applies.
type ToolRule struct {
	// Match is a path.Match pattern on the downstream tool name
	// ("pay__charge", "pay__*", "*").
	Match string `json:"match"`
	// Mode is gate, pass, block or auto (the default: from the tool's
	// annotations, see Classify).
	Mode Mode `json:"mode,omitempty"`
	// Derive false turns off the derived key: a call without an explicit
	// key or host call id then passes through (for tools meant to repeat).
	Derive *bool `json:"derive,omitempty"`
	// Window is the derivation window of this tool (default: the file's).
	Window Duration `json:"window,omitempty"`
	// Policy, when set, is a check, not a choice: the ledger picks the
	// policy of a claim by its tool and refuses a claim that names another
	// one (422 policy_mismatch, answered ledger_refused). Empty lets the
	// ledger pick without the check.
	Policy string `json:"policy,omitempty"`
	// LedgerTool is the claims' tool, what ledger policies select by
	// (default "<upstream>.<tool>", mapped into the ledger's grammar by
	// DefaultLedgerTool). A configured one must already be in the grammar
	// (ValidLedgerTool): the file is refused otherwise.
	LedgerTool string `json:"ledger_tool,omitempty"`
	// Lease and Timeout override the gate's lease and call timeout.
	Lease   Duration `json:"lease,omitempty"`
	Timeout Duration `json:"timeout,omitempty"`
}

// KeyPolicy is how the gate finds the idempotency key of a call.
type KeyPolicy struct {
	// Scope is the ledger key scope of this gate's calls: gates with the
	// same scope (and ledger namespace) share keys.
	Scope string `json:"scope,omitempty"`
	// ScopeHeaders are HTTP request headers (downstream over HTTP) whose
	// values scope keys further, e.g. X-Tenant. An authenticated caller
	// (CallerOf) always scopes its keys, with or without them.
	ScopeHeaders []string `json:"scope_headers,omitempty"`
	// SessionScope scopes keys per MCP session (a host that reconnects
	// with a new session no longer finds its earlier calls).
	SessionScope bool `json:"session_scope,omitempty"`
	// HostIDKeys are the _meta keys read as a host's call id, in order
	// (nil: DefaultHostIDKeys; empty: none).
	HostIDKeys []string `json:"host_id_keys,omitempty"`
	// Window is the derivation window: identical calls inside it share a
	// key.
	Window Duration `json:"window,omitempty"`
	// DefaultMode is the mode of tools no rule gives one: auto, gate or
	// pass.
	DefaultMode Mode `json:"default_mode,omitempty"`
}

// File is the gate's JSON configuration file. Unknown fields are refused.
type File struct {
	Upstreams []Upstream `json:"upstreams"`
	Tools     []ToolRule `json:"tools,omitempty"`
	KeyPolicy
	// Lease and CallTimeout are the gate-wide defaults of the rules' lease
	// and timeout.
	Lease       Duration `json:"lease,omitempty"`
	CallTimeout Duration `json:"call_timeout,omitempty"`
}

// ParseFile reads a configuration file.
func ParseFile(data []byte) (*File, error) {
	var f File
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	// dec.More is false before a stray '}' or ']': read to the end.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("config: data after the JSON value")
	}
	return &f, nil
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// validName reports whether s may name an upstream or be a prefix.
func validName(s string) bool { return nameRE.MatchString(s) && !strings.Contains(s, PrefixSeparator) }

// ParseUpstreamFlag reads an --upstream flag: NAME=URL (http or https) or
// NAME=COMMAND ARGS... (split on spaces; use the configuration file for
// arguments with spaces).
func ParseUpstreamFlag(s string) (Upstream, error) {
	name, rest, ok := strings.Cut(s, "=")
	if !ok || strings.TrimSpace(rest) == "" {
		return Upstream{}, fmt.Errorf("--upstream %q: want NAME=URL or NAME=COMMAND [ARGS...]", s)
	}
	u := Upstream{Name: strings.TrimSpace(name)}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, "http://") || strings.HasPrefix(rest, "https://") {
		u.URL = rest
	} else {
		u.Command = strings.Fields(rest)
	}
	return u, u.validate()
}

func (u *Upstream) validate() error {
	if !validName(u.Name) {
		return fmt.Errorf("upstream name %q: use 1..64 letters, digits, '-' and '_', without %q", u.Name, PrefixSeparator)
	}
	if u.Transport != nil {
		return nil
	}
	switch {
	case len(u.Command) > 0 && u.URL != "":
		return fmt.Errorf("upstream %s: give a command or a url, not both", u.Name)
	case len(u.Command) == 0 && u.URL == "":
		return fmt.Errorf("upstream %s: give a command or a url", u.Name)
	case u.URL != "":
		p, err := url.Parse(u.URL)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return fmt.Errorf("upstream %s: url %q: want http(s)://host[:port]/path", u.Name, u.URL)
		}
	case u.Command[0] == "":
		return fmt.Errorf("upstream %s: the command is empty", u.Name)
	}
	if u.Prefix != nil && *u.Prefix != "" && !validName(*u.Prefix) {
		return fmt.Errorf("upstream %s: prefix %q: use letters, digits, '-' and '_', without %q", u.Name, *u.Prefix, PrefixSeparator)
	}
	return nil
}

func (r *ToolRule) validate() error {
	if r.Match == "" {
		return errors.New("tool rule: match is required (a pattern such as \"pay__*\")")
	}
	if _, err := path.Match(r.Match, ""); err != nil {
		return fmt.Errorf("tool rule %q: %w", r.Match, err)
	}
	switch r.Mode {
	case "", ModeAuto, ModeGate, ModePass, ModeBlock:
	default:
		return fmt.Errorf("tool rule %q: mode %q: want gate, pass, block or auto", r.Match, r.Mode)
	}
	if r.Window != 0 && time.Duration(r.Window) < minWindow {
		return fmt.Errorf("tool rule %q: window %v is under %v", r.Match, time.Duration(r.Window), minWindow)
	}
	if r.LedgerTool != "" {
		if err := ValidLedgerTool(r.LedgerTool); err != nil {
			return fmt.Errorf("tool rule %q: ledger_tool: %w", r.Match, err)
		}
	}
	return nil
}

// validate checks the upstreams (unique names and prefixes) and the
// rules.
func validateSetup(ups []Upstream, rules []ToolRule, kp KeyPolicy) error {
	if len(ups) == 0 {
		return errors.New("no upstream: give --upstream NAME=COMMAND|URL, a command after --, or upstreams in --config")
	}
	names := map[string]bool{}
	for i := range ups {
		if err := ups[i].validate(); err != nil {
			return err
		}
		if names[ups[i].Name] {
			return fmt.Errorf("upstream name %q is used twice", ups[i].Name)
		}
		names[ups[i].Name] = true
	}
	prefixes := map[string]string{}
	for i := range ups {
		p := effectivePrefix(ups[i], len(ups))
		if p == "" {
			continue
		}
		if other, ok := prefixes[p]; ok {
			return fmt.Errorf("upstreams %s and %s have the same prefix %q", other, ups[i].Name, p)
		}
		prefixes[p] = ups[i].Name
	}
	for i := range rules {
		if err := rules[i].validate(); err != nil {
			return err
		}
	}
	switch kp.DefaultMode {
	case "", ModeAuto, ModeGate, ModePass:
	default:
		return fmt.Errorf("default_mode %q: want auto, gate or pass", kp.DefaultMode)
	}
	if kp.Window != 0 && time.Duration(kp.Window) < minWindow {
		return fmt.Errorf("window %v is under %v", time.Duration(kp.Window), minWindow)
	}
	if kp.Scope == "" {
		return errors.New("scope is empty")
	}
	return nil
}
