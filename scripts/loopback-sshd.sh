#!/bin/bash
# An OpenSSH sshd on 127.0.0.1 that logs in through PAM alone (keyboard-interactive,
# UsePAM), for the SSH tests and scripts/demo-ssh.sh. Run as root.
#
#   scripts/loopback-sshd.sh DIR NAME PORT [CONFIG-LINE ...]
#
# Writes DIR/host_key and DIR/sshd_config, links DIR/NAME to /usr/sbin/sshd
# (sshd names its PAM service after the name it was started by, so
# /etc/pam.d/NAME is its stack) and runs it in the foreground in place of
# this script, logging to standard error. Extra lines are added to the config.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 DIR NAME PORT [CONFIG-LINE ...]" >&2; exit 2; }
dir=$1 name=$2 port=$3
shift 3
[[ $name =~ ^[a-z0-9-]+$ ]] || { echo "loopback-sshd: NAME must be lower-case letters, digits and dashes" >&2; exit 2; }
[[ $port =~ ^[0-9]+$ ]] || { echo "loopback-sshd: PORT must be a number" >&2; exit 2; }
[ -e "$dir/host_key" ] || ssh-keygen -q -t ed25519 -N "" -f "$dir/host_key"
mkdir -p /run/sshd
{
  cat <<SSHD
Port $port
ListenAddress 127.0.0.1
HostKey $dir/host_key
PidFile none
UsePAM yes
KbdInteractiveAuthentication yes
PasswordAuthentication no
PubkeyAuthentication no
AuthenticationMethods keyboard-interactive
PermitRootLogin yes
LogLevel VERBOSE
SSHD
  for line in "$@"; do printf '%s\n' "$line"; done
} >"$dir/sshd_config"
ln -sfn /usr/sbin/sshd "$dir/$name"
exec "$dir/$name" -D -e -f "$dir/sshd_config"
