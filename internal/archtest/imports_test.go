package archtest

import (
	"fmt"
	"go/build"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/intentledger/intentd/"

// allowed lists, for every package of the module, the module packages its
// non-test code may import (docs/architecture.md draws the same picture).
// A package missing here fails the test: a new package states its place.
var allowed = map[string][]string{
	// Leaves: no module imports.
	"internal/jsonenc":         nil,
	"internal/toolname":        nil,
	"internal/namespace":       nil,
	"internal/faults":          nil,
	"internal/gossipforge":     nil,
	"internal/peerauth":        nil,
	"internal/jsonexact":       nil, // the integers canonical JSON would change: the ledger's and the proxy's one rule
	"internal/tlsutil":         nil,
	"internal/nodetest":        nil,
	"internal/progress":        nil, // status lines redrawn on a terminal, plain lines in a log
	"internal/cli":             nil, // the commands' logger, flags from the environment, list flags
	"internal/doccheck":        nil, // Markdown and shell scanning; its tests start a local cluster
	"console":                  nil, // the web console's embedded files; its pages reach the ledger through the API only
	"internal/probe":           {"client"},
	"internal/probe/probetest": nil, // Prometheus series read back in tests // healthz, readyz against the ledger, the metrics registry, pprof: for the node and the front ends
	"token":                    nil,
	"client":                   nil, // the SDK: standard library only, no server package (clientMayImport)
	"client/":                  {"client", "client/"},

	// The replicated core, bottom up.
	"fsm":               {"internal/jsonenc", "internal/jsonexact", "internal/toolname"},
	"auth":              {"internal/namespace"},
	"ledger":            {"fsm", "token", "internal/faults", "internal/namespace"},
	"ledger/ledgertest": {"fsm", "ledger"},
	"cluster":           {"fsm", "ledger", "internal/faults"},
	"httpapi":           {"auth", "cluster", "fsm", "ledger", "token", "internal/jsonenc", "internal/namespace", "internal/peerauth"},

	// The wiring and what starts it.
	"internal/node":         {"auth", "cluster", "console", "fsm", "httpapi", "ledger", "token", "internal/faults", "internal/peerauth", "internal/probe", "internal/tlsutil"},
	"internal/localcluster": {"cluster", "httpapi", "internal/node"},
	"internal/clienttest":   {"auth", "cluster", "httpapi", "ledger", "ledger/ledgertest", "internal/localcluster"},
	"cmd/intentd":           {"auth", "internal/cli", "internal/faults", "internal/node", "internal/tlsutil"},

	// Tools that speak to a cluster from outside: through the SDK. intentctl
	// also reads and checks snapshot files offline (fsm's codecs), as
	// etcdutl reads etcd's.
	"cmd/intentctl":    {"auth", "client", "fsm", "internal/cli", "internal/namespace", "internal/tlsutil", "token"},
	"cmd/intent-bench": {"client", "internal/progress"},
	// The Idempotency-Key reverse proxy: the ledger through the SDK only.
	"proxy":            {"client", "internal/jsonexact", "internal/toolname"},
	"cmd/intent-proxy": {"client", "internal/cli", "internal/probe", "proxy"},
	// The MCP gate: the ledger through the SDK only, MCP through go-sdk.
	"mcpgate": {"client", "internal/toolname"},
	// auth: --caller-keys, read in the ledger's keys-file format.
	"cmd/intent-mcp":                       {"auth", "client", "internal/cli", "internal/probe", "mcpgate"},
	"cmd/intent-mcp/internal/testupstream": nil,                             // the process tests' upstream MCP server
	"cmd/intent-mcp/internal/mcpbench":     {"client", "internal/progress"}, // make bench-mcp's driver
	"canary":                               {"client", "mcpgate", "proxy"},  // --via http-proxy: proxy.Handler before a plain tool; --via mcp: mcpgate before a plain MCP server
	"cmd/canary":                           {"canary", "internal/localcluster", "internal/progress"},
	"examples/":                            {"client"},
	"sdk/":                                 {"client"}, // the SDK conformance suite (its code is tests)

	// The fault suite: processes, namespaces and histories; never the
	// server's packages but the state machine's codecs and the test PKI.
	"jepsen/history":         nil,
	"jepsen/netns":           nil,
	"jepsen/netns/netnstest": {"jepsen/netns"},
	"jepsen/checker":         {"jepsen/history"},
	"jepsen/workload":        {"jepsen/history"},
	"jepsen/report":          {"jepsen/checker", "jepsen/history"},
	"jepsen/nodes":           {"internal/tlsutil", "jepsen/lazyfs", "jepsen/netns"},
	"jepsen/wan":             {"jepsen/netns"}, // the link-delay layer: relays in the nodes' namespaces
	"jepsen/lazyfs":          nil,              // the lazy filesystem (FUSE): no project imports
	"jepsen/nemesis":         {"fsm", "internal/gossipforge", "internal/tlsutil", "jepsen/history", "jepsen/lazyfs", "jepsen/netns", "jepsen/nodes", "jepsen/wan"},
	"cmd/jepsen":             {"internal/progress", "internal/tlsutil", "jepsen/"},
}

// fsmForbidden are standard packages the state machine may not import: a
// clock, randomness, the network, the file system or logging would make
// replicas that apply the same log differ.
var fsmForbidden = []string{"time", "net", "net/http", "os", "log", "log/slog", "math/rand", "math/rand/v2", "crypto/rand"}

func TestImportsFollowTheArchitecture(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, tags := range [][]string{nil, {"faults"}} {
		ctx := build.Default
		ctx.BuildTags = tags
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "bench" || strings.HasPrefix(rel, "bench/") ||
				rel == "results" || strings.HasPrefix(rel, "results/") {
				if rel != "." {
					return filepath.SkipDir
				}
			}
			pkg, err := ctx.ImportDir(path, 0)
			if err != nil {
				return nil // no Go files here (or only tests)
			}
			if rel == "internal/archtest" {
				return nil
			}
			check(t, rel, pkg, tags)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func check(t *testing.T, rel string, pkg *build.Package, tags []string) {
	t.Helper()
	for _, v := range violations(allowed, rel, pkg.Imports) {
		t.Errorf("%s (tags %v)", v, tags)
	}
}

// violations lists what is wrong with the non-test imports of the package
// rel under the rules of arch (allowed, in the real check), the state machine's determinism and the
// client rule.
func violations(arch map[string][]string, rel string, imports []string) []string {
	rules, ok := allowedFor(arch, rel)
	if !ok {
		return []string{fmt.Sprintf("package %s has no place in the architecture: add it to allowed (and to docs/architecture.md)", rel)}
	}
	var out []string
	for _, imp := range imports {
		if rel == "fsm" && slices.Contains(fsmForbidden, imp) {
			out = append(out, fmt.Sprintf("fsm imports %s: the state machine must stay deterministic (time arrives inside commands)", imp))
		}
		if inClient(rel) && !clientMayImport(imp) {
			out = append(out, fmt.Sprintf("%s imports %s: the SDK (client and everything under client/) may import only the standard library and client/ itself", rel, imp))
		}
		dep, ok := strings.CutPrefix(imp, module)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(rules, func(r string) bool { return dep == r || strings.HasSuffix(r, "/") && strings.HasPrefix(dep, r) }) {
			out = append(out, fmt.Sprintf("%s imports %s, which the architecture does not allow", rel, dep))
		}
	}
	return out
}

// inClient reports whether the module package rel is part of the Go SDK.
func inClient(rel string) bool { return rel == "client" || strings.HasPrefix(rel, "client/") }

// clientMayImport is the client rule: the SDK a user adds to their program
// brings nothing but itself and the standard library (its tests may use
// internal/clienttest and the server; they do not ship). It holds whatever
// allowed says.
func clientMayImport(imp string) bool {
	if dep, ok := strings.CutPrefix(imp, module); ok {
		return inClient(dep)
	}
	return isStd(imp)
}

// isStd reports whether imp is a standard library package: its first path
// element has no dot, as every module path's has.
func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".")
}

// allowedFor finds rel's rules in arch: its own entry, or a prefix entry
// ("examples/").
func allowedFor(arch map[string][]string, rel string) ([]string, bool) {
	if r, ok := arch[rel]; ok {
		return r, true
	}
	for k, r := range arch {
		if strings.HasSuffix(k, "/") && strings.HasPrefix(rel, k) {
			return r, true
		}
	}
	return nil, false
}

// TestClientRule checks that the client rule catches what it is for: a
// server package, or any other module, imported by code under client/,
// even where allowed (wrongly) permits it.
func TestClientRule(t *testing.T) {
	lax := maps.Clone(allowed)
	lax["client/clienttest"] = []string{"cluster", "httpapi", "ledger", "ledger/ledgertest", "internal/localcluster"}
	lax["client"] = []string{"fsm", "client/"}
	cases := []struct {
		name    string
		rel     string
		imports []string
		bad     bool
	}{
		{"client: standard library", "client", []string{"net/http", "encoding/json", "crypto/ed25519"}, false},
		{"client: a client subpackage", "client", []string{"context", module + "client/internal/wire"}, false},
		{"under client: the client itself", "client/sub", []string{"io", module + "client"}, false},
		{"clienttest re-added under client", "client/clienttest", []string{"testing", module + "httpapi"}, true},
		{"client imports fsm", "client", []string{module + "fsm"}, true},
		{"client imports internal/node", "client", []string{module + "internal/node"}, true},
		{"client imports internal/clienttest", "client", []string{module + "internal/clienttest"}, true},
		{"client imports a third-party module", "client", []string{"github.com/labstack/echo/v4"}, true},
		{"under client imports ledger", "client/sub", []string{module + "ledger"}, true},
		{"not the SDK: intentctl may read fsm", "cmd/intentctl", []string{module + "fsm", module + "client"}, false},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			var client []string
			for _, v := range violations(lax, tt.rel, tt.imports) {
				if strings.Contains(v, "may import only the standard library") {
					client = append(client, v)
				}
			}
			if got := len(client) > 0; got != tt.bad {
				t.Errorf("client rule violated = %v, want %v: %q", got, tt.bad, client)
			}
		})
	}
}
