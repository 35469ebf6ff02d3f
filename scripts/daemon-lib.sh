# Sourced by the scripts that run a daemon (.ci/run, scripts/smoke.sh,
# scripts/fuzz.sh, scripts/start-race.sh): waiting for it to answer and for it
# to stop, each bounded, so that a daemon that stops answering fails the
# script with a reason instead of holding it.

# Waits until URL answers (2xx), trying every INTERVAL seconds (default 0.1)
# for at most SECONDS; with PID, fails at once when that process has ended.
# Returns 0 when answered; 1 when not within SECONDS; 2 when a try was taken
# and got no answer in 10 s (a daemon that holds a connection it never
# serves: no retry hides it); 3 when PID ended first.
wait_until_answers() {
  local url=$1 seconds=$2 interval=${3:-0.1} pid=${4:-} status
  local deadline=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$deadline" ]; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "the daemon exited before it answered" >&2
      return 3
    fi
    status=0
    curl --max-time 10 -fsS "$url" >/dev/null 2>&1 || status=$?
    [ "$status" -eq 0 ] && return 0
    if [ "$status" -eq 28 ]; then
      echo "a connection to the starting daemon got no answer in 10 s" >&2
      return 2
    fi
    sleep "$interval"
  done
  echo "no answer from $url within $seconds s" >&2
  return 1
}

# Sends SIGTERM to PID and waits at most SECONDS for it to end; 1 if it has
# not. The caller's `wait PID` then gives its exit status.
stop_within() {
  local pid=$1 seconds=$2
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$deadline" ]; do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  echo "the daemon did not stop within $seconds s of SIGTERM" >&2
  return 1
}
