#!/usr/bin/env bash
# An SSH login on loopback approved from the phone, end to end: a daemon on a
# throw-away database, its user root@example.com with a phone (`countersign
# device simulate`), an sshd of its own on 127.0.0.1 whose PAM stack is
# pam_countersign.so (built by scripts/build-pam.sh), and OpenSSH's ssh
# logging in. The terminal shows the number; the phone approves with it.
#
#   sudo scripts/demo-ssh.sh            # one login, every step shown
#   sudo scripts/demo-ssh.sh --measure N
#                                       # N logins; prints each one's time from
#                                       # the client's start to the shell's output
#                                       # without the phone's part, the same
#                                       # through pam_permit alone (the median
#                                       # difference is what the module adds), and
#                                       # sshd's memory with the module against
#                                       # pam_exec
#
# Needs root (it starts sshd), openssh-server, openssh-client, and the PAM
# module's build dependencies (libpam0g-dev libjson-c-dev libssl-dev
# libcurl4-openssl-dev). Uses .build/debug/countersign (built if missing), or
# $COUNTERSIGN.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v swift >/dev/null || export PATH="/opt/swift/usr/bin:$PATH"
[ "$(id -u)" = 0 ] || { echo "demo-ssh: run as root: it starts an sshd of its own" >&2; exit 1; }
measure=0
[ "${1:-}" = "--measure" ] && measure=${2:?--measure needs a count}

binary=${COUNTERSIGN:-.build/debug/countersign}
[ -x "$binary" ] || swift build --product countersign
binary=$(cd "$(dirname "$binary")" && pwd)/$(basename "$binary")
. scripts/daemon-lib.sh

work=$(mktemp -d)
name="countersign-demo-$$"
cleanup() {
  [ -n "${sshd_pid:-}" ] && kill "$sshd_pid" 2>/dev/null || true
  [ -n "${daemon_pid:-}" ] && kill "$daemon_pid" 2>/dev/null || true
  rm -f "/etc/pam.d/$name"
  rm -rf "$work"
}
trap cleanup EXIT
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

say "1. The PAM module, built from pam/pam_countersign.c"
module=$(bash scripts/build-pam.sh "$work/pam")
ls -l "$module"

say "2. A daemon, a user and the host's integration (it may prompt every user)"
db="$work/countersign.sqlite"
printf 'demo password\n' | "$binary" user add root@example.com --database "$db" --bcrypt-cost 4
key=$("$binary" integration add ssh-demo --prompt-all-users --database "$db" | sed -n 's/^API key: *//p')
port=$(python3 scripts/unused_port.py)
# Measuring makes more logins a minute than a user's approvals allow (10): the limits are raised for it.
limits=()
[ "$measure" = 0 ] || limits=(--rate-limit approvalsPerUser=1000/60 --rate-limit approvalsPerUserAllIntegrations=1000/60)
"$binary" serve --database "$db" --listen "127.0.0.1:$port" --metrics-listen 127.0.0.1:0 "${limits[@]}" >"$work/daemon.log" 2>&1 &
daemon_pid=$!
wait_until_answers "http://127.0.0.1:$port/healthz" 60 0.1 "$daemon_pid" || { cat "$work/daemon.log"; exit 1; }
echo "countersign serve on 127.0.0.1:$port"

say "3. The user's phone signs in (countersign device simulate)"
printf 'demo password\n' | "$binary" device simulate --url "http://127.0.0.1:$port" --email root@example.com \
  --key-file "$work/phone.json" --seconds 1

say "4. /etc/countersign/pam.conf (here in $work), and an sshd on loopback with UsePAM"
install -m 0600 /dev/null "$work/pam.key"
printf '%s\n' "$key" >"$work/pam.key"
install -m 0600 /dev/null "$work/pam.conf"
cat >"$work/pam.conf" <<CONF
url = http://127.0.0.1:$port
integration_key_file = $work/pam.key
user_map = %u@example.com
CONF
cat "$work/pam.conf"
write_stack() {
  printf '%s\naccount required pam_permit.so\nsession required pam_permit.so\n' "$1" >"/etc/pam.d/$name"
}
write_stack "auth required $module conf=$work/pam.conf"
sshd_port=$(python3 scripts/unused_port.py)
scripts/loopback-sshd.sh "$work" "$name" "$sshd_port" 2>"$work/sshd.log" &
sshd_pid=$!
for _ in $(seq 100); do grep -q "Server listening" "$work/sshd.log" && break; sleep 0.1; done
echo "sshd on 127.0.0.1:$sshd_port, PAM service $name: auth required pam_countersign.so"

# What the terminal shows goes to the screen and to a file the phone's side reads;
# the answer typed is Enter (answer on the phone).
cat >"$work/askpass" <<ASKPASS
#!/bin/sh
printf '%s\n' "\$1" >>"$work/prompts"
printf '%s' "\$1" >/dev/stderr
echo
ASKPASS
chmod 0700 "$work/askpass"

login() {
  SSH_ASKPASS="$work/askpass" SSH_ASKPASS_REQUIRE=force ssh -F /dev/null -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o PreferredAuthentications=keyboard-interactive \
    -o NumberOfPasswordPrompts=1 -p "$sshd_port" root@127.0.0.1 'echo "logged in as $(id -un) on $(hostname)"' </dev/null
}
phone() {
  local number=""
  for _ in $(seq 300); do
    number=$(grep -o 'Approve on your phone: [0-9]*' "$work/prompts" 2>/dev/null | grep -o '[0-9]*$' || true)
    [ -n "$number" ] && break
    sleep 0.02
  done
  "$binary" device simulate --url "http://127.0.0.1:$port" --key-file "$work/phone.json" \
    --approve-all --number-code "$number" --count 1 --seconds 30
}

if [ "$measure" = 0 ]; then
  say "5. ssh root@127.0.0.1: the terminal shows the number, the phone approves with it"
  : >"$work/prompts"
  phone &
  phone_pid=$!
  login
  wait "$phone_pid"
  say "6. The audit trail"
  "$binary" audit --database "$db" | tail -5
  exit 0
fi

# --measure: each login's time from the client's start to the shell's output,
# less the phone's part (from the approval's creation to its answer, as the
# audit trail timed them).
say "5. $measure logins, timed"
millis() { date +%s%3N; }
stamp() { python3 -c 'import sys, datetime; print(int(datetime.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp() * 1000))' "$1"; }
for i in $(seq "$measure"); do
  : >"$work/prompts"
  phone >/dev/null &
  phone_pid=$!
  start=$(millis)
  login >/dev/null 2>&1
  end=$(millis)
  wait "$phone_pid"
  created=$("$binary" audit --database "$db" --kind request_created --json | tail -1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["time"])')
  approved=$("$binary" audit --database "$db" --kind approved --json | tail -1 | python3 -c 'import json, sys; print(json.load(sys.stdin)["time"])')
  phone_ms=$(( $(stamp "$approved") - $(stamp "$created") ))
  echo "login $i: $((end - start)) ms in all, phone $phone_ms ms, without the phone $((end - start - phone_ms)) ms"
  echo "$((end - start - phone_ms))" >>"$work/with-module"
done

# The same logins through a stack that only permits (pam_permit): what the module adds is the difference.
write_stack "auth required pam_permit.so"
for i in $(seq "$measure"); do
  start=$(millis)
  login >/dev/null 2>&1
  end=$(millis)
  echo "login $i through pam_permit alone: $((end - start)) ms"
  echo "$((end - start))" >>"$work/permit-only"
done
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
with_module_ms=$(median "$work/with-module")
permit_ms=$(median "$work/permit-only")
echo "median login: $with_module_ms ms with pam_countersign (the phone's part taken out), $permit_ms ms with pam_permit alone: the module adds $((with_module_ms - permit_ms)) ms"
write_stack "auth required $module conf=$work/pam.conf"

# Memory: sshd's processes for one login while it waits in PAM, with the
# module against a stack that waits in pam_exec (sleep) instead.
pss_of_login() {
  local total=0 pid
  for pid in $(pgrep -P "$sshd_pid"; for child in $(pgrep -P "$sshd_pid"); do pgrep -P "$child"; done); do
    total=$((total + $(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null || echo 0)))
  done
  echo "$total"
}
say "6. sshd's memory for one login waiting in PAM"
# A login left waiting in PAM for a few seconds: the PSS of sshd's processes for it then.
waiting_login_pss() {
  : >"$work/prompts"
  SSH_ASKPASS="$work/askpass" SSH_ASKPASS_REQUIRE=force timeout 40 ssh -F /dev/null -o StrictHostKeyChecking=no \
    -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o NumberOfPasswordPrompts=1 -p "$sshd_port" root@127.0.0.1 true \
    </dev/null >/dev/null 2>&1 &
  sleep 3
  pss_of_login
}
with_module=$(waiting_login_pss)
phone >/dev/null || echo "demo-ssh: the phone did not answer the measured login; its figure may include it" >&2
# That login's processes gone before the next is measured.
for _ in $(seq 100); do pgrep -P "$sshd_pid" >/dev/null || break; sleep 0.2; done
write_stack "auth required pam_exec.so /bin/sleep 6"
with_exec=$(waiting_login_pss)
echo "sshd's login processes (PSS): $with_module KiB waiting in pam_countersign, $with_exec KiB waiting in pam_exec: the module adds $((with_module - with_exec)) KiB"
