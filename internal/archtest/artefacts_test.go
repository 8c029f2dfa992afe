package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes bounds a file the repository tracks: sources, docs and
// their pictures are far smaller; a built binary (a 17 MB intent-mcp once
// landed at the top) or a data dump is not.
const maxTrackedBytes = 1 << 20

// executableMagic are the first bytes of built binaries (ELF, Mach-O, PE):
// none belongs in the repository, whatever its size.
var executableMagic = [][]byte{
	{0x7f, 'E', 'L', 'F'},
	{0xcf, 0xfa, 0xed, 0xfe}, {0xfe, 0xed, 0xfa, 0xcf},
	{'M', 'Z'},
}

// TestNoBuiltArtefactsAreTracked: every file git tracks is under
// maxTrackedBytes and none is an executable binary.
func TestNoBuiltArtefactsAreTracked(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (not a git checkout)", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if problem := artefactProblem(filepath.Join(root, name)); problem != "" {
			t.Errorf("%s is tracked but %s: remove it (git rm --cached) and list it in .gitignore", name, problem)
		}
	}
}

// artefactProblem says why the file at path must not be tracked ("" when
// it may be). A file that is gone from the work tree is not judged.
func artefactProblem(path string) string {
	info, err := os.Lstat(path)
	if err != nil || !info.Mode().IsRegular() {
		return ""
	}
	if info.Size() > maxTrackedBytes {
		return "over 1 MiB"
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := f.Read(head)
	for _, m := range executableMagic {
		if n >= len(m) && bytes.Equal(head[:len(m)], m) {
			return "an executable binary"
		}
	}
	return ""
}

// TestArtefactProblem is the check's positive control: it names a large
// file and an ELF binary, and passes a source file.
func TestArtefactProblem(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		path, want string
	}{
		{write("big.bin", make([]byte, maxTrackedBytes+1)), "over 1 MiB"},
		{write("intent-mcp", append([]byte{0x7f, 'E', 'L', 'F'}, make([]byte, 100)...)), "an executable binary"},
		{write("main.go", []byte("package main\n")), ""},
		{filepath.Join(dir, "missing"), ""},
	} {
		if got := artefactProblem(tc.path); got != tc.want {
			t.Errorf("%s: %q, want %q", filepath.Base(tc.path), got, tc.want)
		}
	}
}
