#!/usr/bin/env bash
# Push throughput: N messages through the FCM sender to a local fake FCM over
# HTTP/2 + TLS on 127.0.0.1 (certificates made here with openssl), printing
# messages per second and token exchanges. A measurement, not a test.
# Usage: benchmarks/push-throughput.sh [MESSAGES] [CONCURRENCY] [debug|release]
set -euo pipefail
cd "$(dirname "$0")/.."
messages=${1:-5000}
concurrency=${2:-100}
mode=${3:-release}

swift build -c "$mode" --product countersign-push-bench >&2
bin=$(swift build -c "$mode" --show-bin-path)/countersign-push-bench

certs=$(mktemp -d)
trap 'rm -rf "$certs"' EXIT
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$certs/ca.key" -out "$certs/ca.pem" -days 1 \
  -subj "/CN=Countersign benchmark CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout "$certs/server.key" -out "$certs/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' > "$certs/ext.cnf"
openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" -CAcreateserial \
  -out "$certs/server.pem" -days 1 -extfile "$certs/ext.cnf" 2>/dev/null

echo "build: $mode"
"$bin" --messages "$messages" --concurrency "$concurrency" --cert "$certs/server.pem" --key "$certs/server.key" --ca "$certs/ca.pem"
