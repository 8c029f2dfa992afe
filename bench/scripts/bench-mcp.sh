#!/usr/bin/env bash
# make bench-mcp: what the MCP gate (bin/intent-mcp) adds to a tool call,
# on one fresh local 3-node cluster. A driver with a real go-sdk client
# (bench/mcpbench) calls the test upstream's bench tool
# (testkit/mcpupstream: destructive, answers at once,
# writes nothing), closed loop, at each number of concurrent callers
# (CALLERS) and for ROUNDS rounds (the order of the cells rotated each
# round), WARMUP + DURATION s per cell:
#
#   direct stdio   the upstream launched by the client
#   gate stdio     intent-mcp launched by the client, the upstream launched by the gate
#   direct http    the upstream serving streamable HTTP
#   gate http      intent-mcp --listen in front of that upstream
#   ledger         the ledger's own claim, then complete, through the Go SDK
#
# every call with a fresh explicit key, then prints a Markdown table and the
# verdict against issue 15's target: the gate adds at most one claim +
# complete round trip, taken as its added p50 (gate - direct) <= 2x the
# ledger's claim p50 of the same run. Every process shares the machine's
# cores. PROFILE=1 also takes a CPU profile of the gate in each gate cell
# of round 1 (intent-mcp --pprof) and prints its top functions. Bounded: ROUNDS x levels x 5 cells of WARMUP + DURATION s,
# plus the cluster's start and each stdio cell's launch.
#
#   ROUNDS=2 DURATION=10 CALLERS=1,16 make bench-mcp
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" != "--inner" ]; then
  export INTENTD_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/intentd-bench-mcp.XXXXXX")
  exec ./scripts/run-local.sh --then "$0" --inner
fi

GO=${GO:-go}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CALLERS=${CALLERS:-1,16}
TRANSPORTS=${TRANSPORTS:-stdio,http}
PROFILE=${PROFILE:-0}
ADDRS=http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103
RUN_DIR=${INTENTD_RUN_DIR:-$(mktemp -d)}

"$GO" build -o "$RUN_DIR/testupstream" ./testkit/mcpupstream
(cd bench && "$GO" build -o "$RUN_DIR/mcpbench" ./mcpbench)

# The cluster's node processes (started by run-local.sh with --data-dir
# $RUN_DIR/nN), for their CPU per call.
node_pids=$(pgrep -f -- "--data-dir $RUN_DIR/n[0-9]" | paste -sd, -)
[ -n "$node_pids" ] || { echo "bench-mcp: cannot find the cluster's node processes" >&2; exit 1; }

args=(--ledger "$ADDRS" --gate-bin bin/intent-mcp --upstream-bin "$RUN_DIR/testupstream" --callers "$CALLERS"
      --transports "$TRANSPORTS" --rounds "$ROUNDS" --duration "${DURATION}s" --warmup "${WARMUP}s"
      --run-dir "$RUN_DIR" --node-pids "$node_pids")
[ "$PROFILE" = 1 ] && args+=(--profile-dir "$RUN_DIR/profiles")
echo "bench-mcp: ${ROUNDS} rounds, callers ${CALLERS}, transports ${TRANSPORTS}, ${WARMUP}s + ${DURATION}s per cell; ledger $ADDRS; logs in $RUN_DIR" >&2
"$RUN_DIR/mcpbench" "${args[@]}"
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $("$GO" version 2>/dev/null | cut -d' ' -f3 || true)"
if [ "$PROFILE" = 1 ]; then
  for f in "$RUN_DIR"/profiles/*.pprof; do
    [ -f "$f" ] || continue
    echo
    echo "CPU profile of intent-mcp: $(basename "$f" .pprof) ($f):"
    "$GO" tool pprof -top -nodecount 30 bin/intent-mcp "$f" 2>/dev/null | head -40 || true
  done
fi
