#!/usr/bin/env bash
# make bench-sdk: the Go, Python (threaded Client and AsyncClient) and
# TypeScript SDKs side by side against one fresh local 3-node cluster:
# claim + complete on fresh keys at each level of callers, ROUNDS rounds
# with the SDKs' order rotated each round, and the client's CPU per
# claim + complete (user + system time of the client process over its
# operations; it shares the cores with the cluster, so that CPU is what the
# SDK costs the servers). Bounded: ROUNDS x LEVELS x 4 runs of DURATION s.
#
#   ROUNDS=2 DURATION=10 LEVELS="1 16" make bench-sdk
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" != "--inner" ]; then
  export INTENTD_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/intentd-bench-sdk.XXXXXX")
  exec ./scripts/run-local.sh --then "$0" --inner
fi

ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10}
LEVELS=${LEVELS:-"1 16"}
ADDRS=http://127.0.0.1:8101,http://127.0.0.1:8102,http://127.0.0.1:8103
SDKS=(go python-sync python-async typescript)

# run SDK CALLERS: runs one measurement and prints "claims/s p50ms cpu_ms_per_op".
run() {
  local sdk=$1 n=$2 out
  case $sdk in
    go) cmd=(bin/intent-bench --via sdk --addr "$ADDRS" --clients "$n" --duration "${DURATION}s" --warmup 0s --payload-bytes 32) ;;
    python-sync) cmd=(python3 sdk/python/bench.py --addrs "$ADDRS" --callers "$n" --duration "$DURATION") ;;
    python-async) cmd=(python3 sdk/python/bench.py --async --addrs "$ADDRS" --callers "$n" --duration "$DURATION") ;;
    typescript) cmd=(node sdk/typescript/bench.mjs --addrs "$ADDRS" --concurrency "$n" --duration "$DURATION") ;;
  esac
  local tf err
  tf=$(mktemp) err=$(mktemp)
  out=$(/usr/bin/time -f 'CPU %U %S' -o "$tf" "${cmd[@]}" 2>"$err") || {
    echo "bench-sdk: $sdk at $n callers failed:" >&2; tail -n 5 "$err" >&2; rm -f "$tf" "$err"; return 1; }
  out+=$'\n'$(cat "$tf")
  rm -f "$tf" "$err"
  awk -v sdk="$sdk" -v dur="$DURATION" '
    /^\| [0-9]+ \|/ { split($0, f, "|"); rate = f[3] + 0; p50 = f[4] + 0 }
    /claims\/s=/ { for (i = 1; i <= NF; i++) { if ($i ~ /^claims\/s=/) { sub("claims/s=", "", $i); rate = $i + 0 }
                                             if ($i ~ /^p50=/) { sub("p50=", "", $i); sub("ms", "", $i); p50 = $i + 0 } } }
    /^CPU / { cpu = $2 + $3 }
    END { ops = rate * dur; printf "%.0f %.2f %.3f\n", rate, p50, (ops > 0 ? cpu * 1000 / ops : 0) }' <<<"$out"
}

results=$(mktemp)
echo "bench-sdk: ${ROUNDS} rounds, levels ${LEVELS}, ${DURATION}s each, against $ADDRS" >&2
for round in $(seq 1 "$ROUNDS"); do
  for n in $LEVELS; do
    k=$(( (round - 1) % ${#SDKS[@]} ))
    for i in $(seq 0 $(( ${#SDKS[@]} - 1 ))); do
      sdk=${SDKS[$(( (i + k) % ${#SDKS[@]} ))]}
      echo "bench-sdk: round $round, $n callers, $sdk ..." >&2
      line=$(run "$sdk" "$n")
      echo "$sdk $n $round $line" >>"$results"
    done
  done
done

echo
echo "| SDK | callers | claims/s (each round) | p50 ms | client CPU per claim + complete | share of Go's claims/s |"
echo "| --- | ---: | --- | --- | --- | --- |"
for n in $LEVELS; do
  for sdk in "${SDKS[@]}"; do
    awk -v sdk="$sdk" -v n="$n" '
      $1 == "go" && $2 == n { go[$3] = $4 }
      $1 == sdk && $2 == n { rate[$3] = $4; p50[$3] = $5; cpu[$3] = $6; rounds[++k] = $3 }
      END {
        r = ""; p = ""; c = ""; s = ""
        for (i = 1; i <= k; i++) { j = rounds[i]; sep = (i > 1 ? " / " : "")
          r = r sep rate[j]; p = p sep p50[j]; c = c sep sprintf("%.2f ms", cpu[j])
          s = s sep (go[j] > 0 ? sprintf("%.0f%%", 100 * rate[j] / go[j]) : "-") }
        printf "| %s | %s | %s | %s | %s | %s |\n", sdk, n, r, p, c, s }' "$results"
  done
done
rm -f "$results"
