package doccheck

import (
	"bytes"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Problem is one thing wrong in a file of the repository.
type Problem struct {
	// File is the path relative to the repository root, with '/'.
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// skipDir reports whether a directory of the work tree holds no files of
// the repository's own: version control, hidden directories other than
// CI's (caches, virtual environments), build output, fault-run results,
// local data and certificates, installed dependencies.
func skipDir(rel, name string) bool {
	if strings.HasPrefix(name, ".") && name != ".ci" && name != ".github" {
		return true
	}
	switch name {
	case "node_modules", "__pycache__", "venv":
		return true
	}
	switch rel {
	case "bin", "results", "data", "certs":
		return true
	}
	return false
}

// Files returns the repository's files under root whose names end in one
// of exts (every file when exts is empty), relative to root with '/',
// sorted.
func Files(root string, exts ...string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && skipDir(rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || d.Name() == ".git" { // a worktree's .git file names its main repository
			return nil
		}
		if len(exts) == 0 {
			out = append(out, rel)
			return nil
		}
		for _, e := range exts {
			if strings.HasSuffix(strings.ToLower(rel), e) {
				out = append(out, rel)
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("doccheck: walk %s: %w", root, err)
	}
	sort.Strings(out)
	return out, nil
}

// Repo is a repository's Markdown, scanned once.
type Repo struct {
	Root string
	// Docs maps each Markdown file (relative, '/') to its scan.
	Docs map[string]*Doc
}

// LoadRepo scans every Markdown file under root.
func LoadRepo(root string) (*Repo, error) {
	files, err := Files(root, ".md", ".markdown")
	if err != nil {
		return nil, err
	}
	r := &Repo{Root: root, Docs: map[string]*Doc{}}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
		r.Docs[f] = Parse(b)
	}
	return r, nil
}

// sortedDocs is the Markdown files in order, for stable reports.
func (r *Repo) sortedDocs() []string {
	names := make([]string, 0, len(r.Docs))
	for n := range r.Docs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// CheckLinks checks every link of every Markdown file: a relative target
// must stay inside the repository and exist; a #fragment on a Markdown
// target (or alone: the same file) must be one of its anchors. Absolute
// paths and file: URLs are refused (they point at one machine's file
// system); other URLs (https:, mailto:) are not fetched.
func (r *Repo) CheckLinks() []Problem {
	var out []Problem
	for _, name := range r.sortedDocs() {
		for _, l := range r.Docs[name].Links {
			if msg := r.checkLink(name, l.Target); msg != "" {
				out = append(out, Problem{File: name, Line: l.Line, Msg: msg})
			}
		}
	}
	return out
}

func (r *Repo) checkLink(from, target string) string {
	t := strings.TrimSpace(target)
	if t == "" {
		return "empty link target"
	}
	if strings.HasPrefix(strings.ToLower(t), "file:") {
		return fmt.Sprintf("link %q points into a file system, not the repository", target)
	}
	if schemeRE.MatchString(t) || strings.HasPrefix(t, "//") {
		return "" // a URL
	}
	if strings.HasPrefix(t, "/") {
		return fmt.Sprintf("link %q is an absolute path: link relative to %s", target, from)
	}
	p, frag, _ := strings.Cut(t, "#")
	p, _, _ = strings.Cut(p, "?")
	if up, err := url.PathUnescape(p); err == nil {
		p = up
	}
	dest := from
	if p != "" {
		dest = path.Join(path.Dir(from), p)
		if dest == ".." || strings.HasPrefix(dest, "../") {
			return fmt.Sprintf("link %q leaves the repository", target)
		}
		if _, err := os.Stat(filepath.Join(r.Root, filepath.FromSlash(dest))); err != nil {
			return fmt.Sprintf("link %q: %s does not exist", target, dest)
		}
	}
	if frag == "" {
		return ""
	}
	doc, ok := r.Docs[dest]
	if !ok {
		return "" // a fragment of a non-Markdown file (a line of code): not checked
	}
	if uf, err := url.PathUnescape(frag); err == nil {
		frag = uf
	}
	if !doc.Anchors[frag] && !doc.Anchors[strings.ToLower(frag)] {
		return fmt.Sprintf("link %q: %s has no heading or anchor #%s%s", target, dest, frag, suggest(doc, frag))
	}
	return ""
}

// suggest names the target's anchors closest to frag, for the message.
func suggest(d *Doc, frag string) string {
	var near []string
	for _, h := range d.Headings {
		if strings.Contains(h, frag) || strings.Contains(frag, h) || commonPrefix(h, frag) >= 4 {
			near = append(near, "#"+h)
		}
	}
	if len(near) == 0 {
		return ""
	}
	if len(near) > 3 {
		near = near[:3]
	}
	return " (did you mean " + strings.Join(near, ", ") + "?)"
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// targetRE matches a rule's targets in a Makefile: "a b: deps", not
// "A := value" or a recipe line.
var targetRE = regexp.MustCompile(`^([A-Za-z0-9_.%/-]+(?:[ \t]+[A-Za-z0-9_.%/-]+)*)[ \t]*::?(?:[^=]|$)`)

// MakefileTargets returns the targets a Makefile defines.
func MakefileTargets(makefile []byte) map[string]bool {
	out := map[string]bool{}
	for _, l := range strings.Split(string(makefile), "\n") {
		if strings.HasPrefix(l, "\t") || strings.HasPrefix(l, "#") {
			continue
		}
		m := targetRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		for _, t := range strings.Fields(m[1]) {
			if !strings.HasPrefix(t, ".") {
				out[t] = true
			}
		}
	}
	return out
}

// CheckMakeTargets checks that every `make TARGET` in the Markdown files'
// code is a target of the Makefile at the root.
func (r *Repo) CheckMakeTargets() ([]Problem, error) {
	mk, err := os.ReadFile(filepath.Join(r.Root, "Makefile"))
	if err != nil {
		return nil, fmt.Errorf("doccheck: %w", err)
	}
	targets := MakefileTargets(mk)
	var out []Problem
	for _, name := range r.sortedDocs() {
		for _, t := range MakeTargets(r.Docs[name]) {
			if !targets[t.Name] {
				out = append(out, Problem{File: name, Line: t.Line, Msg: fmt.Sprintf("make %s: the Makefile has no target %q", t.Name, t.Name)})
			}
		}
	}
	return out, nil
}

// outsideRE matches a reference to a place outside the repository: the
// steering folder beside it (written relative, or under the workplace's
// absolute path) and any absolute path into the workplace. The pattern is
// spelled so that it does not match itself.
var outsideRE = regexp.MustCompile(`\.\./+shar[e]d\b|/wor[k]/`)

// CheckOutside checks every text file of the repository for a reference
// to a place outside it. Binary files (with a NUL byte) are skipped.
func CheckOutside(root string) ([]Problem, error) {
	files, err := Files(root)
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			return nil, fmt.Errorf("doccheck: %w", err)
		}
		if bytes.IndexByte(b, 0) >= 0 {
			continue
		}
		for _, m := range outsideRE.FindAllIndex(b, -1) {
			line := 1 + bytes.Count(b[:m[0]], []byte("\n"))
			out = append(out, Problem{File: f, Line: line, Msg: fmt.Sprintf("refers outside the repository (%q)", b[m[0]:m[1]])})
		}
	}
	return out, nil
}
