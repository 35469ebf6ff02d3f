#!/usr/bin/env bash
# Starts a throw-away PostgreSQL server for the tests and benchmarks: initdb
# into a new temporary directory (as an unprivileged user when run as root:
# the server refuses root), password authentication, listening on 127.0.0.1
# only, on a free port. It stops itself (and removes its directory) when the
# process WATCH_PID ends, however that ends. It also accepts TLS, with a
# server certificate for 127.0.0.1 and localhost signed by a certificate
# authority made here (DIRECTORY/ca.crt), for sslmode=verify-full.
#
# usage: pg-test-server.sh WATCH_PID
# prints one line: PORT PASSWORD DIRECTORY (the superuser is "countersign")
# exit 2: no PostgreSQL server installed (Debian: apt-get install postgresql)
set -euo pipefail
# Descriptors inherited from the caller (another test's pipe, say) must not
# stay open in the server and the watchdog, which outlive this script.
for fd in /proc/$$/fd/*; do
  n=${fd##*/}
  if [ "$n" -gt 2 ] 2>/dev/null; then eval "exec $n>&-" 2>/dev/null || true; fi
done
watch_pid=${1:?usage: pg-test-server.sh WATCH_PID}
here=$(CDPATH= cd -- "$(dirname -- "$(readlink -f -- "${BASH_SOURCE[0]}")")" && pwd)
bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "pg-test-server: no PostgreSQL server installed (Debian: apt-get install postgresql)" >&2
  exit 2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/countersign-pg.XXXXXX")
as_owner=()
if [ "$(id -u)" = 0 ]; then
  chown nobody:nogroup "$dir"
  as_owner=(setpriv --reuid=nobody --regid=nogroup --clear-groups --)
fi
password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
printf '%s' "$password" > "$dir/password"
[ "$(id -u)" = 0 ] && chown nobody:nogroup "$dir/password"
# A free port below the kernel's ephemeral range (see unused_port.py): a
# port picked from that range could be taken by any outgoing connection (the
# suite makes thousands) before the server binds it, and was, about once in a
# few hundred starts.
free_port() {
  python3 "$here/unused_port.py"
}
cd "$dir"
"${as_owner[@]}" "$bindir/initdb" -D "$dir/data" -U countersign --auth=scram-sha-256 --pwfile="$dir/password" -E UTF8 --no-sync \
  >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
rm -f "$dir/password"
# TLS: a one-day certificate authority and a server certificate it signs.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/ca.key" -out "$dir/ca.crt" \
  -days 1 -subj "/CN=countersign test CA" >/dev/null 2>&1
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$dir/server.key" -out "$dir/server.csr" \
  -subj "/CN=localhost" >/dev/null 2>&1
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$dir/server.ext"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 1 \
  -extfile "$dir/server.ext" -out "$dir/server.crt" >/dev/null 2>&1
rm -f "$dir/ca.key" "$dir/server.csr" "$dir/server.ext" "$dir/ca.srl"
chmod 600 "$dir/server.key"
chmod 644 "$dir/ca.crt"
if [ "$(id -u)" = 0 ]; then chown nobody:nogroup "$dir/server.key" "$dir/server.crt"; fi
# Another process may still take the port first (another test's server, say):
# then the server says so in its log, and starts again on another port.
for attempt in 1 2 3 4 5; do
  port=$(free_port)
  rm -f "$dir/server.log"
  if "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off -c ssl=on -c ssl_cert_file=$dir/server.crt -c ssl_key_file=$dir/server.key" start >/dev/null 2>"$dir/pg_ctl.err"; then
    break
  fi
  if [ "$attempt" -eq 5 ] || ! grep -q "Address already in use" "$dir/server.log"; then
    cat "$dir/pg_ctl.err" "$dir/server.log" >&2
    exit 1
  fi
done
# The watchdog: in its own session, so that it outlives a killed parent group.
setsid bash -c "while kill -0 $watch_pid 2>/dev/null; do sleep 0.5; done
  ${as_owner[*]} $bindir/pg_ctl -D $dir/data -m immediate stop >/dev/null 2>&1; rm -rf $dir" </dev/null >/dev/null 2>&1 &
echo "$port $password $dir"
