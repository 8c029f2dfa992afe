#!/usr/bin/env bash
# bench-engines: the state machine's engines on a local 3-node cluster, side
# by side in one run (issue 32). For each build/engine in ENGINES, a fresh
# cluster is started, intent-bench measures claim + complete (unique keys,
# leader) at each level of LEVELS for DURATION, and the cluster is stopped:
#
#   base    the build before the change (BASE, default 4464307: the ledger in
#           memory), built from a git worktree in /tmp
#   memory  this build, --state-engine memory
#   pebble  this build, --state-engine pebble (the default)
#
# Each (rep, level) runs every engine once, in an order that rotates from one
# cell to the next, so machine noise hits all alike. Medians over REPS are
# printed as a Markdown table with the ratios to base.
#
# With FILL_COUNT=N, it also fills a fresh cluster of each build in
# FILL_ENGINES (default: base pebble) with N unique claims through the HTTP
# API (capacity-fill: 200 B payload, each grant completed with a 100 B
# result, FILL_CLIENTS clients, no memory limit) and reports VmRSS and VmHWM
# per node, the data dir's size and the fill rate (FILL_COUNT=0 skips it).
#
#   bench/scripts/bench-engines.sh
#   REPS=1 DURATION=3s LEVELS="1 64" bench/scripts/bench-engines.sh
#   LEVELS= FILL_COUNT=1000000 bench/scripts/bench-engines.sh
#   SUMMARIZE=.cache/bench-run/engines-<time> bench/scripts/bench-engines.sh
#     (the table of an earlier run, also of one stopped part way)
#
# BENCH_LOCK=file wraps each measured cell (start, measure, stop) in
# flock(1) on that file, for machines shared with other benchmarks.
# Results (raw outputs, results.json, table.md) go to
# .cache/bench-run/engines-<time>/.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BASE=${BASE:-4464307}
ENGINES=${ENGINES:-"base memory pebble"}
LEVELS=${LEVELS-"1 64 256"}
REPS=${REPS:-3}
DURATION=${DURATION:-10s}
WARMUP=${WARMUP:-2s}
PAYLOAD=${PAYLOAD:-100}
FILL_COUNT=${FILL_COUNT:-0}
FILL_ENGINES=${FILL_ENGINES:-"base pebble"}
FILL_CLIENTS=${FILL_CLIENTS:-32}
FILL_MAX=${FILL_MAX:-2h}
BENCH_LOCK=${BENCH_LOCK:-}
OUT=${OUT:-$ROOT/.cache/bench-run/engines-$(date -u +%Y%m%dT%H%M%SZ)}
if [ -z "${SUMMARIZE:-}" ]; then
  mkdir -p "$OUT/bin"
  echo "bench-engines: building into $OUT/bin"
  go build -o "$OUT/bin/intentd-new" ./cmd/intentd
  (cd bench && go build -o "$OUT/bin/intent-bench" ./cmd/intent-bench && go build -o "$OUT/bin/capacity-fill" ./scripts/capacity-fill)
  if [[ " $ENGINES $FILL_ENGINES " == *" base "* ]]; then
    WT=/tmp/intentd-base-$BASE
    [ -d "$WT" ] || git worktree add --detach "$WT" "$BASE" >/dev/null
    (cd "$WT" && go build -o "$OUT/bin/intentd-base" ./cmd/intentd)
  fi
fi
commit=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs' || echo "+dirty")

pids=()
stop_cluster() {
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  for p in "${pids[@]}"; do
    while kill -0 "$p" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    kill -9 "$p" 2>/dev/null || true
  done
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
trap stop_cluster EXIT

addr() { echo "127.0.0.1:24${1}0$2"; } # kind (1 http, 2 raft, 3 gossip), node
http_addrs="http://$(addr 1 1),http://$(addr 1 2),http://$(addr 1 3)"

# start_cluster engine dir: a fresh 3-node cluster of that build/engine.
start_cluster() {
  local e=$1 dir=$2 bin=$OUT/bin/intentd-new extra=() i args
  case $e in
    base) bin=$OUT/bin/intentd-base ;;
    memory | pebble) extra=(--state-engine "$e") ;;
    *) echo "bench-engines: unknown engine $e (base, memory, pebble)" >&2; exit 2 ;;
  esac
  mkdir -p "$dir"
  for i in 1 2 3; do
    args=(--id "n$i" --data-dir "$dir/n$i" --http-addr "$(addr 1 "$i")" --raft-addr "$(addr 2 "$i")"
      --gossip-addr "$(addr 3 "$i")" --bootstrap-expect 3 --auth=off "${extra[@]}")
    [ "$i" -gt 1 ] && args+=(--join "$(addr 3 1)")
    "$bin" "${args[@]}" >"$dir/n$i.log" 2>&1 &
    pids+=($!)
  done
  local deadline=$((SECONDS + 60))
  until curl -fsS "http://$(addr 1 1)/readyz" >/dev/null 2>&1 && curl -fsS "http://$(addr 1 2)/readyz" >/dev/null 2>&1 \
    && curl -fsS "http://$(addr 1 3)/readyz" >/dev/null 2>&1; do
    for p in "${pids[@]}"; do
      kill -0 "$p" 2>/dev/null || { echo "bench-engines: a $e node exited; see $dir/n*.log" >&2; tail -n 5 "$dir"/n*.log >&2; return 1; }
    done
    [ $SECONDS -lt $deadline ] || { echo "bench-engines: no ready $e cluster after 60 s; see $dir/n*.log" >&2; return 1; }
    sleep 0.3
  done
}

# locked CMD...: runs CMD holding flock(1)'s lock on BENCH_LOCK when set.
locked() {
  [ -n "$BENCH_LOCK" ] || { "$@"; return; }
  local fd rc=0
  exec {fd}>>"$BENCH_LOCK"
  flock "$fd"
  "$@" || rc=$?
  flock -u "$fd"
  exec {fd}>&-
  return $rc
}

# cell engine level rep: one measured level on a fresh cluster; appends a
# JSON line to results.jsonl.
cell() {
  local e=$1 n=$2 r=$3 dir=$OUT/clusters/$1-c$2-r$3 raw
  start_cluster "$e" "$dir" || { stop_cluster; return 0; }
  local load0
  load0=$(cut -d' ' -f1 /proc/loadavg)
  raw=$OUT/raw/$e-c$n-r$r.txt
  "$OUT/bin/intent-bench" --addr "$http_addrs" --clients "$n" --duration "$DURATION" --warmup "$WARMUP" \
    --payload-bytes "$PAYLOAD" >"$raw" 2>/dev/null || echo "bench-engines: intent-bench failed for $e c=$n r=$r" >&2
  stop_cluster
  rm -rf "$dir"
  python3 - "$e" "$n" "$r" "$raw" "$load0" "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/results.jsonl" <<'PY'
import json, sys
e, n, r, raw, l0, l1 = sys.argv[1:]
row = {"engine": e, "clients": int(n), "rep": int(r), "load": [float(l0), float(l1)]}
for line in open(raw):
    f = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(f) == 8 and f[0] == n:
        row.update(ops_s=float(f[1]), p50_ms=float(f[2]), p99_ms=float(f[3]), p999_ms=float(f[4]),
                   ops=int(f[5]), errors=int(f[6]), unknown=int(f[7]))
print(json.dumps(row))
PY
  tail -n 1 "$OUT/results.jsonl"
}

# table dir: the Markdown table of a run's results.jsonl (medians, ratios).
table() {
  python3 - "$1/results.jsonl" "$1/header.txt" >"$1/table.md" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
header = open(sys.argv[2]).read().strip().splitlines()
engines = list(dict.fromkeys(r["engine"] for r in rows))
levels = sorted({r["clients"] for r in rows})
med = lambda xs: statistics.median(xs) if xs else float("nan")
def stat(e, n, k):
    return med([r[k] for r in rows if r["engine"] == e and r["clients"] == n and k in r])
print("\n".join(header))
print()
cols = " | ".join(f"{e} claims/s | {e} p50 ms | {e} p99 ms" for e in engines)
others = [e for e in engines if e != "base"]
ratio_cols = " | ".join(f"{e} / base claims/s | {e} / base p99" for e in others) if "base" in engines else ""
print(f"| clients | {cols}" + (f" | {ratio_cols}" if ratio_cols else "") + " | errors | load avg |")
print("|---:|" + "---:|" * (3 * len(engines) + (2 * len(others) if ratio_cols else 0)) + "---:|---|")
for n in levels:
    cells = []
    for e in engines:
        cells += [f"{stat(e, n, 'ops_s'):,.0f}", f"{stat(e, n, 'p50_ms'):.2f}", f"{stat(e, n, 'p99_ms'):.2f}"]
    if ratio_cols:
        for e in others:
            cells += [f"{stat(e, n, 'ops_s') / stat('base', n, 'ops_s'):.2f}",
                      f"{stat(e, n, 'p99_ms') / stat('base', n, 'p99_ms'):.2f}"]
    errs = sum(r.get("errors", 0) + r.get("unknown", 0) for r in rows if r["clients"] == n)
    missing = sum(1 for r in rows if r["clients"] == n and "ops_s" not in r)
    loads = [r["load"][0] for r in rows if r["clients"] == n]
    cells += [f"{errs}" + (f" ({missing} cells failed)" if missing else ""), f"{min(loads):.1f}–{max(loads):.1f}"]
    print(f"| {n} | " + " | ".join(cells) + " |")
counts = [sum(1 for r in rows if r["engine"] == e and r["clients"] == n and "ops_s" in r) for e in engines for n in levels]
span = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}–{max(counts)}"
print(f"\nmedians over {span} reps per cell (claim + complete, unique keys, to the leader); each cell a fresh cluster; ratios of medians")
if "base" in engines:
    print("\nclaims/s ÷ base's in the same rep and level, per rep (adjacent in time unless a lock wait came between):\n")
    for e in others:
        for n in levels:
            paired = []
            for rep in sorted({r["rep"] for r in rows}):
                a = [r["ops_s"] for r in rows if r["engine"] == e and r["clients"] == n and r["rep"] == rep and "ops_s" in r]
                b = [r["ops_s"] for r in rows if r["engine"] == "base" and r["clients"] == n and r["rep"] == rep and "ops_s" in r]
                if a and b:
                    paired.append(f"{a[0] / b[0]:.2f}")
            print(f"- {e}, {n} clients: {', '.join(paired) or '-'}")
PY
}

if [ -n "${SUMMARIZE:-}" ]; then # the table of an earlier (maybe partial) run
  table "$SUMMARIZE" && cat "$SUMMARIZE/table.md"
  exit
fi
mkdir -p "$OUT/raw" "$OUT/clusters"
read -r -a engines <<<"$ENGINES"
{
  echo "date: $(date -u +%FT%TZ)  commit: $commit  base: $BASE  cores: $(nproc)  load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "knobs: ENGINES=\"$ENGINES\" LEVELS=\"$LEVELS\" REPS=$REPS DURATION=$DURATION WARMUP=$WARMUP PAYLOAD=$PAYLOAD FILL_COUNT=$FILL_COUNT"
} | tee "$OUT/header.txt"

if [ -n "$LEVELS" ]; then
  k=0
  for r in $(seq 1 "$REPS"); do
    for n in $LEVELS; do
      # Rotate the order of the engines from one cell to the next.
      for j in $(seq 0 $((${#engines[@]} - 1))); do
        e=${engines[$(((k + j) % ${#engines[@]}))]}
        echo "== rep $r, $n clients, $e"
        locked cell "$e" "$n" "$r"
      done
      k=$((k + 1))
    done
  done
  table "$OUT"
  echo
  cat "$OUT/table.md"
fi

# fill engine: FILL_COUNT unique claims, then RSS per node and the data dir.
fill() {
  local e=$1 dir=$OUT/fill/$1
  start_cluster "$e" "$dir" || { stop_cluster; return 0; }
  (
    while sleep 30; do
      line="$(date +%s)"
      for p in "${pids[@]}"; do line+=" $(awk '/^VmRSS:/{printf "%d", $2/1024}' "/proc/$p/status" 2>/dev/null)"; done
      echo "$line $(du -sm "$dir" | cut -f1)"
    done
  ) >"$dir/rss-samples.txt" &
  local sampler=$!
  "$OUT/bin/capacity-fill" --nodes "$(addr 1 1),$(addr 1 2),$(addr 1 3)" --clients "$FILL_CLIENTS" --duration "$FILL_MAX" \
    --count "$FILL_COUNT" --progress 30s --acked "$dir/acked.txt" >"$dir/fill.json" 2>"$dir/progress.txt"
  kill "$sampler" 2>/dev/null || true
  local rss="" hwm="" i
  for i in 0 1 2; do
    rss+="$(awk '/^VmRSS:/{printf "%d", $2/1024}' "/proc/${pids[$i]}/status" 2>/dev/null || echo -) / "
    hwm+="$(awk '/^VmHWM:/{printf "%d", $2/1024}' "/proc/${pids[$i]}/status" 2>/dev/null || echo -) / "
  done
  local du_all state
  du_all=$(du -sm "$dir" | cut -f1)
  state=$(du -sm "$dir"/n1/state 2>/dev/null | cut -f1 || echo -)
  stop_cluster
  python3 - "$e" "$dir/fill.json" "${rss% / }" "${hwm% / }" "$du_all" "$state" "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/fill-table.md" <<'PY'
import json, sys
e, fill, rss, hwm, du, state, load = sys.argv[1:]
f = json.load(open(fill))
answers = ", ".join(f"{k}: {v}" for k, v in sorted(f["answers"].items()) if not k.startswith(("201", "complete 200")))
print(f'| {e} | {f["acked_intents"]:,} | {f["seconds"]:.0f} s | {f["acked_intents"] / f["seconds"]:.0f} | {rss} | {hwm} | {du} MiB ({state} MiB state on n1) | {answers or "-"} | {load} |')
PY
  rm -f "$dir/acked.txt"
}

if [ "$FILL_COUNT" -gt 0 ]; then
  {
    printf '| build | intents acked | fill time | claims/s | VmRSS per node at the end, MiB | VmHWM per node, MiB | data dirs, 3 nodes | other answers | load avg |\n'
    printf '|---|---:|---:|---:|---|---|---|---|---|\n'
  } >"$OUT/fill-table.md"
  for e in $FILL_ENGINES; do
    echo "== fill $e to $FILL_COUNT intents (at most $FILL_MAX)"
    locked fill "$e"
  done
  echo
  cat "$OUT/fill-table.md"
fi
echo "(raw outputs in $OUT)"
