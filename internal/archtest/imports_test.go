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
	"internal/jsonenc":          nil,
	"internal/toolname":         nil,
	"internal/namespace":        nil,
	"internal/faults":           nil,
	"internal/gossipforge":      nil,
	"internal/peerauth":         nil,
	"internal/jsonexact":        nil, // the integers canonical JSON would change: the ledger's and the proxy's one rule
	"internal/tlsutil":          nil,
	"internal/tracing":          nil, // the OTLP/HTTP tracer provider of intentd and the front ends
	"internal/tracing/otlptest": nil, // an OTLP/HTTP receiver for tests
	"internal/progress":         nil, // status lines redrawn on a terminal, plain lines in a log
	"internal/cli":              nil, // the commands' logger, flags from the environment, list flags
	"internal/doccheck":         nil, // Markdown and shell scanning; its tests start a local cluster
	"console":                   nil, // the web console's embedded files; its pages reach the ledger through the API only
	"internal/probe":            nil, // healthz, readyz against the ledger (a LeaderFunc), the metrics registry, pprof: for the node and the front ends
	"internal/probe/probetest":  nil, // Prometheus series read back in tests
	"token":                     nil,
	"client":                    nil, // the SDK: standard library only, no server package (clientMayImport)
	"client/":                   {"client", "client/"},

	// The replicated core, bottom up.
	"fsm":               {"internal/jsonenc", "internal/jsonexact", "internal/toolname"},
	"fsm/pebblestate":   {"fsm"}, // fsm.Store on disk (pebble): the engine and the file system stay out of fsm
	"auth":              {"internal/namespace"},
	"replication":       {"fsm"}, // the ledger's contract with what replicates it, and the replicated write's errors
	"clusterview":       nil,     // what a cluster member shows the API, as plain data
	"ledger":            {"fsm", "replication", "token", "internal/faults", "internal/namespace"},
	"ledger/ledgertest": {"fsm", "ledger"},
	"cluster":           {"clusterview", "fsm", "fsm/pebblestate", "replication", "internal/faults"},
	"httpapi":           {"auth", "clusterview", "fsm", "ledger", "token", "internal/jsonenc", "internal/namespace", "internal/peerauth"},

	// The wiring and what starts it.
	"node":        {"auth", "cluster", "console", "fsm", "httpapi", "ledger", "token", "internal/faults", "internal/peerauth", "internal/probe", "internal/tlsutil", "internal/tracing"},
	"cmd/intentd": {"auth", "internal/cli", "internal/faults", "node", "internal/tlsutil", "internal/tracing"},

	// Test kits: what tests start (real nodes, clusters, processes, an MCP
	// server). Above the wiring, below nothing but tests and the canary.
	"testkit/nodetest":     nil,
	"testkit/mcpupstream":  nil, // the MCP server behind the gate in process tests and make bench-mcp
	"testkit/localcluster": {"cluster", "httpapi", "node"},
	"testkit/clienttest":   {"auth", "cluster", "httpapi", "ledger", "ledger/ledgertest", "testkit/localcluster"},

	// Tools that speak to a cluster from outside: through the SDK. intentctl
	// also reads and checks snapshot files offline (fsm's codecs), as
	// etcdutl reads etcd's.
	"cmd/intentctl": {"auth", "client", "fsm", "internal/cli", "internal/namespace", "internal/tlsutil", "token"},
	// The front ends, side by side: clients of the ledger through the SDK
	// only. The Idempotency-Key reverse proxy; the MCP gate (MCP through
	// go-sdk).
	"frontend/idemproxy": {"client", "internal/jsonexact", "internal/toolname"},
	"frontend/mcpgate":   {"client", "internal/toolname"},
	"cmd/intent-proxy":   {"client", "internal/cli", "internal/probe", "internal/tracing", "frontend/idemproxy"},
	// auth: --caller-keys, read in the ledger's keys-file format.
	"cmd/intent-mcp": {"auth", "client", "internal/cli", "internal/probe", "internal/tracing", "frontend/mcpgate"},
	"canary":         {"client", "frontend/idemproxy", "frontend/mcpgate"}, // --via http-proxy: idemproxy.Handler before a plain tool; --via mcp: mcpgate before a plain MCP server
	"cmd/canary":     {"canary", "testkit/localcluster", "internal/progress"},
	"examples/":      {"client"},
	"sdk/":           {"client"}, // the SDK conformance suite (its code is tests)

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

// forbidden are dependencies the picture rules out whatever allowed says,
// directly or through any other module package (non-test code, both
// builds): the edges issue 29 cut, and what cutting them is for.
var forbidden = []struct{ from, to, why string }{
	{"httpapi", "cluster", "the API declares the interfaces it consumes (ClusterInfo, Snapshotter, PeerAdmin) over clusterview's plain data; node wires cluster.Node in"},
	{"cluster", "ledger", "the cluster implements the replication contract (package replication) and knows nothing of the service above it"},
	{"internal/probe", "client", "intentd links probe: the front ends pass a probe.LeaderFunc backed by their client"},
	{"cmd/intentd", "client", "the server binary links no SDK"},
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
		graph := map[string][]string{} // module package -> the module packages it imports
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() {
				return nil
			}
			rel, _ := filepath.Rel(root, path)
			rel = filepath.ToSlash(rel)
			// bench and deploy are modules of their own (replace => ../): their
			// tests may import what they test.
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || rel == "bench" || strings.HasPrefix(rel, "bench/") ||
				rel == "deploy" || strings.HasPrefix(rel, "deploy/") ||
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
			graph[rel] = moduleImports(pkg.Imports)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range forbiddenPaths(graph) {
			t.Errorf("%s (tags %v)", v, tags)
		}
	}
}

// moduleImports are the module packages among imports, relative to the
// module.
func moduleImports(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if dep, ok := strings.CutPrefix(imp, module); ok {
			out = append(out, dep)
		}
	}
	return out
}

// forbiddenPaths lists the forbidden dependencies graph (each module
// package's module imports) has, each with a chain of imports that makes
// it, and every rule whose package is not in graph (moved or renamed: the
// rule would hold vacuously).
func forbiddenPaths(graph map[string][]string) []string {
	var out []string
	for _, f := range forbidden {
		if _, ok := graph[f.from]; !ok {
			out = append(out, fmt.Sprintf("forbidden names %s, which is not a package: update the rule with the move", f.from))
			continue
		}
		if chain := importChain(graph, f.from, f.to); chain != nil {
			out = append(out, fmt.Sprintf("%s depends on %s (%s), which the architecture forbids: %s", f.from, f.to, strings.Join(chain, " -> "), f.why))
		}
	}
	return out
}

// importChain is a shortest chain of imports in graph from package from to
// package to, nil when to is not reached.
func importChain(graph map[string][]string, from, to string) []string {
	prev := map[string]string{from: from}
	for queue := []string{from}; len(queue) > 0; queue = queue[1:] {
		cur := queue[0]
		if cur == to {
			chain := []string{cur}
			for cur != from {
				cur = prev[cur]
				chain = append(chain, cur)
			}
			slices.Reverse(chain)
			return chain
		}
		for _, dep := range graph[cur] {
			if _, seen := prev[dep]; !seen {
				prev[dep] = cur
				queue = append(queue, dep)
			}
		}
	}
	return nil
}

// TestForbiddenDependencies is the forbidden rules' positive control: on
// made-up graphs they catch each cut edge, directly and through another
// package, and pass the edges that replaced them.
func TestForbiddenDependencies(t *testing.T) {
	// base is the picture as it should be: the packages the rules name and
	// the edges that replaced the cut ones.
	base := map[string][]string{
		"cmd/intentd":    {"node"},
		"node":           {"cluster", "httpapi", "internal/probe", "ledger"},
		"httpapi":        {"clusterview", "ledger"},
		"cluster":        {"clusterview", "fsm", "replication"},
		"ledger":         {"fsm", "replication"},
		"replication":    {"fsm"},
		"internal/probe": nil,
		"cmd/intent-mcp": {"client", "internal/probe"},
	}
	for _, tc := range []struct {
		name string
		add  map[string][]string // edges added to base
		drop string              // a package removed from base
		want []string            // substrings of the violations, in order
	}{
		{"the picture as it should be", nil, "", nil},
		{"httpapi imports cluster", map[string][]string{"httpapi": {"cluster"}}, "", []string{"httpapi depends on cluster (httpapi -> cluster)"}},
		{"httpapi reaches cluster through a package", map[string][]string{"httpapi": {"internal/x"}, "internal/x": {"cluster"}}, "",
			[]string{"httpapi depends on cluster (httpapi -> internal/x -> cluster)"}},
		{"cluster imports ledger", map[string][]string{"cluster": {"ledger"}}, "", []string{"cluster depends on ledger (cluster -> ledger)"}},
		{"probe imports client", map[string][]string{"internal/probe": {"client"}}, "", []string{
			"internal/probe depends on client (internal/probe -> client)",
			"cmd/intentd depends on client (cmd/intentd -> node -> internal/probe -> client)"}},
		{"intentd links the SDK through ledger", map[string][]string{"ledger": {"client"}}, "", []string{
			"cmd/intentd depends on client (cmd/intentd -> node -> ledger -> client)"}},
		{"a ruled package moved away", nil, "internal/probe", []string{"forbidden names internal/probe, which is not a package"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			graph := maps.Clone(base)
			delete(graph, tc.drop)
			for pkg, deps := range tc.add {
				graph[pkg] = append(slices.Clone(graph[pkg]), deps...)
			}
			got := forbiddenPaths(graph)
			if len(got) != len(tc.want) {
				t.Fatalf("violations %q, want %d: %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
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
		if rel == "fsm" && strings.HasPrefix(imp, "go.opentelemetry.io/") {
			out = append(out, fmt.Sprintf("fsm imports %s: the state machine records no spans (the cluster traces its commits)", imp))
		}
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
// testkit/clienttest and the server; they do not ship). It holds whatever
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
	lax["client/clienttest"] = []string{"cluster", "httpapi", "ledger", "ledger/ledgertest", "testkit/localcluster"}
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
		{"client imports node", "client", []string{module + "node"}, true},
		{"client imports testkit/clienttest", "client", []string{module + "testkit/clienttest"}, true},
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

// notLeaves lists the allowed entries under internal/ that import another
// package of the module from outside internal/: internal/ holds only
// leaves (docs/architecture.md), so what imports the server or the SDK
// lives where it says so (node/, testkit/, bench/).
func notLeaves(arch map[string][]string) []string {
	var bad []string
	for _, pkg := range slices.Sorted(maps.Keys(arch)) {
		if !strings.HasPrefix(pkg, "internal/") {
			continue
		}
		for _, dep := range arch[pkg] {
			if !strings.HasPrefix(dep, "internal/") {
				bad = append(bad, fmt.Sprintf("%s imports %s", pkg, dep))
			}
		}
	}
	return bad
}

func TestInternalHoldsOnlyLeaves(t *testing.T) {
	for _, b := range notLeaves(allowed) {
		t.Errorf("internal/ holds only leaves, but %s: move it out of internal/ (node/, testkit/) or cut the import", b)
	}
	// Positive control: the rule sees a package under internal/ that
	// imports the server.
	control := map[string][]string{"internal/localcluster": {"node"}, "internal/cli": {"internal/namespace"}}
	if got := notLeaves(control); len(got) != 1 || got[0] != "internal/localcluster imports node" {
		t.Errorf("control: notLeaves = %v, want the one import of node", got)
	}
}

// TestFSMRecordsNoSpans is the fsm tracing rule's positive control: the
// state machine importing OpenTelemetry is a violation, the cluster doing
// so is not.
func TestFSMRecordsNoSpans(t *testing.T) {
	for _, tc := range []struct {
		rel  string
		bad  bool
		imps []string
	}{
		{"fsm", true, []string{"go.opentelemetry.io/otel/trace"}},
		{"fsm", false, []string{"encoding/binary"}},
		{"cluster", false, []string{"go.opentelemetry.io/otel/trace"}},
	} {
		got := slices.ContainsFunc(violations(allowed, tc.rel, tc.imps), func(v string) bool {
			return strings.Contains(v, "records no spans")
		})
		if got != tc.bad {
			t.Errorf("%s importing %v: violation %v, want %v", tc.rel, tc.imps, got, tc.bad)
		}
	}
}
