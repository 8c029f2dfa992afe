package doccheck

import (
	"os"
	"path/filepath"
	"testing"
)

// root is the repository root, seen from this package's directory.
const root = "../.."

func loadRepo(t *testing.T) *Repo {
	t.Helper()
	r, err := LoadRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Docs) < 10 {
		t.Fatalf("found %d Markdown files under %s; is the root right?", len(r.Docs), root)
	}
	return r
}

func report(t *testing.T, what string, ps []Problem) {
	t.Helper()
	for _, p := range ps {
		t.Errorf("%s: %s", what, p)
	}
}

// TestLinksResolve: every relative link of every Markdown file names a
// file of the repository, and every #fragment a heading or anchor of it.
func TestLinksResolve(t *testing.T) {
	report(t, "broken link", loadRepo(t).CheckLinks())
}

// TestMakeTargetsExist: every `make TARGET` in the docs' code is a target
// of the Makefile.
func TestMakeTargetsExist(t *testing.T) {
	ps, err := loadRepo(t).CheckMakeTargets()
	if err != nil {
		t.Fatal(err)
	}
	report(t, "unknown make target", ps)
}

// TestNothingRefersOutside: no file of the repository names a place
// outside it.
func TestNothingRefersOutside(t *testing.T) {
	ps, err := CheckOutside(root)
	if err != nil {
		t.Fatal(err)
	}
	report(t, "outside reference", ps)
}

// TestDocsByTask: the pages the README's map links to exist, each with an
// entry in the docs index.
func TestDocsByTask(t *testing.T) {
	r := loadRepo(t)
	index := r.Docs["docs/README.md"]
	if index == nil {
		t.Fatal("docs/README.md (the index) is missing")
	}
	linked := map[string]bool{}
	for _, l := range index.Links {
		linked[filepath.ToSlash(filepath.Clean(filepath.Join("docs", l.Target)))] = true
	}
	for _, page := range []string{
		"docs/design.md", "docs/getting-started.md", "docs/api.md", "docs/gate.md", "docs/operations.md",
		"docs/security.md", "docs/testing.md", "docs/fault-testing.md", "docs/benchmarks.md", "docs/canary.md",
		"docs/problems.md", "docs/performance.md", "docs/architecture.md",
	} {
		if _, err := os.Stat(filepath.Join(root, page)); err != nil {
			t.Errorf("%s is missing", page)
			continue
		}
		if !linked[page] {
			t.Errorf("docs/README.md does not link %s", page)
		}
	}
}
