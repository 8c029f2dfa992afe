#!/usr/bin/env bash
# make bench-store: the state machine's apply workload on each candidate
# storage engine beside today's in-memory fsm.Machine (issue 32;
# docs/performance.md, "Choosing the storage engine for the state machine").
# Each engine runs in its own process (bench/cmd/storebench), one after the
# other, REPS times in alternation, so each resident set is its own; the
# JSON lines go to .cache/bench-run/store-<time>/results.jsonl and a
# Markdown table is printed.
#
#   N=1000000 STEADY=200000 READS=100000 REPS=1 ENGINES="fsm-memory pebble pebble-nowal bbolt"
#   SCAN_FROM_START=1 also runs pebble with the sweeps scanning each time
#   index from its start (over its tombstones).
#   STORE_DIR= where the stores go (default under the run directory; needs
#   about 3 KB per intent free).
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
N=${N:-1000000}
STEADY=${STEADY:-200000}
READS=${READS:-100000}
REPS=${REPS:-1}
ENGINES=${ENGINES:-fsm-memory pebble pebble-nowal bbolt}
RUN=.cache/bench-run/store-$(date -u +%Y%m%d-%H%M%S)
STORE_DIR=${STORE_DIR:-$RUN/stores}
mkdir -p "$RUN" "$STORE_DIR"
(cd bench && "$GO" build -o "../$RUN/storebench" ./cmd/storebench)
runs=()
for e in $ENGINES; do runs+=("$e"); done
[ "${SCAN_FROM_START:-}" = 1 ] && runs+=("pebble:scan-from-start")
for rep in $(seq "$REPS"); do
  for r in "${runs[@]}"; do
    e=${r%%:*}
    flags=()
    [ "$r" != "$e" ] && flags+=(-scan-from-start)
    dir=$STORE_DIR/$e-$rep
    rm -rf "$dir" && mkdir -p "$dir"
    echo "bench-store: $r, rep $rep, n=$N (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    "$RUN/storebench" -engine "$e" "${flags[@]}" -n "$N" -steady "$STEADY" -reads "$READS" -dir "$dir" \
      | tee -a "$RUN/results.jsonl"
    rm -rf "$dir"
  done
done
"$RUN/storebench" -table < "$RUN/results.jsonl" | tee "$RUN/table.md"
echo "bench-store: results in $RUN" >&2
