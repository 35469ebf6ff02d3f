#!/usr/bin/env bash
# Fuzzes a running daemon from docs/openapi.yaml with schemathesis (PyPI):
# bounded generated requests against 127.0.0.1 only, with a device key so the
# device routes are reached too. Fails on any 5xx, any answer outside the
# documented status codes, content types, headers and schemas, a route that
# ignores its authentication, or a daemon that does not stay up.
#
# Not checked: positive_data_acceptance (the document states types and lengths,
# not every rule the server applies, such as trimming and the email shape, so
# some schema-valid bodies are rightly refused with 400); negative_data_rejection
# (a body over 16 KiB is refused with 413 before it is read, which that check
# does not count as a refusal); and unsupported_method / allow_header_conformance
# (an undeclared method on a known path answers 404 "not_found", not 405).
#
# Usage: scripts/fuzz.sh BINARY [MAX_EXAMPLES]
set -euo pipefail
binary=${1:?usage: scripts/fuzz.sh BINARY [MAX_EXAMPLES]}
examples=${2:-150}
cd "$(dirname "$0")/.."
# schemathesis from the tests' virtual environment (requirements-test.txt, pinned).
venv_python=$(scripts/test-venv.sh)
schemathesis="$(dirname "$venv_python")/schemathesis"
# shellcheck source=scripts/daemon-lib.sh
. scripts/daemon-lib.sh

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
pid=""
cleanup() {
  local status=$?
  if [ "$status" -ne 0 ] && [ -n "$pid" ]; then
    echo "fuzz: failed (exit $status); the daemon:" >&2
    bash scripts/hang-report.sh "$pid" "$work/daemon.log" >&2 || true
  fi
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
# Stopped from outside (the CI step's time limit): the report above still runs.
trap 'exit 143' TERM INT
# Every request is bounded: a daemon that stops answering fails the run with a
# report instead of holding it until the CI run's own limit.
curl() { command curl --connect-timeout 10 --max-time 60 "$@"; }

echo "fuzz: user and daemon on $base"
printf 'correct horse battery\n' | "$binary" user add ana@example.com --database "$work/fuzz.sqlite" --bcrypt-cost 4 >/dev/null
# An integration, so that the /v1 routes are reached with a valid key (device routes read X-API-Key first).
integration_key=$("$binary" integration add Fuzz --database "$work/fuzz.sqlite" | sed -n 's/^API key: *//p')
# Generous limits, so that the generated requests reach the handlers rather than 429.
# A session of its own: a signal to this script's process group (a time limit) leaves
# the daemon as it is for the report; the cleanup stops it.
setsid "$binary" serve --listen "127.0.0.1:$port" --metrics-listen off --database "$work/fuzz.sqlite" --bcrypt-cost 4 --log-level warning \
  --rate-limit statusPollsPerIP=1000000/1 --rate-limit resetInitiatePerIP=1000000/60 \
  --rate-limit resetInitiatePerEmail=1000000/60 --rate-limit loginFailuresPerIP=1000000/60 \
  --rate-limit loginFailuresPerEmail=1000000/60 --rate-limit respondPerDevice=1000000/60 \
  --rate-limit refreshKeyFailuresPerDevice=1000000/60 --rate-limit approvalsPerUser=1000000/60 \
  --rate-limit approvalsPerIntegration=1000000/1 --rate-limit enrollFailuresPerIP=1000000/60 2>"$work/daemon.log" &
pid=$!
wait_until_answers "$base/healthz" 30 0.1 "$pid" || { echo "fuzz: the daemon did not start" >&2; exit 1; }
key=$(curl -fsS -H 'Content-Type: application/json' \
  -d '{"email":"ana@example.com","password":"correct horse battery","deviceName":"Fuzz","platform":"iOS","fcmToken":"unknown"}' \
  "$base/api/mobile/auth/login" | python3 -c 'import json,sys; print(json.load(sys.stdin)["apiKey"])')

echo "fuzz: schemathesis, at most $examples examples per operation"
started=$(date +%s)
status=0
"$schemathesis" run docs/openapi.yaml --url "$base" --header "X-API-Key: $key" --header "Authorization: Bearer $integration_key" \
  --checks all --exclude-checks positive_data_acceptance,negative_data_rejection,unsupported_method,allow_header_conformance \
  --max-examples "$examples" --request-timeout 40 --seed 20261122 --no-color >"$work/schemathesis.txt" 2>&1 || status=$?
if [ "$status" -eq 0 ]; then tail -25 "$work/schemathesis.txt"; else cat "$work/schemathesis.txt"; fi
echo "fuzz: schemathesis took $(( $(date +%s) - started )) s, exit $status"

kill -0 "$pid" 2>/dev/null || { echo "fuzz: the daemon died" >&2; tail -20 "$work/daemon.log" >&2; exit 1; }
health=$(curl -sS -o /dev/null -w '%{http_code}' "$base/healthz")
[ "$health" = 200 ] || { echo "fuzz: /healthz answered $health after the run" >&2; exit 1; }
echo "fuzz: the daemon stayed up (/healthz 200)"
[ "$status" -eq 0 ] || { echo "fuzz: schemathesis found failures" >&2; exit 1; }
stop_within "$pid" 60 || exit 1
wait "$pid" || { echo "fuzz: the daemon did not stop cleanly" >&2; exit 1; }
pid=""
echo "fuzz: passed"
