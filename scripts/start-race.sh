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
# shellcheck source=scripts/daemon-lib.sh
. "$(dirname "$0")/daemon-lib.sh"
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

for round in $(seq 1 "$starts"); do
  db="$work/$round.sqlite"
  printf 'correct horse battery\n' | "$bin" user add ana@example.com --database "$db" >/dev/null
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
  clients=()
  for client in $(seq 1 20); do
    # Without a pause between tries (refused: not listening yet), 60 s in all; the reason of a failure in the file.
    (wait_until_answers "http://127.0.0.1:$port/healthz" 60 0 || true) 2>"$work/client-$round-$client" &
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
  stop_within "$pid" 60 || exit 1
  wait "$pid" || { echo "start-race: the daemon did not stop cleanly" >&2; exit 1; }
  pid=""
done
echo "start-race: $starts starts, 20 clients each: every try answered or refused"
