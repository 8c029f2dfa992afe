#!/usr/bin/env bash
# Starts a local 3-node intentd cluster on loopback, waits for a leader,
# prints the addresses and a curl example, and stops all three on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

# With "--then CMD ARGS...", runs CMD once the cluster is ready, then stops it.
then=()
if [ "${1:-}" = "--then" ]; then shift; then=("$@"); fi

BIN=${BIN:-bin}
DATA=${INTENTD_RUN_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/intentd-run.XXXXXX")}
NODES=3
pids=()

stop() {
  trap - INT TERM EXIT
  if [ ${#pids[@]} -gt 0 ]; then
    echo
    echo "stopping ${#pids[@]} nodes (SIGTERM: hand over leadership, leave gossip, close raft)..."
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  echo "data and logs kept in $DATA"
}
trap stop EXIT
trap 'exit 0' INT TERM

for i in $(seq 1 $NODES); do
  args=(--id "n$i" --data-dir "$DATA/n$i"
        --http-addr "127.0.0.1:810$i" --raft-addr "127.0.0.1:820$i" --gossip-addr "127.0.0.1:830$i"
        --bootstrap-expect $NODES --auth=off)
  [ "$i" -gt 1 ] && args+=(--join 127.0.0.1:8301)
  "$BIN/intentd" "${args[@]}" >"$DATA/n$i.log" 2>&1 &
  pids+=($!)
done

echo "starting $NODES nodes (logs: $DATA/n{1,2,3}.log) ..."
deadline=$((SECONDS + 60))
until "$BIN/intentctl" --addr http://127.0.0.1:8101 --timeout 2s cluster >/dev/null 2>&1 \
      && curl -fsS http://127.0.0.1:8101/readyz >/dev/null 2>&1 \
      && curl -fsS http://127.0.0.1:8102/readyz >/dev/null 2>&1 \
      && curl -fsS http://127.0.0.1:8103/readyz >/dev/null 2>&1; do
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || { echo "a node exited; see $DATA/*.log"; tail -n 20 "$DATA"/*.log; exit 1; }
  done
  [ $SECONDS -lt $deadline ] || { echo "no leader after 60s; see $DATA/*.log"; exit 1; }
  sleep 0.2
done

"$BIN/intentctl" --addr http://127.0.0.1:8101 cluster
if [ ${#then[@]} -gt 0 ]; then
  "${then[@]}"
  exit $?
fi
cat <<MSG

intentd: 3-node cluster ready on loopback.
  HTTP:   http://127.0.0.1:8101  http://127.0.0.1:8102  http://127.0.0.1:8103  (any node answers any call)
  console: http://127.0.0.1:8101/ui/   (approvals, in doubt, intents, audit log, cluster; every node serves it)
  Raft:   127.0.0.1:8201-8203    gossip: 127.0.0.1:8301-8303
  data:   $DATA

Try it:
  curl -s -XPOST http://127.0.0.1:8101/v1/intents -H 'content-type: application/json' \\
    -d '{"key":"charge:order-91","tool":"stripe.charge","owner":"agent-7/demo","payload":{"amount":1299,"currency":"usd"}}'
  curl -s http://127.0.0.1:8103/v1/intents/charge:order-91
  bin/intentctl get charge:order-91

Ctrl-C stops all three.
MSG
wait "${pids[@]}"
