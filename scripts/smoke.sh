#!/usr/bin/env bash
# End-to-end check with the real binary, as a new user would run it:
# user add -> serve -> login -> initiate -> pending -> respond -> kill -9 ->
# restart -> status still approved -> complete -> new password logs in.
# Talks only to 127.0.0.1. Usage: scripts/smoke.sh [path/to/countersign]
set -euo pipefail

bin=${1:-.build/debug/countersign}
[ -x "$bin" ] || { echo "smoke: no binary at $bin (run swift build first)" >&2; exit 2; }
for tool in curl python3; do command -v "$tool" >/dev/null || { echo "smoke: $tool is required" >&2; exit 2; }; done

# shellcheck source=scripts/daemon-lib.sh
. "$(dirname "$0")/daemon-lib.sh"

work=$(mktemp -d)
pid=""
# On a failure (a refused answer, or one that did not come in time), what the
# daemon was doing before it is stopped.
cleanup() {
  local status=$?
  if [ "$status" -ne 0 ] && [ -n "$pid" ]; then
    echo "smoke: failed (exit $status); the daemon:" >&2
    bash "$(dirname "$0")/hang-report.sh" "$pid" "$work/daemon.log" >&2 || true
  fi
  [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
# Stopped from outside (the CI step's time limit): the report above still runs.
trap 'exit 143' TERM INT

db="$work/countersign.sqlite"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
base="http://127.0.0.1:$port"
export COUNTERSIGN_BCRYPT_COST=6

# Every request is bounded: a daemon that stops answering fails the check
# with a report instead of holding it until the CI run's own limit.
curl() { command curl --connect-timeout 10 --max-time 60 "$@"; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print(d$1)"; }
step() { printf '\n==> %s\n' "$*"; }

start() {
  # A session of its own: a signal to this script's process group (a time limit) leaves
  # the daemon as it is for the report; the cleanup stops it.
  setsid "$bin" serve --database "$db" --listen "127.0.0.1:$port" --metrics-listen off 2>>"$work/daemon.log" &
  pid=$!
  wait_until_answers "$base/healthz" 30 0.1 "$pid" || { echo "smoke: the daemon did not start" >&2; exit 1; }
}

step "countersign user add"
printf 'correct horse battery\n' | "$bin" user add ana@example.com --database "$db"

step "serve"
start
curl -fsS "$base/healthz"; echo

step "login"
login=$(curl -fsS -H 'Content-Type: application/json' \
  -d '{"email":"ana@example.com","password":"correct horse battery","deviceName":"Phone","platform":"iOS","fcmToken":"unknown"}' \
  "$base/api/mobile/auth/login")
key=$(echo "$login" | json '["apiKey"]')
echo "device $(echo "$login" | json '["device"]["id"]')"

step "initiate"
init=$(curl -fsS -H 'Content-Type: application/json' -d '{"email":"ana@example.com","newPassword":"staple orbit lantern"}' \
  "$base/api/mobile/auth/reset/phone/initiate")
id=$(echo "$init" | json '["requestId"]')
code=$(echo "$init" | json '["numberCode"]')
echo "$init" | json '["expiresAt"]'

step "pending (device)"
curl -fsS -H "X-API-Key: $key" "$base/api/mobile/approvals/pending" | json '["approvals"][0]["requestId"]' | grep -qxF -- "$id"
echo "listed"

step "respond approve, then kill -9 at once"
respond=$(curl -sS -w '\n%{http_code}' -H "X-API-Key: $key" -H 'Content-Type: application/json' \
  -d "{\"decision\":\"approve\",\"numberCode\":\"$code\"}" "$base/api/mobile/approvals/$id/respond")
kill -9 "$pid"; wait "$pid" 2>/dev/null || true; pid=""
echo "$respond"
[ "$(echo "$respond" | tail -1)" = 200 ] || { echo "smoke: respond did not answer 200" >&2; exit 1; }

step "restart: status"
start
status=$(curl -fsS "$base/api/mobile/auth/reset/phone/status/$id" | json '["status"]')
echo "$status"
[ "$status" = approved ] || { echo "smoke: expected approved after restart, got $status" >&2; exit 1; }

step "complete"
curl -fsS -X POST "$base/api/mobile/auth/reset/phone/complete/$id"; echo

step "old password refused, new password accepted"
old=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"email":"ana@example.com","password":"correct horse battery","deviceName":"Laptop","platform":"web"}' "$base/api/mobile/auth/login")
new=$(curl -s -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' \
  -d '{"email":"ana@example.com","password":"staple orbit lantern","deviceName":"Laptop","platform":"web"}' "$base/api/mobile/auth/login")
echo "old: $old, new: $new"
[ "$old" = 401 ] && [ "$new" = 200 ] || { echo "smoke: password change not effective" >&2; exit 1; }

step "no secret in the database file or the log"
for secret in "correct horse battery" "staple orbit lantern" "$key" ; do
  if grep -aqF -- "$secret" "$db" "$db-wal" "$work/daemon.log" 2>/dev/null; then
    echo "smoke: a secret was found in the database or the log" >&2; exit 1
  fi
done
echo "none found"

step "countersign audit shows the flow"
stop_within "$pid" 60 || exit 1
wait "$pid"; rc=$?; pid=""
"$bin" audit --database "$db" --email ana@example.com | tee "$work/audit.txt"
for kind in login_ok request_created approved completed login_failed; do
  grep -q " $kind " "$work/audit.txt" || { echo "smoke: audit lacks $kind" >&2; exit 1; }
done
"$bin" user unlock ana@example.com --database "$db"
echo
echo "smoke: passed (daemon exited $rc after SIGTERM)"
