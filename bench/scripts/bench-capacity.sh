#!/usr/bin/env bash
# bench-capacity: 3 nodes, each in a 400 MiB memory cgroup (v1, as root),
# 32 clients filling unique claims (200 B payload, 100 B result, each
# grant completed), with this build and with the build before admission
# control (BASE, default 776b00b, built from a git worktree in /tmp).
# For each: intents acknowledged when the first 507 ledger_full came,
# peak memory per node (cgroup max usage), OOM kills, and acknowledged
# writes lost (nodes killed are restarted without the limit to check).
#
#   sudo bench/scripts/bench-capacity.sh            # both builds
#   LIMIT=$((128<<20)) FILL=420s bench/scripts/bench-capacity.sh
#   BUILDS=new FILL=120s bench/scripts/bench-capacity.sh
#   BASE=4464307 NEW_ARGS="--state-engine memory" bench/scripts/bench-capacity.sh
#
# NEW_ARGS are extra intentd flags for the new build (its state engine is
# pebble by default: the ledger on disk, so it may fill until FILL ends).
# The peak of each node's cgroup (memory.max_usage_in_bytes) counts the
# page cache charged to it, VmHWM the resident pages of the process.
#
# Heavy (minutes, ~1.2 GiB of RAM): run once, alone. On 2 shared cores the
# fill runs at ~250 claims/s: 400 MiB takes longer than FILL's default;
# docs/performance.md's run used LIMIT=128 MiB, FILL=420s.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
BASE=${BASE:-776b00b}
BUILDS=${BUILDS:-"old new"}
FILL=${FILL:-240s}
LIMIT=${LIMIT:-$((400 << 20))}
CLIENTS=${CLIENTS:-32}
NEW_ARGS=${NEW_ARGS:-}
CG=/sys/fs/cgroup/memory
OUT=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/bench-capacity.XXXXXX")}
[ "$(id -u)" = 0 ] && [ -w "$CG" ] || { echo "bench-capacity: needs root and cgroup v1 memory at $CG" >&2; exit 1; }

echo "building into $OUT"
go build -o "$OUT/intentd-new" ./cmd/intentd
(cd bench && go build -o "$OUT/capacity-fill" ./scripts/capacity-fill)
if [[ " $BUILDS " == *" old "* ]]; then
  WT=/tmp/intentd-base-$BASE
  [ -d "$WT" ] || git worktree add --detach "$WT" "$BASE" >/dev/null
  (cd "$WT" && go build -o "$OUT/intentd-old" ./cmd/intentd)
fi

pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  sleep 0.5
  for d in "$CG"/intentd-cap-*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
}
trap cleanup EXIT

addr() { echo "127.0.0.1:2${1}10$2"; } # kind(1 http, 2 raft, 3 gossip), node
nodes="$(addr 1 1),$(addr 1 2),$(addr 1 3)"

start_node() { # build i cgroup
  local b=$1 i=$2 cg=$3 args
  args=(--id "n$i" --data-dir "$OUT/$b/n$i" --http-addr "$(addr 1 "$i")" --raft-addr "$(addr 2 "$i")"
    --gossip-addr "$(addr 3 "$i")" --bootstrap-expect 3 --auth=off)
  [ "$i" -gt 1 ] && args+=(--join "$(addr 3 1)")
  # shellcheck disable=SC2206 # NEW_ARGS is a list of flags
  [ "$b" = new ] && args+=($NEW_ARGS)
  sh -c 'echo $$ > "$0/cgroup.procs"; exec "$@"' "$cg" "$OUT/intentd-$b" "${args[@]}" >>"$OUT/$b/n$i.log" 2>&1 &
  pids[$i]=$!
}

wait_ready() {
  local deadline=$((SECONDS + 60))
  until curl -fsS "http://$(addr 1 1)/readyz" >/dev/null 2>&1 && curl -fsS "http://$(addr 1 2)/readyz" >/dev/null 2>&1 \
    && curl -fsS "http://$(addr 1 3)/readyz" >/dev/null 2>&1; do
    [ $SECONDS -lt $deadline ] || { echo "no ready cluster after 60 s; see $OUT/*/n*.log" >&2; return 1; }
    sleep 0.5
  done
}

printf '| build | intents acked at first ledger_full | acked in all | first refusal | fill time | peak RSS per node, MiB (VmHWM; killed: -) | cgroup peak per node, MiB | OOM-killed | acked writes lost |\n' >"$OUT/table.md"
printf '|---|---|---|---|---|---|---|---|---|\n' >>"$OUT/table.md"

for b in $BUILDS; do
  echo "== $b build: filling for at most $FILL"
  mkdir -p "$OUT/$b"
  for i in 1 2 3; do
    cg="$CG/intentd-cap-$b-$i"
    mkdir -p "$cg"
    echo "$LIMIT" >"$cg/memory.limit_in_bytes"
    start_node "$b" "$i" "$cg"
  done
  wait_ready
  "$OUT/capacity-fill" --nodes "$nodes" --clients "$CLIENTS" --duration "$FILL" --acked "$OUT/$b/acked.txt" >"$OUT/$b/fill.json"
  cat "$OUT/$b/fill.json"
  peaks="" cgpeaks="" killed=0
  for i in 1 2 3; do
    cg="$CG/intentd-cap-$b-$i"
    hwm=$(awk '/^VmHWM:/{printf "%d", $2/1024}' "/proc/${pids[$i]}/status" 2>/dev/null || true)
    peaks+="${hwm:--}/"
    cgpeaks+="$(($(cat "$cg/memory.max_usage_in_bytes") >> 20))/"
    grep -h "the ledger is full" "$OUT/$b/n$i.log" | head -1 || true
    oom=$(awk '/^oom_kill /{print $2}' "$cg/memory.oom_control")
    if [ "${oom:-0}" -gt 0 ] || ! kill -0 "${pids[$i]}" 2>/dev/null; then
      killed=$((killed + 1))
      echo "n$i was OOM-killed (oom_kill $oom); restarting it without the limit to check what was acked"
      echo -1 >"$cg/memory.limit_in_bytes"
      kill -9 "${pids[$i]}" 2>/dev/null || true
      start_node "$b" "$i" "$cg"
    fi
  done
  # The check reads the whole ledger: lift the limits of the survivors too.
  for i in 1 2 3; do echo -1 >"$CG/intentd-cap-$b-$i/memory.limit_in_bytes"; done
  wait_ready || true
  "$OUT/capacity-fill" --nodes "$nodes" --verify "$OUT/$b/acked.txt" >"$OUT/$b/verify.json" || echo '{"lost":"unchecked"}' >"$OUT/$b/verify.json"
  cat "$OUT/$b/verify.json"
  label=$b
  [ "$b" = old ] && label="old ($BASE)"
  [ "$b" = new ] && label="new ($(git rev-parse --short HEAD)${NEW_ARGS:+ $NEW_ARGS})"
  python3 - "$label" "$OUT/$b/fill.json" "$OUT/$b/verify.json" "${peaks%/}" "$killed" "${cgpeaks%/}" >>"$OUT/table.md" <<'PY'
import json, sys
b, fill, ver, peaks, killed, cgpeaks = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3])), sys.argv[4], sys.argv[5], sys.argv[6]
first = fill.get("first_refusal_s") or 0
at = f'{fill["acked_at_first_refusal"]:,}' if first else "never refused"
print(f'| {b} | {at} | {fill["acked_intents"]:,} | {f"{first:.0f} s" if first else "-"} | {fill["seconds"]:.0f} s | {peaks} | {cgpeaks} | {killed} of 3 | {ver.get("lost")} of {ver.get("acked", "?")} |')
PY
  for i in 1 2 3; do kill "${pids[$i]}" 2>/dev/null || true; done
  for i in 1 2 3; do wait "${pids[$i]}" 2>/dev/null || true; done
  for i in 1 2 3; do rmdir "$CG/intentd-cap-$b-$i" 2>/dev/null || true; done
done
echo
cat "$OUT/table.md"
echo "(logs and JSON in $OUT)"
