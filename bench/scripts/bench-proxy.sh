#!/usr/bin/env bash
# make bench-proxy: what intent-proxy costs, on one fresh local 3-node
# cluster. At each level of closed-loop clients (LEVELS) and for ROUNDS
# rounds (the order of the three rotated each round) it measures, with
# bin/intent-bench, DURATION s each after WARMUP s:
#
#   direct  POSTs of a small JSON body with a fresh Idempotency-Key straight
#           to a trivial upstream API (intent-bench --serve-upstream: 201
#           and a small JSON body);
#   proxy   the same requests through bin/intent-proxy in front of that
#           upstream (claim, forward, record the answer, commit);
#   ledger  the ledger's own claim + complete round trip through the Go SDK
#           (intent-bench --via sdk), for comparison;
#
# then prints a Markdown table and the verdict against issue 16's targets:
# the proxy's added p50 (proxy p50 - direct p50) <= the ledger's claim +
# complete p50, and the proxy's requests/s at 64 clients >= 0.8x the
# ledger's claim + complete ops/s. Every process shares the machine's cores.
# PROFILE=1 also takes a CPU profile of the proxy process during the proxy
# run at the highest level of the first round (bin/intent-proxy --pprof)
# and prints its top functions. Bounded: ROUNDS x LEVELS x 3 runs of
# WARMUP + DURATION s, plus the cluster's start.
#
#   ROUNDS=2 DURATION=10 LEVELS="1 64" make bench-proxy
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" != "--inner" ]; then
  export INTENTD_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/intentd-bench-proxy.XXXXXX")
  exec ./scripts/run-local.sh --then "$0" --inner
fi

ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
LEVELS=${LEVELS:-"1 64"}
PROFILE=${PROFILE:-0}
ADDRS=http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103
UPSTREAM=127.0.0.1:${BENCH_UPSTREAM_PORT:-8490}
PROXY=127.0.0.1:${BENCH_PROXY_PORT:-8480}
PPROF=127.0.0.1:${BENCH_PPROF_PORT:-6061}
RUN_DIR=${INTENTD_RUN_DIR:-$(mktemp -d)}
PATHS=(direct proxy ledger)

pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT

bin/intent-bench --serve-upstream "$UPSTREAM" >"$RUN_DIR/upstream.log" 2>&1 &
pids+=($!)
bin/intent-proxy --upstream "http://$UPSTREAM" --ledger "$ADDRS" --listen "$PROXY" --pprof "$PPROF" \
  --log-level warn >"$RUN_DIR/proxy.log" 2>&1 &
pids+=($!)
deadline=$((SECONDS + 30))
until curl -fsS "http://$PROXY/-/readyz" >/dev/null 2>&1 && grep -q 'upstream listening' "$RUN_DIR/upstream.log"; do
  for p in "${pids[@]}"; do
    kill -0 "$p" 2>/dev/null || { echo "bench-proxy: the upstream or the proxy exited:" >&2; tail -n 20 "$RUN_DIR"/{upstream,proxy}.log >&2; exit 1; }
  done
  [ $SECONDS -lt $deadline ] || { echo "bench-proxy: the proxy is not ready after 30 s" >&2; tail -n 20 "$RUN_DIR/proxy.log" >&2; exit 1; }
  sleep 0.2
done

# The cluster's node processes (started by run-local.sh with --data-dir
# $RUN_DIR/nN) and this script's upstream and proxy, for CPU accounting.
node_pids=$(pgrep -f -- "--data-dir $RUN_DIR/n[0-9]" | tr '\n' ' ')
[ -n "$node_pids" ] || { echo "bench-proxy: cannot find the cluster's node processes" >&2; exit 1; }
up_pid=${pids[0]} proxy_pid=${pids[1]}
# cpu_ticks PID...: user + system clock ticks of the processes so far.
cpu_ticks() {
  local p t=0 f
  for p in "$@"; do
    f=$(cut -d')' -f2 "/proc/$p/stat" 2>/dev/null) || continue
    t=$(( t + $(awk '{ print $12 + $13 }' <<<"$f") ))
  done
  echo "$t"
}
HZ=$(getconf CLK_TCK)

# run PATH CLIENTS: one measurement; prints "ops/s p50ms p99ms errors"
# and the CPU ms per op of the nodes, the proxy, the upstream and the
# load generator over the whole run (warm-up included).
run() {
  local path=$1 n=$2 out err
  local common=(--clients "$n" --duration "${DURATION}s" --warmup "${WARMUP}s" --payload-bytes 32)
  case $path in
    direct) cmd=(bin/intent-bench --via idem --url "http://$UPSTREAM/v1/charges" "${common[@]}") ;;
    proxy) cmd=(bin/intent-bench --via idem --url "http://$PROXY/v1/charges" "${common[@]}") ;;
    ledger) cmd=(bin/intent-bench --via sdk --addr "$ADDRS" "${common[@]}") ;;
  esac
  err=$(mktemp) tf=$(mktemp)
  local c0 p0 u0
  c0=$(cpu_ticks $node_pids) p0=$(cpu_ticks "$proxy_pid") u0=$(cpu_ticks "$up_pid")
  out=$(/usr/bin/time -f 'CPU %U %S' -o "$tf" "${cmd[@]}" 2>"$err") || {
    echo "bench-proxy: $path at $n clients failed:" >&2; tail -n 5 "$err" >&2; rm -f "$err" "$tf"; return 1; }
  out+=$'\n'"TICKS $(( $(cpu_ticks $node_pids) - c0 )) $(( $(cpu_ticks "$proxy_pid") - p0 )) $(( $(cpu_ticks "$up_pid") - u0 ))"
  out+=$'\n'$(cat "$tf")
  rm -f "$err" "$tf"
  # | clients | ops/s | p50 ms | p99 ms | p99.9 ms | ops | errors | unknown |
  awk -F'|' -v n="$n" -v hz="$HZ" -v secs="$((WARMUP + DURATION))" '
    $2 + 0 == n && $2 ~ /[0-9]/ { rate = $3 + 0; p50 = $4 + 0; p99 = $5 + 0; errs = $8 + $9 }
    /^TICKS / { split($0, t, " "); nodes = t[2] / hz; px = t[3] / hz; up = t[4] / hz }
    /^CPU / { split($0, c, " "); gen = c[2] + c[3] }
    END {
      ops = rate * secs  # ops over warm-up + measured time, at the measured rate
      per = (ops > 0 ? 1000 / ops : 0)
      printf "%.0f %.2f %.2f %d %.3f %.3f %.3f %.3f\n", rate, p50, p99, errs, nodes * per, px * per, up * per, gen * per }' <<<"$out"
}

results=$RUN_DIR/results
: >"$results"
top=0
for n in $LEVELS; do [ "$n" -gt "$top" ] && top=$n; done
echo "bench-proxy: ${ROUNDS} rounds, levels ${LEVELS}, ${WARMUP}s + ${DURATION}s each; upstream $UPSTREAM, proxy $PROXY, ledger $ADDRS" >&2
for round in $(seq 1 "$ROUNDS"); do
  for n in $LEVELS; do
    k=$(( (round - 1) % ${#PATHS[@]} ))
    for i in $(seq 0 $(( ${#PATHS[@]} - 1 ))); do
      path=${PATHS[$(( (i + k) % ${#PATHS[@]} ))]}
      echo "bench-proxy: round $round, $n clients, $path ..." >&2
      prof=""
      if [ "$PROFILE" = 1 ] && [ "$round" = 1 ] && [ "$n" = "$top" ] && [ "$path" = proxy ]; then
        prof=$RUN_DIR/proxy-cpu.pprof
        (sleep "$WARMUP"; curl -fsS -o "$prof" "http://$PPROF/debug/pprof/profile?seconds=$(( DURATION > 2 ? DURATION - 1 : 1 ))") &
        ppid=$!
      fi
      line=$(run "$path" "$n")
      [ -n "$line" ] || { echo "bench-proxy: no result row for $path at $n clients" >&2; exit 1; }
      echo "$path $n $round $line" >>"$results"
      if [ -n "$prof" ]; then
        wait "$ppid" || echo "bench-proxy: the profile could not be taken" >&2
      fi
    done
  done
done

echo
echo "| clients | path | requests/s (each round) | p50 ms | p99 ms | errors | CPU ms per request: nodes / proxy / upstream / load generator |"
echo "| ---: | --- | --- | --- | --- | ---: | --- |"
for n in $LEVELS; do
  for path in "${PATHS[@]}"; do
    awk -v path="$path" -v n="$n" '
      $1 == path && $2 == n { k++; sep = (k > 1 ? " / " : ""); r = r sep $4; p = p sep $5; q = q sep $6; e += $7
                              cn += $8; cp += $9; cu += $10; cg += $11 }
      END {
        label = (path == "direct" ? "upstream direct" : path == "proxy" ? "through intent-proxy" : "ledger claim + complete (Go SDK)")
        cpu = sprintf("%.3f / %.3f / %.3f / %.3f", cn / k, cp / k, cu / k, cg / k)
        printf "| %s | %s | %s | %s | %s | %d | %s |\n", n, label, r, p, q, e, cpu }' "$results"
  done
done

echo
echo "| target | each round | verdict |"
echo "| --- | --- | --- |"
for n in $LEVELS; do
  awk -v n="$n" '
    $2 == n { v[$1, $3] = $5; rounds[$3] = 1 }
    END {
      s = ""; ok = 1; k = 0
      for (r = 1; r in rounds; r++) {
        added = v["proxy", r] - v["direct", r]; led = v["ledger", r]
        s = s (k++ ? " / " : "") sprintf("%.2f vs %.2f ms", added, led)
        if (added > led) ok = 0
      }
      printf "| %s clients: proxy added p50 (proxy - direct) <= ledger claim + complete p50 | %s | %s |\n", n, s, (ok ? "**met**" : "**not met**") }' "$results"
done
awk -v n="$top" '
  $2 == n { v[$1, $3] = $4; rounds[$3] = 1 }
  END {
    s = ""; ok = 1; k = 0
    for (r = 1; r in rounds; r++) {
      ratio = (v["ledger", r] > 0 ? v["proxy", r] / v["ledger", r] : 0)
      s = s (k++ ? " / " : "") sprintf("%.0f vs %.0f/s = %.2fx", v["proxy", r], v["ledger", r], ratio)
      if (ratio < 0.8) ok = 0
    }
    printf "| %s clients: proxy requests/s >= 0.8x ledger claim + complete ops/s | %s | %s |\n", n, s, (ok ? "**met**" : "**not met**") }' "$results"
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) CPUs; $(go version 2>/dev/null | cut -d' ' -f3 || true)"
if [ -n "${prof:-}" ] || [ -f "$RUN_DIR/proxy-cpu.pprof" ]; then
  echo
  echo "CPU profile of intent-proxy at $top clients ($RUN_DIR/proxy-cpu.pprof):"
  go tool pprof -top -nodecount 30 bin/intent-proxy "$RUN_DIR/proxy-cpu.pprof" 2>/dev/null | head -40 || true
fi
