package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSlug(t *testing.T) {
	tests := []struct{ heading, want string }{
		{"Quick start", "quick-start"},
		{"Transport security (TLS) and cluster membership", "transport-security-tls-and-cluster-membership"},
		{"`intentd` flags", "intentd-flags"},
		{"`in_flight` (409)", "in_flight-409"},
		{"The *record* and _its_ fields", "the-record-and-its-fields"},
		{"I1–I5: the invariants", "i1i5-the-invariants"},
		{"[Links](x.md) in headings", "links-in-headings"},
		{"`--dedupe-window`", "--dedupe-window"},
		{"Ünïcode stays", "ünïcode-stays"},
		{"What it costs?", "what-it-costs"},
	}
	for _, tt := range tests {
		if got := Slug(tt.heading); got != tt.want {
			t.Errorf("Slug(%q) = %q, want %q", tt.heading, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	src := strings.Join([]string{
		"# Title", // 1
		"",        // 2
		"See [the API](api.md#claim) and `[not a link](x.md)`.", // 3
		"A span over a line break: `make",                       // 4
		"test` ends here.",                                      // 5
		"```sh",                                                 // 6
		"# Not a heading",                                       // 7
		"make run  # [not a link](y.md)",                        // 8
		"```",                                                   // 9
		"## Title",                                              // 10
		"Setext heading",                                        // 11
		"---",                                                   // 12
		"",                                                      // 13
		"| a | b |",                                             // 14
		"|---|---|",                                             // 15
		"![img](img/a.png) <a id=\"custom\"></a> [ref]: refs.md", // 16
		"[ref]: defs.md",        // 17
		`<img src="img/b.svg">`, // 18
	}, "\n")
	d := Parse([]byte(src))
	var targets []string
	for _, l := range d.Links {
		targets = append(targets, l.Target)
	}
	if want := []string{"api.md#claim", "img/a.png", "defs.md", "img/b.svg"}; !slices.Equal(targets, want) {
		t.Errorf("links = %q, want %q", targets, want)
	}
	if d.Links[0].Line != 3 || d.Links[1].Line != 16 {
		t.Errorf("link lines = %d, %d; want 3, 16", d.Links[0].Line, d.Links[1].Line)
	}
	if want := []string{"title", "title-1", "setext-heading"}; !slices.Equal(d.Headings, want) {
		t.Errorf("headings = %q, want %q", d.Headings, want)
	}
	for _, a := range []string{"title", "title-1", "setext-heading", "custom"} {
		if !d.Anchors[a] {
			t.Errorf("anchor %q missing", a)
		}
	}
	if len(d.Blocks) != 1 || d.Blocks[0].Lang != "sh" || d.Blocks[0].Line != 7 || len(d.Blocks[0].Lines) != 2 {
		t.Errorf("blocks = %+v", d.Blocks)
	}
	var spans []string
	for _, s := range d.Spans {
		spans = append(spans, s.Text)
	}
	if want := []string{"[not a link](x.md)", "make test"}; !slices.Equal(spans, want) {
		t.Errorf("spans = %q, want %q", spans, want)
	}
	var made []string
	for _, m := range MakeTargets(d) {
		made = append(made, m.Name)
	}
	if want := []string{"run", "test"}; !slices.Equal(made, want) {
		t.Errorf("make targets = %q, want %q", made, want)
	}
}

func TestMakefileTargets(t *testing.T) {
	mk := "GO ?= go\nX := a:b\n.PHONY: all run\nall: build\nrun test: deps\n\t./x: y\nbench-compare:\n# c: d\n"
	got := MakefileTargets([]byte(mk))
	for _, want := range []string{"all", "run", "test", "bench-compare"} {
		if !got[want] {
			t.Errorf("target %q missing from %v", want, got)
		}
	}
	for _, not := range []string{"GO", "X", ".PHONY", "./x", "c"} {
		if got[not] {
			t.Errorf("%q is no target but was found", not)
		}
	}
}

// writeRepo lays out files (path → content) in a temporary repository.
func writeRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestChecksFail: each check reports what it exists to catch, with the
// file and line.
func TestChecksFail(t *testing.T) {
	outside := ".." + "/shared/DESIGN.md" // spelled in two parts: this file must pass the check itself
	abs := "/wor" + "k/shared/x"
	dir := writeRepo(t, map[string]string{
		"Makefile": "run:\n\ttrue\ntest: run\n",
		"README.md": strings.Join([]string{
			"# Intro",
			"[ok](docs/a.md#part-one) [ok too](#intro) [dir](docs/) [web](https://example.com/x#y)",
			"[missing file](docs/nope.md)",
			"[missing anchor](docs/a.md#part-three)",
			"[escapes](" + outside + ")",
			"[absolute](/etc/passwd)",
			"`make run`, `make test`, `make deploy`",
			"the contract lives in " + abs,
		}, "\n"),
		"docs/a.md": "# A\n## Part one\n[up](../README.md#intro) [self](#part-two)\n",
	})
	r, err := LoadRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:3: link \"docs/nope.md\": docs/nope.md does not exist",
		"README.md:4: link \"docs/a.md#part-three\": docs/a.md has no heading or anchor #part-three",
		"README.md:5: link \"" + outside + "\" leaves the repository",
		"README.md:6: link \"/etc/passwd\" is an absolute path",
		"docs/a.md:3: link \"#part-two\": docs/a.md has no heading or anchor #part-two",
	}
	checkProblems(t, "links", r.CheckLinks(), want)

	mk, err := r.CheckMakeTargets()
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, "make targets", mk, []string{`README.md:7: make deploy: the Makefile has no target "deploy"`})

	out, err := CheckOutside(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkProblems(t, "outside", out, []string{
		"README.md:5: refers outside the repository",
		"README.md:8: refers outside the repository",
	})
}

func checkProblems(t *testing.T, what string, got []Problem, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d problems, want %d:\n%v", what, len(got), len(want), got)
		return
	}
	for i, p := range got {
		if !strings.HasPrefix(p.String(), want[i]) {
			t.Errorf("%s: problem %d = %q, want it to start with %q", what, i, p, want[i])
		}
	}
}
