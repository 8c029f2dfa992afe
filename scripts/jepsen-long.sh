#!/usr/bin/env bash
# The long fault profile: every nemesis on 5 nodes, several seeds. Bounded:
# SEEDS runs of DURATION each (defaults: 3 x 5m).
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS=${JEPSEN_RESULTS:-results/long-$(date +%Y%m%d-%H%M%S)}
DURATION=${DURATION:-5m}
SEEDS=${SEEDS:-"1 2 3"}
mkdir -p "$RESULTS"
go build -o "$RESULTS/intentd" ./cmd/intentd && go build -o "$RESULTS/jepsen" ./cmd/jepsen || exit 1
status=0
for seed in $SEEDS; do
  echo "== jepsen long profile: seed $seed"
  "$RESULTS/jepsen" --binary "$RESULTS/intentd" --results "$RESULTS/seed$seed" \
    --nodes 5 --nemesis all --duration "$DURATION" --seed "$seed" || status=1
done
exit $status
