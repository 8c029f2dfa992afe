#!/usr/bin/env bash
# make bench-state: the state machine on disk as it was built (issue 32;
# docs/performance.md, "The state machine on disk: measured"). The real
# fsm.Machine over pebble (fsm-pebble) and over its in-memory store
# (fsm-memory), filled through the apply path (raft batches of 256 entries,
# a Commit per batch, as cluster/fsm.go's ApplyBatch) with N retained
# intents; then a snapshot (Sync, Clone, WriteSnapshot to a file), a pebble
# checkpoint, a tail of TAIL entries applied after the last sync, a clean
# close; a restore of the snapshot into a fresh store; a clean restart; and
# a restart that must replay the tail. Each phase runs in its own process
# (bench/cmd/storebench state), so each resident set is its own. Beside
# them, the build before the change (BASE) runs its own storebench's
# fsm-memory engine (the in-memory Machine of then), from a git worktree.
#
#   SIZES="1000000 10000000 30000000"   fsm-pebble's sizes
#   MEMORY_SIZES="1000000"              both in-memory engines' sizes (about 2 KB of RSS per intent)
#   BASE=4464307                        the build before the change ("" skips it)
#   BASE_DIR=/tmp/storebench-base-$BASE its worktree (made if missing, kept)
#   TAIL=100000 READS=100000 PROGRESS=10s
#   UNTIL=HH:MM (UTC)                   before each fsm-pebble size, estimate its time from the
#                                       last one's (linear in intents, plus a fifth); a size that
#                                       would end later shrinks to the whole millions that fit
#                                       (it is skipped below 1,000,000)
#   LOCK=file                           each measured process runs under flock on it, if set
#                                       (or run the whole script under flock, as one measurement)
#
# Results: .cache/bench-run/state-<time>/state.jsonl and table.md; the
# stores go to STORE_DIR (default the run directory) and are deleted after
# each run. fsm-pebble needs about 1.3 KB of disk per intent (store and
# snapshot) while it runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
GO=${GO:-go}
SIZES=${SIZES:-1000000 10000000 30000000}
MEMORY_SIZES=${MEMORY_SIZES:-1000000}
BASE=${BASE-4464307}
BASE_DIR=${BASE_DIR:-/tmp/storebench-base-$BASE}
TAIL=${TAIL:-100000}
READS=${READS:-100000}
PROGRESS=${PROGRESS:-10s}
RUN=.cache/bench-run/state-$(date -u +%Y%m%d-%H%M%S)
STORE_DIR=${STORE_DIR:-$RUN/stores}
mkdir -p "$RUN" "$STORE_DIR"
OUT=$RUN/state.jsonl
(cd bench && "$GO" build -o "../$RUN/storebench" ./cmd/storebench)
this=$(git rev-parse --short HEAD)
[ -n "$(git status --porcelain -- . ':!.cache')" ] && this="$this+dirty"

measured() { # a measured process: under the lock, if any
  if [ -n "${LOCK:-}" ]; then flock "$LOCK" "$@"; else "$@"; fi
}

if [ -n "$BASE" ]; then
  if [ ! -x "$BASE_DIR/storebench" ]; then
    echo "bench-state: building storebench of $BASE in $BASE_DIR" >&2
    [ -d "$BASE_DIR" ] || git worktree add --detach "$BASE_DIR" "$BASE" >&2
    (cd "$BASE_DIR/bench" && "$GO" build -o ../storebench ./cmd/storebench)
  fi
fi

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "build: $this; base: ${BASE:-none}"
  echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "sizes: fsm-pebble $SIZES; in memory $MEMORY_SIZES; tail $TAIL entries; reads $READS"
} | tee "$RUN/about.txt" >&2

# state ENGINE N: every phase of one run, each in its own process.
state() {
  local e=$1 n=$2 dir=$STORE_DIR/$1-$2
  rm -rf "$dir" && mkdir -p "$dir"
  for phase in fill restore restart restart-tail; do
    [ "$e" = fsm-memory ] && { [ "$phase" = restart ] || [ "$phase" = restart-tail ]; } && continue
    echo "bench-state: $e n=$n $phase (load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S))" >&2
    measured "$RUN/storebench" state -engine "$e" -phase "$phase" -n "$n" -tail "$TAIL" -reads "$READS" \
      -progress "$PROGRESS" -build "$this" -dir "$dir" | tee -a "$OUT"
  done
  rm -rf "$dir"
}

for n in $MEMORY_SIZES; do
  if [ -n "$BASE" ]; then
    dir=$STORE_DIR/base-$n
    rm -rf "$dir" && mkdir -p "$dir"
    echo "bench-state: $BASE fsm-memory n=$n (load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M:%S))" >&2
    measured "$BASE_DIR/storebench" -engine fsm-memory -n "$n" -steady 0 -reads "$READS" -batch 256 -dir "$dir" | tee -a "$OUT"
    rm -rf "$dir"
  fi
  state fsm-memory "$n"
done
prev_n=0 prev_s=0
for n in $SIZES; do
  if [ -n "${UNTIL:-}" ] && [ "$prev_n" -gt 0 ]; then
    now=$(date -u +%s) until=$(date -u -d "$UNTIL" +%s)
    est=$((prev_s * n / prev_n * 6 / 5))
    if [ $((now + est)) -gt "$until" ]; then
      fit=$(( (until - now) * prev_n * 5 / 6 / prev_s / 1000000 * 1000000 ))
      echo "bench-state: fsm-pebble n=$n would take about ${est}s, past $UNTIL; the most that fits: $fit" >&2
      [ "$fit" -lt 1000000 ] && break
      n=$fit
    fi
  fi
  t0=$(date -u +%s)
  state fsm-pebble "$n"
  prev_n=$n prev_s=$(( $(date -u +%s) - t0 ))
  [ "$prev_s" -gt 0 ] || prev_s=1
done
"$RUN/storebench" state-table -base "$BASE" < "$OUT" | tee "$RUN/table.md"
echo "bench-state: results in $RUN" >&2
