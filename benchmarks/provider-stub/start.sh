#!/usr/bin/env bash
# Starts the APNs (https://127.0.0.1:18453, HTTP/2) and Web Push
# (http://127.0.0.1:18454) stubs in DIR with a fresh CA, an APNs key
# (DIR/apns.p8) and a Web Push subscription key (DIR/p256dh, DIR/auth).
# MODE=early-answer: answer before reading the body, then RST_STREAM(NO_ERROR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:?usage: start.sh DIR}
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 2 -subj /CN=stub-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout key.pem -out req.pem -subj /CN=127.0.0.1 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > ext.cnf
openssl x509 -req -in req.pem -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out cert.pem -days 2 -extfile ext.cnf 2>/dev/null
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out apns.p8 2>/dev/null
python3 - "$dir" <<'PY'
import base64, os, sys
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
d = sys.argv[1]
public = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
    serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
b64 = lambda data: base64.urlsafe_b64encode(data).rstrip(b"=").decode()
open(f"{d}/p256dh", "w").write(b64(public))
open(f"{d}/auth", "w").write(b64(os.urandom(16)))
PY
if [ "${MODE:-}" = early-answer ]; then answer='return 200;'; else answer='proxy_pass http://back; proxy_http_version 1.1; proxy_set_header Connection "";'; fi
sed -e "s#STUBDIR#$dir#g" -e "s#@WEBPUSH_ANSWER@#return 201;#" -e "s#@APNS_ANSWER@#$answer#" "$here/nginx.conf" > nginx.conf
nginx -c "$dir/nginx.conf" &
echo $! > nginx.launcher.pid
for _ in $(seq 1 50); do
  curl -s --cacert ca.pem --http2 -o /dev/null -X POST https://127.0.0.1:18453/3/device/00 -d '{}' && break
  sleep 0.1
done
echo "$dir"
