package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestReadmeIsTheFrontDoor: the README stays short; the detail lives in
// docs/.
func TestReadmeIsTheFrontDoor(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n > 200 {
		t.Errorf("README.md has %d lines; keep it under 200 and move the detail to a page of docs/", n)
	}
}

var figureRE = regexp.MustCompile(`[0-9][0-9,]*(?:\.[0-9]+)?`)

// TestHeadlineFiguresMatchTheirPages: every number of a bullet in the
// README's "Headline figures" appears on the page the bullet links to, so
// a new measurement that changes a page makes the README change too.
func TestHeadlineFiguresMatchTheirPages(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Headline figures\n")
	if !ok {
		t.Fatal(`README.md has no "## Headline figures" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	bullets := strings.Split(section, "\n- ")[1:]
	if len(bullets) < 3 {
		t.Fatalf("%d headline figures; want the etcd comparison, the fault suite and the canary", len(bullets))
	}
	plain := func(s string) string { return strings.ReplaceAll(s, ",", "") }
	for _, bullet := range bullets {
		d := Parse([]byte(bullet))
		if len(d.Links) == 0 {
			t.Errorf("headline figure without a link to its page: %q", bullet)
			continue
		}
		page, _, _ := strings.Cut(d.Links[len(d.Links)-1].Target, "#")
		text, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			t.Errorf("headline figure links %s: %v", page, err)
			continue
		}
		prose := bullet[:strings.LastIndex(bullet, "[")] // the figures, not the link
		for _, n := range figureRE.FindAllString(prose, -1) {
			n = strings.TrimRight(n, ",.")
			if !strings.Contains(plain(string(text)), plain(n)) {
				t.Errorf("README headline figure %s is not on %s (the page it links to)", n, page)
			}
		}
	}
}

// TestBenchCompareRewritesTheBenchmarksPage: make bench-compare's table
// lives in docs/benchmarks.md between the markers bench-compare looks for,
// and the script points the driver there.
func TestBenchCompareRewritesTheBenchmarksPage(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	begin := strings.Index(string(page), "<!-- bench-compare:begin -->")
	end := strings.Index(string(page), "<!-- bench-compare:end -->")
	if begin < 0 || end < begin {
		t.Error("docs/benchmarks.md lacks the bench-compare:begin / bench-compare:end markers in order")
	}
	script, err := os.ReadFile(filepath.Join(root, "bench", "scripts", "bench-compare.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "BENCH_README-docs/benchmarks.md") {
		t.Error("bench/scripts/bench-compare.sh does not default --readme to docs/benchmarks.md")
	}
	for _, f := range []string{"README.md", "docs/benchmarks.md"} {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(b), "<!-- bench-compare:begin -->"); (f == "README.md") != (n == 0) {
			t.Errorf("%s has %d bench-compare tables; only docs/benchmarks.md has one", f, n)
		}
	}
}
