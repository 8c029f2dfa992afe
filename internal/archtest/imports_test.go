package archtest

import (
	"go/build"
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
	"internal/jsonenc":   nil,
	"internal/namespace": nil,
	"internal/faults":    nil,
	"internal/peerauth":  nil,
	"internal/tlsutil":   nil,
	"internal/nodetest":  nil,
	"token":              nil,
	"client":             nil, // the SDK: standard library only, no server package

	// The replicated core, bottom up.
	"fsm":               {"internal/jsonenc"},
	"auth":              {"internal/namespace"},
	"ledger":            {"fsm", "token", "internal/faults", "internal/namespace"},
	"ledger/ledgertest": {"fsm", "ledger"},
	"cluster":           {"fsm", "ledger", "internal/faults"},
	"httpapi":           {"auth", "cluster", "fsm", "ledger", "token", "internal/jsonenc", "internal/namespace", "internal/peerauth"},

	// The wiring and what starts it.
	"internal/node":         {"auth", "cluster", "fsm", "httpapi", "ledger", "token", "internal/faults", "internal/peerauth", "internal/tlsutil"},
	"internal/localcluster": {"cluster", "httpapi", "internal/node"},
	"client/clienttest":     {"cluster", "httpapi", "ledger", "ledger/ledgertest", "internal/localcluster"},
	"cmd/intentd":           {"auth", "internal/faults", "internal/node", "internal/tlsutil"},

	// Tools that speak to a cluster from outside: through the SDK. intentctl
	// also reads and checks snapshot files offline (fsm's codecs), as
	// etcdutl reads etcd's.
	"cmd/intentctl":    {"auth", "client", "fsm", "internal/namespace", "internal/tlsutil", "token"},
	"cmd/intent-bench": {"client"},
	// The Idempotency-Key reverse proxy: the ledger through the SDK only.
	"proxy":            {"client"},
	"cmd/intent-proxy": {"client", "proxy"},
	"canary":           {"client"},
	"cmd/canary":       {"canary", "internal/localcluster"},
	"examples/":        {"client"},
	"sdk/":             {"client"}, // the SDK conformance suite (its code is tests)

	// The fault suite: processes, namespaces and histories; never the
	// server's packages but the state machine's codecs and the test PKI.
	"jepsen/history":         nil,
	"jepsen/netns":           nil,
	"jepsen/netns/netnstest": {"jepsen/netns"},
	"jepsen/checker":         {"jepsen/history"},
	"jepsen/workload":        {"jepsen/history"},
	"jepsen/report":          {"jepsen/checker", "jepsen/history"},
	"jepsen/nodes":           {"internal/tlsutil", "jepsen/netns"},
	"jepsen/nemesis":         {"fsm", "internal/tlsutil", "jepsen/history", "jepsen/netns", "jepsen/nodes"},
	"cmd/jepsen":             {"internal/tlsutil", "jepsen/"},
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
	rules, ok := allowedFor(rel)
	if !ok {
		t.Errorf("package %s has no place in the architecture: add it to allowed (and to docs/architecture.md)", rel)
		return
	}
	for _, imp := range pkg.Imports {
		if rel == "fsm" && slices.Contains(fsmForbidden, imp) {
			t.Errorf("fsm imports %s: the state machine must stay deterministic (time arrives inside commands)", imp)
		}
		dep, ok := strings.CutPrefix(imp, module)
		if !ok {
			continue
		}
		if !slices.ContainsFunc(rules, func(r string) bool { return dep == r || strings.HasSuffix(r, "/") && strings.HasPrefix(dep, r) }) {
			t.Errorf("%s imports %s (tags %v), which the architecture does not allow", rel, dep, tags)
		}
	}
}

// allowedFor finds rel's rules: its own entry, or a prefix entry ("examples/").
func allowedFor(rel string) ([]string, bool) {
	if r, ok := allowed[rel]; ok {
		return r, true
	}
	for k, r := range allowed {
		if strings.HasSuffix(k, "/") && strings.HasPrefix(rel, k) {
			return r, true
		}
	}
	return nil, false
}
