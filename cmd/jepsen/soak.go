package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/intentledger/intentd/jepsen/report"
)

// Markers around the soak table in a document; aggregate --doc replaces
// what lies between them.
const (
	soakBegin = "<!-- soak-table: begin (written by make jepsen-soak) -->"
	soakEnd   = "<!-- soak-table: end -->"
)

// aggregate is `jepsen aggregate [--doc FILE] DIR`: the aggregate table of
// a soak whose runs scripts/jepsen-soak.sh listed in DIR/runs.tsv (name,
// group, control, exit code, seconds), each with DIR/<name>/results.json.
// It prints the table, writes it into FILE between the soak-table
// markers, and exits 0 only if the soak passed (no violation, no failed
// run, every control caught).
func aggregate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("jepsen aggregate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	doc := fs.String("doc", "", "write the table into this Markdown file, between the soak-table markers")
	wall := fs.Float64("wall-seconds", 0, "wall time of the whole soak, in seconds")
	matrix := fs.String("matrix", "", "the soak's matrix, as the caption names it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitValid
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "jepsen aggregate: want one soak results directory")
		return exitUsage
	}
	runs, err := readSoak(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(stderr, "jepsen aggregate:", err)
		return exitError
	}
	table := report.SoakMarkdown(runs, report.SoakMeta{Date: time.Now(), Matrix: *matrix, WallSeconds: *wall})
	fmt.Fprint(stdout, table)
	if *doc != "" {
		if err := spliceDoc(*doc, table); err != nil {
			fmt.Fprintln(stderr, "jepsen aggregate:", err)
			return exitError
		}
		fmt.Fprintf(stdout, "(written into %s)\n", *doc)
	}
	if !report.SoakPassed(runs) {
		fmt.Fprintln(stdout, "jepsen soak: FAILED (a violation, a failed run or a missed control; see the table)")
		return exitInvalid
	}
	return exitValid
}

// readSoak reads DIR/runs.tsv and each run's results.json.
func readSoak(dir string) ([]report.SoakRun, error) {
	f, err := os.Open(filepath.Join(dir, "runs.tsv"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []report.SoakRun
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) != 5 {
			return nil, fmt.Errorf("runs.tsv line %d: want 5 tab-separated columns, have %d", line, len(cols))
		}
		exit, err1 := strconv.Atoi(cols[3])
		secs, err2 := strconv.ParseFloat(cols[4], 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("runs.tsv line %d: %w", line, err)
		}
		run := report.SoakRun{Name: cols[0], Group: cols[1], Control: cols[2], Exit: exit, Seconds: secs}
		b, err := os.ReadFile(filepath.Join(dir, cols[0], report.ResultsFile))
		switch {
		case errors.Is(err, os.ErrNotExist):
			// The run ended before its report: counted as failed.
		case err != nil:
			return nil, err
		default:
			var res report.Results
			if err := json.Unmarshal(b, &res); err != nil {
				return nil, fmt.Errorf("%s: %w", cols[0], err)
			}
			run.Results = &res
		}
		runs = append(runs, run)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("%s/runs.tsv lists no run", dir)
	}
	return runs, nil
}

// spliceDoc replaces what lies between the soak-table markers in the file
// at path with table.
func spliceDoc(path, table string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	i, j := strings.Index(s, soakBegin), strings.Index(s, soakEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s has no soak-table markers (%q ... %q)", path, soakBegin, soakEnd)
	}
	out := s[:i+len(soakBegin)] + "\n" + table + s[j:]
	return os.WriteFile(path, []byte(out), 0o644)
}
