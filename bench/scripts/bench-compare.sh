#!/usr/bin/env bash
# intentd vs etcd, side by side, on this machine (make bench-compare).
#
# Builds intentd, etcd (the release pinned in bench/etcdserver/go.mod) and
# the bench-compare driver into .cache/bench-bin (never committed), then
# starts a fresh 3-node cluster of each system in turn on loopback, drives
# both with the same closed-loop load and writes results.json, table.md and
# an SVG plot into .cache/bench-run/<time>/. A full run updates the table
# in docs/benchmarks.md (between its bench-compare markers) and
# docs/img/bench-compare.svg.
#
#   BENCH_QUICK=1   one repetition, 1 s warm-up + 3 s per level (~3 minutes)
#   BENCH_README=   path of the page whose table to update (default
#                   docs/benchmarks.md; "" to leave it alone)
#   BENCH_TIMEOUT=  hard bound on the whole run (default 3h)
# Extra arguments go to bench-compare (e.g. --clients 1,64 --modes unique).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="/usr/local/go/bin:$PATH"
GO=${GO:-go}
BIN=.cache/bench-bin
RUN=.cache/bench-run/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$BIN" "$RUN"

echo "bench-compare: building intentd, etcd and the driver into $BIN ..."
"$GO" build -o "$BIN/intentd" ./cmd/intentd
(cd bench/etcdserver && "$GO" build -o "../../$BIN/etcd" .)
(cd bench && "$GO" build -o "../$BIN/bench-compare" ./cmd/bench-compare)

args=(--intentd "$BIN/intentd" --etcd "$BIN/etcd" --work "$RUN")
if [ "${BENCH_QUICK:-}" = 1 ]; then
  args+=(--reps 1 --warmup 1s --duration 3s)
  readme=${BENCH_README-}
else
  readme=${BENCH_README-docs/benchmarks.md}
fi
[ -n "$readme" ] && args+=(--readme "$readme" --svg docs/img/bench-compare.svg)

pid=
cleanup() {
  trap - INT TERM EXIT
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  # Anything the driver started and did not stop (it was killed): by pid.
  if [ -f "$RUN/pids" ]; then
    while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$RUN/pids"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

timeout --signal=TERM --kill-after=60s "${BENCH_TIMEOUT:-3h}" \
  "$BIN/bench-compare" "${args[@]}" "$@" &
pid=$!
wait "$pid"
