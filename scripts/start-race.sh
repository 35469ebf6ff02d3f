#!/usr/bin/env bash
# Clients that poll a starting daemon are all answered: the daemon is started
# STARTS times on a new database while 20 clients poll /healthz from the first
# moment, each try limited to 10 s. A try that times out is a connection the
# daemon took and never served (its start-up check once listened for a moment
# and held such connections). Talks only to 127.0.0.1.
#
#   scripts/start-race.sh BINARY [STARTS]
set -euo pipefail
bin=${1:?usage: scripts/start-race.sh BINARY [STARTS]}
starts=${2:-5}
export COUNTERSIGN_BCRYPT_COST=6
work=$(mktemp -d)
pid=""
cleanup() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    echo "start-race: failed (exit $status); the daemon:" >&2
    if [ -n "$pid" ]; then bash "$(dirname "$0")/hang-report.sh" "$pid" "$work/daemon.log" >&2 || true; else tail -20 "$work/daemon.log" >&2 || true; fi
  fi
  if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

unanswered=0
for round in $(seq 1 "$starts"); do
  db="$work/$round.sqlite"
  printf 'correct horse battery\n' | "$bin" user add ana@example.com --database "$db" >/dev/null
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
  clients=()
  for client in $(seq 1 20); do
    (
      # Until answered (refused: not listening yet), 60 s in all.
      deadline=$((SECONDS + 60))
      while [ "$SECONDS" -lt "$deadline" ]; do
        status=0
        curl -s -o /dev/null --max-time 10 "http://127.0.0.1:$port/healthz" || status=$?
        [ "$status" -eq 0 ] && exit 0
        [ "$status" -eq 28 ] && { echo unanswered; exit 0; }
      done
      echo "no answer in 60 s"
    ) >"$work/client-$round-$client" &
    clients+=($!)
  done
  setsid "$bin" serve --database "$db" --listen "127.0.0.1:$port" --metrics-listen off 2>>"$work/daemon.log" &
  pid=$!
  wait "${clients[@]}"
  kill -0 "$pid" 2>/dev/null || { echo "start-race: the daemon exited during start $round" >&2; pid=""; exit 1; }
  if grep -q . "$work"/client-"$round"-*; then
    echo "start-race: start $round: $(cat "$work"/client-"$round"-* | sort | uniq -c | tr -s ' ' | paste -sd, -)" >&2
    exit 1
  fi
  kill -TERM "$pid"
  for _ in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && { echo "start-race: the daemon did not stop within 60 s of SIGTERM" >&2; exit 1; }
  wait "$pid" || { echo "start-race: the daemon did not stop cleanly" >&2; exit 1; }
  pid=""
done
echo "start-race: $starts starts, 20 clients each: every try answered or refused"
