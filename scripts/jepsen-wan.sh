#!/usr/bin/env bash
# What a claim costs across regions, and how long a lost leader region
# takes to fail over: fault-suite runs over three regions (eu with a
# replica, us, ap) through the link-delay layer, nodes on --network wan
# with --local-duplicates.
#
#   W1 with half its iterations retrying a recent key as a new owner
#   (--retry-fraction 0.5: agents retrying calls that already ran).
#   latency runs: no delay, then every pair RTT apart for each RTT in RTTS
#     (no fault fires: the first would come after the run); each prints
#     the claim latency by region (grants, duplicates via the leader,
#     duplicates answered locally).
#   failover run: isolate-leader-region and kill-leader-region at FAIL_RTT,
#     FAILOVER_DURATION long; prints fault start to the first ok write
#     through another region.
#
# Knobs: RTTS="30ms 80ms 150ms" DURATION=60s FAIL_RTT=80ms
#   FAILOVER_DURATION=240s JEPSEN_RESULTS=results/wan-<time>
# Needs root and network namespaces (skips with a message without them).
# About 15 minutes with the defaults.
set -uo pipefail
cd "$(dirname "$0")/.."

RESULTS=${JEPSEN_RESULTS:-results/wan-$(date +%Y%m%d-%H%M%S)}
RTTS=${RTTS:-"30ms 80ms 150ms"}
DURATION=${DURATION:-60s}
FAIL_RTT=${FAIL_RTT:-80ms}
FAILOVER_DURATION=${FAILOVER_DURATION:-240s}
mkdir -p "$RESULTS"
go build -o "$RESULTS/intentd" ./cmd/intentd || exit 1
go build -o "$RESULTS/jepsen" ./cmd/jepsen || exit 1

common=(--binary "$RESULTS/intentd" --seed 7 --regions eu:1+1,us:1,ap:1 --placement --node-network wan
  --local-duplicates --workload w1 --clients 30 --rate 150 --retry-fraction 0.5)
status=0
run() { # name, args...
  local name=$1; shift
  echo "== jepsen wan: $name"
  "$RESULTS/jepsen" --results "$RESULTS/$name" "${common[@]}" "$@" >"$RESULTS/$name.out" 2>&1
  local rc=$?
  case $rc in
    0) ;;
    3) echo "== skipped (no root or no network namespaces here)"; exit 0 ;;
    *) echo "== $name: FAILED (exit $rc; see $RESULTS/$name.out)"; status=1 ;;
  esac
  # The verdict, then the measure this run is for.
  grep -E '^intentd fault run' "$RESULTS/$name.out"
  sed -n '/^claim latency by the region/,/^$/p; /^failover/p' "$RESULTS/$name/summary.txt" 2>/dev/null
}

# No fault in the latency runs: one kill-random would come after the run.
run latency-no-delay --duration "$DURATION" --nemesis kill-random --interval 1000s --hold 13s
for rtt in $RTTS; do
  run "latency-$rtt" --duration "$DURATION" --nemesis kill-random --interval 1000s --hold 13s --rtt "$rtt" --jitter 10%
done
run "failover-$FAIL_RTT" --duration "$FAILOVER_DURATION" --nemesis isolate-leader-region,kill-leader-region \
  --interval 30s --hold 13s --rtt "$FAIL_RTT" --jitter 10%
echo "== jepsen wan: results in $RESULTS"
exit $status
