#!/usr/bin/env bash
# The docker-compose test (make compose-test, part of make test): brings up
# the 3-container cluster of docker-compose.yml under a unique project name,
# waits for a leader, claims through n1, reads through n3, kills the
# leader's container (SIGKILL), checks that a new leader serves the claim,
# restarts the killed container and waits until it has rejoined and caught
# up. When the intent-proxy and charge-api images exist (make image-proxy;
# make compose-test builds them), docker-compose.proxy.yml comes up too: a
# request with an Idempotency-Key through intent-proxy charges once, its
# retry is replayed, and after the leader's death the retry is still
# replayed. Containers, networks and volumes are removed on every exit (trap).
# Every wait polls a condition and is bounded. Skips (exit 0) with a message
# when no Docker engine answers; COMPOSE_TEST_REQUIRED=1 makes that a failure.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
  if [ "${COMPOSE_TEST_REQUIRED:-0}" = 1 ]; then echo "compose-test: FAIL: $*" >&2; exit 1; fi
  echo "compose-test: SKIPPED: $*"
  exit 0
}
command -v docker >/dev/null 2>&1 || skip "no docker command"
command -v docker-compose >/dev/null 2>&1 || skip "no docker-compose command"
docker info >/dev/null 2>&1 || skip "no Docker engine answers 'docker info'"
command -v curl >/dev/null 2>&1 || skip "no curl"
# The compose file's public development key (admin of "default").
API_KEY=${INTENTD_COMPOSE_API_KEY:-ik_lOGWgFB6_lgK-reUS8ivnQ15JF3NB2eMG-3A5thxClA}
acurl() { curl -H "Authorization: Bearer $API_KEY" "$@"; }

IMAGE=${INTENTD_IMAGE:-intentd:local}
docker image inspect "$IMAGE" >/dev/null 2>&1 || { echo "compose-test: image $IMAGE missing: run make image" >&2; exit 1; }
export INTENTD_IMAGE=$IMAGE
export INTENT_PROXY_IMAGE=${INTENT_PROXY_IMAGE:-intent-proxy:local} CHARGE_API_IMAGE=${CHARGE_API_IMAGE:-charge-api:local}
files=(-f docker-compose.yml)
WITH_PROXY=0
if docker image inspect "$INTENT_PROXY_IMAGE" "$CHARGE_API_IMAGE" >/dev/null 2>&1; then
  files+=(-f docker-compose.proxy.yml)
  WITH_PROXY=1
fi
# Let Docker choose the host ports, so the test never collides with make up
# or make run (the published ports are looked up below).
export INTENTD_PORT_N1= INTENTD_PORT_N2= INTENTD_PORT_N3= INTENT_PROXY_PORT= CHARGE_API_PORT=
PROJECT="intentd-ct-$$-$(date +%s)"
dc() { docker-compose -p "$PROJECT" "${files[@]}" "$@"; }
started=$SECONDS

teardown() {
  local rc=$?
  trap - EXIT INT TERM
  if [ $rc -ne 0 ]; then
    echo "compose-test: FAILED (exit $rc); last node logs:" >&2
    dc logs --no-color --tail 40 >&2 2>/dev/null || true
  fi
  dc down -v --remove-orphans --timeout 10 >/dev/null 2>&1 || true
  [ -z "${TMPD:-}" ] || rm -rf "$TMPD"
  # Belt and braces: nothing of this project may survive the test.
  left=$(docker ps -aq --filter "label=com.docker.compose.project=$PROJECT")
  [ -z "$left" ] || docker rm -f $left >/dev/null 2>&1 || true
  vols=$(docker volume ls -q --filter "label=com.docker.compose.project=$PROJECT")
  [ -z "$vols" ] || docker volume rm -f $vols >/dev/null 2>&1 || true
  echo "compose-test: torn down project $PROJECT ($((SECONDS - started)) s in all)"
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM

log() { echo "compose-test: [$((SECONDS - started))s] $*"; }
fail() { echo "compose-test: FAIL: $*" >&2; exit 1; }

# wait_for LIMIT_SECONDS WHAT CMD...: polls CMD until it succeeds.
wait_for() {
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "timed out after ${limit}s waiting for $what"
    sleep 0.25
  done
}

# Published ports, looked up once per container start (docker-compose is
# slow to start, so it is not asked on every poll). A service is named
# alone (a node: its port 8100) or as SERVICE:PORT.
declare -A PORT
lookup_ports() {
  local n p
  for n in "$@"; do
    p=$(dc port "${n%%:*}" "$( [[ $n == *:* ]] && echo "${n##*:}" || echo 8100)" 2>/dev/null | tail -n1)
    [ -n "$p" ] || return 1
    PORT[${n%%:*}]=$p
  done
}
url_of() { [ -n "${PORT[$1]:-}" ] && echo "http://${PORT[$1]}"; }
json_field() { sed -n "s/.*\"$1\":\"\\([^\"]*\\)\".*/\\1/p"; }

# leader_seen_by NODE: prints the leader's ID if NODE is ready and names one.
leader_seen_by() {
  local u; u=$(url_of "$1") || return 1
  curl -fsS --max-time 2 "$u/readyz" >/dev/null 2>&1 || return 1
  acurl -fsS --max-time 2 "$u/v1/cluster" | json_field leader_id
}
all_ready_same_leader() {
  local want="" got n
  for n in "$@"; do
    got=$(leader_seen_by "$n") || return 1
    [ -n "$got" ] || return 1
    [ -z "$want" ] || [ "$got" = "$want" ] || return 1
    want=$got
  done
  LEADER=$want
}

log "project $PROJECT, image $IMAGE$( [ $WITH_PROXY = 1 ] && echo ", with $INTENT_PROXY_IMAGE in front of $CHARGE_API_IMAGE" || echo "; no proxy images (make image-proxy): the proxy steps are skipped")"
dc up -d --no-build >/dev/null 2>&1 || { dc up -d --no-build; fail "docker-compose up"; }
wait_for 30 "published ports" lookup_ports n1 n2 n3
wait_for 60 "three ready nodes agreeing on a leader" all_ready_same_leader n1 n2 n3
log "leader is $LEADER"

# proxy_post OUT: one POST through intent-proxy with the test's
# Idempotency-Key; the answer's headers go to OUT.h, its body to OUT.b;
# prints the status.
IKEY="compose-charge-$$-$(date +%s)"
proxy_post() {
  curl -sS --max-time 15 -D "$1.h" -o "$1.b" -w '%{http_code}' -XPOST "$(url_of intent-proxy)/v1/charges" \
    -H 'Content-Type: application/json' -H "Idempotency-Key: \"$IKEY\"" -d '{"amount":1299,"currency":"usd"}'
}
replayed() { grep -qi '^Idempotency-Replayed: true' "$1.h"; }
charges_for_key() { curl -fsS --max-time 5 "$(url_of charge-api)/v1/charges" | grep -o "$IKEY" | wc -l; }
TMPD=$(mktemp -d)
if [ $WITH_PROXY = 1 ]; then
  wait_for 30 "published ports of intent-proxy and charge-api" lookup_ports intent-proxy:8480 charge-api:9000
  wait_for 60 "intent-proxy ready" curl -fsS --max-time 2 -o /dev/null "$(url_of intent-proxy)/-/readyz"
  code=$(proxy_post "$TMPD/first")
  [ "$code" = 201 ] && ! replayed "$TMPD/first" || fail "first request through intent-proxy: HTTP $code: $(cat "$TMPD/first.h" "$TMPD/first.b")"
  code=$(proxy_post "$TMPD/retry")
  [ "$code" = 201 ] && replayed "$TMPD/retry" || fail "retry through intent-proxy: HTTP $code, not replayed: $(cat "$TMPD/retry.h" "$TMPD/retry.b")"
  cmp -s "$TMPD/first.b" "$TMPD/retry.b" || fail "the replay differs from the first answer: $(cat "$TMPD/first.b") vs $(cat "$TMPD/retry.b")"
  [ "$(charges_for_key)" = 1 ] || fail "charge-api holds $(charges_for_key) charges for $IKEY, want 1"
  log "intent-proxy: the first request charged (201), its retry was replayed byte for byte; charge-api holds 1 charge"
fi

KEY="compose:charge-$$"
N1=$(url_of n1)
claim=$(acurl -sS --max-time 10 -w '\n%{http_code}' -XPOST "$N1/v1/intents" -H 'content-type: application/json' \
  -d "{\"key\":\"$KEY\",\"tool\":\"stripe.charge\",\"owner\":\"compose-test/1\",\"payload\":{\"amount\":1299}}")
code=$(echo "$claim" | tail -n1)
[ "$code" = 201 ] || fail "claim through n1: HTTP $code: $(echo "$claim" | head -n1)"
log "claimed $KEY through n1 (201 granted)"
anon=$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$N1/v1/intents/$KEY")
[ "$anon" = 401 ] || fail "a read without an API key answered HTTP $anon, want 401"
log "a read without an API key is refused (401)"

N3=$(url_of n3)
read3=$(acurl -fsS --max-time 10 "$N3/v1/intents/$KEY") || fail "linearizable read through n3"
echo "$read3" | grep -q '"state":"declared"' || fail "read through n3: $read3"
echo "$read3" | grep -q '"owner":"compose-test/1"' || fail "read through n3 names another owner: $read3"
log "read $KEY through n3 (declared, owner compose-test/1)"

victim=$LEADER
cid=$(dc ps -q "$victim")
[ -n "$cid" ] || fail "no container for $victim"
docker kill "$cid" >/dev/null
log "killed the leader's container ($victim, SIGKILL)"
survivors=()
for n in n1 n2 n3; do [ "$n" = "$victim" ] || survivors+=("$n"); done
new_leader_elsewhere() { all_ready_same_leader "${survivors[@]}" && [ "$LEADER" != "$victim" ]; }
wait_for 60 "a new leader among ${survivors[*]}" new_leader_elsewhere
log "new leader is $LEADER"

for n in "${survivors[@]}"; do
  u=$(url_of "$n")
  got=$(acurl -fsS --max-time 10 "$u/v1/intents/$KEY") || fail "read $KEY through $n after the kill"
  echo "$got" | grep -q '"owner":"compose-test/1"' || fail "claim lost after the leader died: $got"
done
other=$(acurl -sS --max-time 10 -o /dev/null -w '%{http_code}' -XPOST "$(url_of "${survivors[0]}")/v1/intents" \
  -H 'content-type: application/json' \
  -d "{\"key\":\"$KEY\",\"tool\":\"stripe.charge\",\"owner\":\"compose-test/2\",\"payload\":{\"amount\":1299}}")
[ "$other" = 409 ] || fail "a second owner got HTTP $other, want 409 in_flight"
log "the claim survived the leader's death; a second owner gets 409 in_flight"
if [ $WITH_PROXY = 1 ]; then
  replay_after_failover() { [ "$(proxy_post "$TMPD/again")" = 201 ] && replayed "$TMPD/again"; }
  wait_for 60 "a replay through intent-proxy from the new leader" replay_after_failover
  cmp -s "$TMPD/first.b" "$TMPD/again.b" || fail "the replay after the failover differs: $(cat "$TMPD/again.b")"
  [ "$(charges_for_key)" = 1 ] || fail "charge-api holds $(charges_for_key) charges for $IKEY after the failover, want 1"
  log "intent-proxy: after the leader's death the retry is still replayed; still 1 charge"
fi

docker start "$cid" >/dev/null
log "restarted $victim"
PORT[$victim]=""
wait_for 30 "the published port of $victim" lookup_ports "$victim"
rejoined() {
  all_ready_same_leader n1 n2 n3 || return 1
  local u; u=$(url_of "$victim") || return 1
  acurl -fsS --max-time 2 "$u/v1/intents/$KEY?consistency=stale" | grep -q '"owner":"compose-test/1"'
}
wait_for 60 "$victim to rejoin and catch up" rejoined
st=$(acurl -fsS --max-time 5 "$(url_of "$victim")/v1/cluster")
echo "$st" | grep -q '"state":"follower"\|"state":"leader"' || fail "$victim after restart: $st"
voters=$(echo "$st" | grep -o '"suffrage":"voter"' | wc -l)
[ "$voters" = 3 ] || fail "want 3 voters after the restart, got $voters: $st"
log "$victim rejoined (3 voters, leader $LEADER) and serves $KEY from its own replica"
health=$(docker inspect -f '{{.State.Health.Status}}' "$(dc ps -q n1)" 2>/dev/null || echo none)
log "n1 container health: $health"
log "PASS"
