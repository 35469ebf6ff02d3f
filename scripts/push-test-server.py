#!/usr/bin/env python3
"""Push services on 127.0.0.1 for Countersign's tests, checked with other people's code.

--mode webpush: a Web Push (RFC 8030) endpoint over plain HTTP, with one
subscription key pair and auth secret. Every POST is decrypted with PyPI's
http_ece (RFC 8291 aes128gcm) and its VAPID header (RFC 8292) verified with
py_vapid; the claims are checked (aud = this origin, exp in the next 24 h,
sub mailto: or https:). Scripted answers, by the endpoint's last path
segment: gone… 410, big… 413, busy… 429 on the first POST of each message type then 201,
down… 500 always, redirect… 307 to /push/redirected-…; anything else 201.

--mode apns: an APNs look-alike over HTTP/2 with TLS (hypercorn + h2, a
self-signed certificate made at start). It verifies the provider token (an
ES256 JWT) with `cryptography` against --key (the .p8 the daemon signs with):
signature, alg, kid (--key-id) and iss (--team-id); a bad token is 403
InvalidProviderToken, and one without apns-topic 400 MissingTopic. Scripted answers, by the device token's first
characters: all zeros 400 BadDeviceToken (no such device), dead… 410 Unregistered, bad0… 400 BadDeviceToken,
ee… 403 ExpiredProviderToken on the first POST of each message type to that
device then 200, 50… 500 and 42… 429 (Retry-After: 1) on the first POST of each message type then 200;
else 200.

Each request is written to DIR/NNNN.json (path, headers, the checks'
results, the decrypted or JSON body, the answer's status). When listening it
writes DIR/ready.json: webpush {"port", "p256dh", "auth"}, apns {"port", "ca"}.
Stops on SIGTERM or SIGINT, or when its parent process goes away.
"""
import argparse
import asyncio
import base64
import json
import os
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from unused_port import unused_port

try:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, utils
    from test_certificate import make_certificate
except ImportError as error:
    sys.stderr.write(f"push-test-server: {error}; install with: python3 -m pip install cryptography\n")
    sys.exit(3)


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Recorder:
    def __init__(self, folder):
        self.folder = folder
        self.count = 0
        self.lock = threading.Lock()
        self.seen = {}

    def write(self, record):
        with self.lock:
            self.count += 1
            path = os.path.join(self.folder, f"{self.count:04d}.json")
            with open(path + ".part", "w") as handle:
                json.dump(record, handle)
            os.rename(path + ".part", path)

    def first_time(self, key):
        with self.lock:
            if key in self.seen:
                return False
            self.seen[key] = True
            return True


def ready(folder, info):
    path = os.path.join(folder, "ready.json")
    with open(path + ".part", "w") as handle:
        json.dump(info, handle)
    os.rename(path + ".part", path)


def watch_parent():
    parent = os.getppid()

    def loop():
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=loop, daemon=True).start()


# MARK: - Web Push


def run_webpush(folder):
    try:
        import http_ece
        import py_vapid
    except ImportError as error:
        sys.stderr.write(f"push-test-server: {error}; install with: python3 -m pip install http_ece py_vapid\n")
        sys.exit(3)
    private_key = ec.generate_private_key(ec.SECP256R1())
    public = private_key.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    auth = os.urandom(16)
    recorder = Recorder(folder)
    server_port = unused_port()
    origin = f"http://127.0.0.1:{server_port}"

    def check_vapid(header):
        result = {"valid": False}
        if not header or not header.lower().startswith("vapid "):
            result["error"] = "no vapid authorization"
            return result
        params = {}
        for part in header[6:].split(","):
            name, _, value = part.strip().partition("=")
            params[name] = value
        token, key = params.get("t"), params.get("k")
        if not token or not key:
            result["error"] = "t or k missing"
            return result
        try:
            signature_ok = py_vapid.Vapid01.verify(key, "vapid " + token)
        except Exception as error:  # a malformed token
            result["error"] = f"py_vapid: {error}"
            return result
        header_part, claims_part, _ = token.split(".")
        claims = json.loads(b64url_decode(claims_part))
        jose = json.loads(b64url_decode(header_part))
        now = time.time()
        result.update(
            signature=bool(signature_ok),
            alg=jose.get("alg"),
            aud=claims.get("aud"),
            sub=claims.get("sub"),
            exp=claims.get("exp"),
            k=key,
            audOK=claims.get("aud") == origin,
            expOK=isinstance(claims.get("exp"), int) and now < claims["exp"] <= now + 24 * 3600,
            subOK=isinstance(claims.get("sub"), str) and (claims["sub"].startswith("mailto:") or claims["sub"].startswith("https://")),
        )
        result["valid"] = all([result["signature"], result["alg"] == "ES256", result["audOK"], result["expOK"], result["subOK"]])
        return result

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            name = self.path.rstrip("/").rsplit("/", 1)[-1]
            record = {
                "at": time.time(),
                "path": self.path,
                "headers": {key.lower(): value for key, value in self.headers.items()},
                "vapid": check_vapid(self.headers.get("Authorization")),
                "size": len(body),
            }
            try:
                plaintext = http_ece.decrypt(body, private_key=private_key, auth_secret=auth, version="aes128gcm")
                record["payload"] = json.loads(plaintext)
            except Exception as error:
                record["decryptError"] = str(error)
            if name.startswith("gone"):
                status = 410
            elif name.startswith("big"):
                status = 413
            elif name.startswith("busy"):
                # Once per path and message type: each kind of message meets one 429.
                kind = (record.get("payload") or {}).get("type")
                status = 429 if recorder.first_time((self.path, kind)) else 201
            elif name.startswith("down"):
                status = 500
            elif name.startswith("redirect"):
                status = 307
            else:
                status = 201
            record["status"] = status
            recorder.write(record)
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After", "1")
            if status == 307:
                self.send_header("Location", f"/push/redirected-{name}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", server_port), Handler)
    ready(folder, {"port": server_port, "p256dh": b64url(public), "auth": b64url(auth)})
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    server.serve_forever()


# MARK: - APNs


def run_apns(folder, key_file, key_id, team_id):
    try:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config
    except ImportError as error:
        sys.stderr.write(f"push-test-server: {error}; install with: python3 -m pip install hypercorn h2\n")
        sys.exit(3)
    with open(key_file, "rb") as handle:
        public_key = serialization.load_pem_private_key(handle.read(), password=None).public_key()
    recorder = Recorder(folder)

    def check_token(header):
        result = {"valid": False}
        if not header or not header.lower().startswith("bearer "):
            result["error"] = "no bearer token"
            return result
        token = header[7:]
        try:
            header_part, claims_part, signature_part = token.split(".")
            jose = json.loads(b64url_decode(header_part))
            claims = json.loads(b64url_decode(claims_part))
            raw = b64url_decode(signature_part)
            signature = utils.encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
            public_key.verify(signature, f"{header_part}.{claims_part}".encode(), ec.ECDSA(hashes.SHA256()))
            signed = True
        except (ValueError, InvalidSignature) as error:
            result["error"] = f"signature: {error!r}"
            return result
        result.update(
            token=token, signature=signed, alg=jose.get("alg"), kid=jose.get("kid"), iss=claims.get("iss"), iat=claims.get("iat")
        )
        fresh = isinstance(claims.get("iat"), int) and abs(time.time() - claims["iat"]) < 3600
        result["valid"] = jose.get("alg") == "ES256" and jose.get("kid") == key_id and claims.get("iss") == team_id and fresh
        return result

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {key.decode().lower(): value.decode() for key, value in scope["headers"]}
        path = scope["path"]
        device = path.rsplit("/", 1)[-1]
        jwt = check_token(headers.get("authorization"))
        record = {"at": time.time(), "path": path, "method": scope["method"], "httpVersion": scope["http_version"], "headers": headers, "jwt": jwt}
        record["bodyText"] = body.decode(errors="replace")
        try:
            json.loads(body)
        except ValueError:
            record["bodyError"] = "not JSON"
        reason = None
        # Scripted once per device token and message type: each kind of message meets it.
        kind = None
        try:
            kind = json.loads(body).get("type")
        except (ValueError, AttributeError):
            pass
        if not jwt["valid"]:
            status, reason = 403, "InvalidProviderToken"
        elif not path.startswith("/3/device/") or scope["method"] != "POST":
            status, reason = 404, "BadPath"
        elif "apns-topic" not in headers:
            status, reason = 400, "MissingTopic"
        elif set(device) == {"0"}:
            status, reason = 400, "BadDeviceToken"
        elif device.startswith("dead"):
            status, reason = 410, "Unregistered"
        elif device.startswith("bad0"):
            status, reason = 400, "BadDeviceToken"
        elif device.startswith("ee") and recorder.first_time(("expired", device, kind)):
            status, reason = 403, "ExpiredProviderToken"
        elif device.startswith("50") and recorder.first_time(("down", device, kind)):
            status, reason = 500, "InternalServerError"
        elif device.startswith("42") and recorder.first_time(("busy", device, kind)):
            status, reason = 429, "TooManyRequests"
        else:
            status = 200
        record["status"] = status
        record["reason"] = reason
        recorder.write(record)
        answer = json.dumps({"reason": reason}).encode() if reason else b""
        response_headers = [(b"apns-id", b"00000000-0000-0000-0000-000000000000")]
        if status == 429:
            response_headers.append((b"retry-after", b"1"))
        if answer:
            response_headers.append((b"content-type", b"application/json"))
        await send({"type": "http.response.start", "status": status, "headers": response_headers})
        await send({"type": "http.response.body", "body": answer})

    cert_path, cert_key_path = make_certificate(folder, "apns")
    port = unused_port()
    config = Config()
    config.bind = [f"127.0.0.1:{port}"]
    config.certfile = cert_path
    config.keyfile = cert_key_path
    config.alpn_protocols = ["h2"]
    config.accesslog = None
    config.errorlog = None

    async def main():
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for number in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(number, stop.set)

        async def announce():
            # Ready once the socket accepts connections.
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    await asyncio.sleep(0.05)
            ready(folder, {"port": port, "ca": cert_path})

        loop.create_task(announce())
        await serve(app, config, shutdown_trigger=stop.wait)

    asyncio.run(main())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["webpush", "apns"], required=True)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--key", help="apns: the .p8 key the daemon signs with")
    parser.add_argument("--key-id")
    parser.add_argument("--team-id")
    args = parser.parse_args()
    watch_parent()
    if args.mode == "webpush":
        run_webpush(args.dir)
    else:
        run_apns(args.dir, args.key, args.key_id, args.team_id)


if __name__ == "__main__":
    main()
