#!/usr/bin/env bash
# The fault suite at scale: a bounded matrix of runs (nodes x nemesis sets
# x workloads x network x seeds), then every positive control under WAN
# delay, then one aggregate table (runs, ops checked, violations, info
# rate, unavailability, leader changes) written into DOC between the
# soak-table markers.
#
# Defaults: 2 sizes x 3 nemesis sets x 2 workloads x 2 networks x 5 seeds =
# 120 runs of 30 s, then 5 controls: about 80 minutes on a 2-core VM.
# Every knob is an environment variable:
#   NODES="3 5" SETS="net proc all" WORKLOADS="w1,w2 w1,w2,w3"
#   NETWORKS="lan wan" SEEDS="1 2 3 4 5" DURATION=30s RATE=250
#   CONTROLS=1 (0: skip them) DOC=docs/fault-testing.md (empty: no doc)
#   JEPSEN_WRAP="flock /tmp/some.lock" (a prefix for each run's command)
#   RTT3 / RTT5 and REGIONS3 / REGIONS5 (the wan network's layout)
#   PLACEMENT=1 passes the nodes their regions and roles (--placement)
#   REPLICAS=1 adds a replica to each wan layout (needs node support)
#   LOCAL=1 passes --local-duplicates to the nodes of every cell
#   KEEP_DATA=1 keeps the node data of passed runs (200 MB each)
# Needs root and network namespaces: without them (and CI not true) it
# skips with a message.
set -uo pipefail
cd "$(dirname "$0")/.."

RESULTS=${JEPSEN_RESULTS:-results/soak-$(date +%Y%m%d-%H%M%S)}
NODES=${NODES:-"3 5"}
SETS=${SETS:-"net proc all"}
WORKLOADS=${WORKLOADS:-"w1,w2 w1,w2,w3"}
NETWORKS=${NETWORKS:-"lan wan"}
SEEDS=${SEEDS:-"1 2 3 4 5"}
DURATION=${DURATION:-30s}
RATE=${RATE:-250}
CONTROLS=${CONTROLS:-1}
DOC=${DOC-docs/fault-testing.md}
WRAP=${JEPSEN_WRAP:-}
REGIONS3=${REGIONS3:-eu:1,us:1,ap:1}
REGIONS5=${REGIONS5:-eu:2,us:2,ap:1}
RTT=${RTT:-eu-us=80ms,eu-ap=150ms,us-ap=150ms}
JITTER=${JITTER:-10%}
PLACEMENT=${PLACEMENT:-0}
REPLICAS=${REPLICAS:-0}
KEEP_DATA=${KEEP_DATA:-0}
LOCAL=${LOCAL:-0}

mkdir -p "$RESULTS"
go build -o "$RESULTS/intentd" ./cmd/intentd || exit 1
go build -tags faults -o "$RESULTS/intentd-faults" ./cmd/intentd || exit 1
go build -o "$RESULTS/jepsen" ./cmd/jepsen || exit 1
RUNS="$RESULTS/runs.tsv"
: >"$RUNS"
started=$(date +%s)

# nemeses SET NODES NETWORK: the nemeses of one cell.
nemeses() {
  local set=$1 n=$2 net=$3 list
  case $set in
    net) list=partition-halves,isolate-leader,deafen-leader,loss,snapshot-install
         [ "$n" = 5 ] && list=$list,ring,bridge
         [ "$net" = wan ] && list=$list,wan,isolate-leader-region ;;
    proc) list=kill-leader,kill-random,kill-minority,pause-leader,pause-random,membership,clock-skew
          [ "$net" = wan ] && list=$list,wan,kill-leader-region ;;
    all) list=all ;;
    *) echo "jepsen-soak: unknown nemesis set $set (want net, proc, all)" >&2; exit 2 ;;
  esac
  echo "$list"
}

# network N NETWORK: the flags of the network: N nodes on the lan, or the
# wan layout of N voters.
network() {
  local n=$1 net=$2 regions
  [ "$LOCAL" = 1 ] && echo "--local-duplicates"
  [ "$net" = lan ] && { echo "--nodes $n"; return; }
  regions=$REGIONS3
  [ "$n" = 5 ] && regions=$REGIONS5
  [ "$REPLICAS" = 1 ] && regions="${regions%%,*}+1,${regions#*,}"
  # A delayed network answers slower: more clients keep the offered rate.
  echo "--regions $regions --rtt $RTT --jitter $JITTER --clients 30"
  [ "$PLACEMENT" = 1 ] && echo "--placement"
}

# run NAME GROUP CONTROL ARGS...: one run, recorded in runs.tsv.
skipped=0
run() {
  local name=$1 group=$2 control=$3; shift 3
  local bin="$RESULTS/intentd"
  [ -n "$control" ] && bin="$RESULTS/intentd-faults"
  echo "== jepsen soak: $name ($group)"
  # The run's own time starts inside the wrapper: a wait for a lock is
  # not machine time.
  # shellcheck disable=SC2086,SC2016
  $WRAP sh -c 'date +%s >"$0"; exec "$@"' "$RESULTS/$name.t0" \
    "$RESULTS/jepsen" --binary "$bin" --results "$RESULTS/$name" "$@" >"$RESULTS/$name.out" 2>&1
  local rc=$?
  [ "$rc" = 3 ] && { echo "== skipped: no root or no network namespaces here"; skipped=1; return; }
  local t0
  t0=$(cat "$RESULTS/$name.t0" 2>/dev/null || date +%s)
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$group" "$control" "$rc" "$(($(date +%s) - t0))" >>"$RUNS"
  # A passed run's node data (about 200 MB of Raft log and snapshots) goes;
  # its history, logs and report stay. A failed run keeps everything.
  [ "$rc" = 0 ] && [ "$KEEP_DATA" != 1 ] && rm -rf "$RESULTS/$name/data"
  grep -E '^(intentd fault run|positive control)' "$RESULTS/$name.out" | sed 's/^/   /'
}

for seed in $SEEDS; do
  for n in $NODES; do
    for net in $NETWORKS; do
      for set in $SETS; do
        for wl in $WORKLOADS; do
          w=${wl//,/}
          # shellcheck disable=SC2046
          run "n$n-$net-$set-$w-s$seed" "$n nodes, $net, $set" "" \
            --seed "$seed" --duration "$DURATION" --interval 5s --hold 2500ms --rate "$RATE" \
            --nemesis "$(nemeses "$set" "$n" "$net")" --workload "$wl" $(network "$n" "$net")
          [ "$skipped" = 1 ] && exit 0
        done
      done
    done
  done
done

if [ "$CONTROLS" = 1 ]; then
  # The positive controls of the short profile, over the wan network of
  # three regions: each seeded bug must still be caught.
  wan3="--regions $REGIONS3 --rtt $RTT --jitter $JITTER"
  # shellcheck disable=SC2086
  {
    run control-stale-reads-wan "controls, wan" stale-reads --seed 42 --duration 45s --interval 4s --hold 2500ms \
      --rate 400 --nemesis isolate-leader --workload w1,w2 --bug stale-reads $wan3
    run control-check-then-claim-wan "controls, wan" check-then-claim --seed 42 --duration 30s --interval 4s --hold 2500ms \
      --rate 600 --claimants 5 --clients 30 --nemesis isolate-leader,partition-halves --workload w1,w2 --bug check-then-claim $wan3
    run control-leadership-lost-wan "controls, wan" leadership-lost-is-failure --seed 42 --duration 120s --interval 3s --hold 2s \
      --rate 400 --clients 30 --nemesis deafen-leader --workload w1,w2 --bug leadership-lost-is-failure $wan3
    run control-trust-gossip-ids-wan "controls, wan" trust-gossip-ids --seed 42 --duration 20s --interval 4s --hold 2500ms \
      --nemesis rogue-member --workload w1,w2 --bug trust-gossip-ids $wan3
    # Over the WAN the racing claimants all ask before any follower has
    # applied the winner's report: only late retries (some with the
    # divergent payload) reach a follower that answers locally.
    run control-local-duplicate-any-payload-wan "controls, wan" local-duplicate-any-payload --seed 42 --duration 30s --interval 5s \
      --hold 2500ms --clients 30 --retry-fraction 0.5 --nemesis kill-random --workload w1,w2 --local-duplicates \
      --bug local-duplicate-any-payload $wan3
  }
fi

elapsed=$(($(date +%s) - started))
echo "== jepsen soak: $(wc -l <"$RUNS") runs in ${elapsed}s; aggregate:"
args=(aggregate --wall-seconds "$elapsed" --matrix "NODES=\"$NODES\" SETS=\"$SETS\" WORKLOADS=\"$WORKLOADS\" NETWORKS=\"$NETWORKS\" SEEDS=\"$SEEDS\" DURATION=$DURATION RATE=$RATE PLACEMENT=$PLACEMENT REPLICAS=$REPLICAS LOCAL=$LOCAL")
[ -n "$DOC" ] && args+=(--doc "$DOC")
"$RESULTS/jepsen" "${args[@]}" "$RESULTS"
