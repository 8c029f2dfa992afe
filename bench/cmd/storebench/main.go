// Command storebench runs one candidate storage engine (or today's
// in-memory fsm.Machine) through the state machine's apply workload and
// prints what it measured as one JSON line (package storeeval; issue 32).
// bench/scripts/bench-store.sh runs every engine in its own process, so
// each resident set is its own, and tabulates the lines (storebench
// -table).
//
//	storebench -engine pebble -n 1000000 -dir /tmp/store
//	storebench -table < results.jsonl
//
// storebench state runs one phase of the state machine's own measurement
// (storeeval.RunState: the real fsm.Machine over its in-memory or pebble
// store, fill, snapshot, restore, restart), one process per phase;
// bench/scripts/bench-state.sh runs the phases in turn and tabulates
// them (storebench state-table).
//
//	storebench state -engine fsm-pebble -phase fill -n 1000000 -dir /tmp/run
//	storebench state-table < state.jsonl
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/intentledger/intentd/bench/storeeval"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "state":
			os.Exit(stateMain(os.Args[2:]))
		case "state-table":
			os.Exit(stateTableMain(os.Args[2:]))
		}
	}
	var cfg storeeval.Config
	flag.StringVar(&cfg.Engine, "engine", storeeval.EnginePebbleWAL,
		"pebble, pebble-nowal, bbolt or fsm-memory")
	flag.IntVar(&cfg.N, "n", 1_000_000, "intents claimed and completed (the ledger's size; the dedupe window is n ms)")
	flag.IntVar(&cfg.Steady, "steady", 200_000, "intents claimed, completed and purged after the fill")
	flag.IntVar(&cfg.Reads, "reads", 100_000, "point reads, cold and hot each")
	flag.IntVar(&cfg.Batch, "batch", 64, "log entries per apply batch")
	flag.BoolVar(&cfg.ScanFromStart, "scan-from-start", false,
		"the sweeps scan each time index from its start, over its tombstones, not from a low-water mark")
	flag.StringVar(&cfg.Dir, "dir", "", "an empty directory for the store (required)")
	asTable := flag.Bool("table", false, "read storebench's JSON lines on stdin and print Markdown tables")
	flag.Parse()
	if *asTable {
		if err := table(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "storebench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if cfg.Dir == "" {
		fmt.Fprintln(os.Stderr, "storebench: -dir is required")
		os.Exit(2)
	}
	rep, err := storeeval.Run(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "storebench: %s: %v\n", cfg.Engine, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		fmt.Fprintf(os.Stderr, "storebench: %v\n", err)
		os.Exit(1)
	}
}
