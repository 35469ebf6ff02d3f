#!/usr/bin/env python3
"""A real SMTP submission server on 127.0.0.1 for Countersign's tests (aiosmtpd).

STARTTLS is required (a self-signed certificate for 127.0.0.1 and localhost,
made at start) and so is AUTH (PLAIN or LOGIN, after STARTTLS). With
--implicit-tls the connection is TLS from its first byte instead (smtps://,
port 465 style), and AUTH is required on it. Each accepted
message is written to DIR as NNNN.json (envelope, headers, decoded text and
HTML parts, raw bytes) and NNNN.eml.

Scripted answers, by the recipient's local part:
  tempfail…  451 on the first RCPT TO for that address, then accepted
  reject…    550 on every RCPT TO

When it is listening it writes DIR/ready.json: {"port": P, "ca": "CERT.pem"}.
Stops on SIGTERM or SIGINT, or when its parent process goes away.

Usage: smtp-test-server.py --dir DIR --user USER --password-file FILE [--port P] [--implicit-tls]
"""
import argparse
import json
import os
import signal
import ssl
import sys
import threading
import time
from email import message_from_bytes, policy

from unused_port import unused_port

try:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult, LoginPassword
    from test_certificate import make_certificate
except ImportError as error:  # said plainly: the tests name what is missing
    sys.stderr.write(f"smtp-test-server: {error}; install with: python3 -m pip install aiosmtpd cryptography\n")
    sys.exit(3)


class Handler:
    def __init__(self, folder):
        self.folder = folder
        self.count = 0
        self.tempfailed = set()
        self.lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        local = address.split("@")[0].lower()
        if local.startswith("reject"):
            return "550 5.1.1 No such mailbox here"
        if local.startswith("tempfail") and address not in self.tempfailed:
            self.tempfailed.add(address)
            return "451 4.3.0 Temporary failure, try again later"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        raw = envelope.original_content or envelope.content
        message = message_from_bytes(raw, policy=policy.default)
        text = message.get_body(("plain",))
        html = message.get_body(("html",))
        record = {
            "mailFrom": envelope.mail_from,
            "rcptTo": envelope.rcpt_tos,
            "tls": session.ssl is not None or server.transport.get_extra_info("ssl_object") is not None,
            "authenticated": bool(session.authenticated),
            "from": str(message["From"]),
            "to": str(message["To"]),
            "subject": str(message["Subject"]),
            "contentType": message.get_content_type(),
            "text": text.get_content() if text is not None else None,
            "html": html.get_content() if html is not None else None,
            "raw": raw.decode("utf-8", "replace"),
        }
        with self.lock:
            self.count += 1
            number = self.count
        base = os.path.join(self.folder, f"{number:04d}")
        with open(base + ".eml", "wb") as out:
            out.write(raw)
        with open(base + ".json.tmp", "w") as out:
            json.dump(record, out)
        os.rename(base + ".json.tmp", base + ".json")
        return "250 2.0.0 Message accepted for delivery"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--password-file", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--implicit-tls", action="store_true")
    arguments = parser.parse_args()
    os.makedirs(arguments.dir, exist_ok=True)
    with open(arguments.password_file) as source:
        password = source.read().strip()
    cert_path, key_path = make_certificate(arguments.dir, "smtp")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_path, key_path)

    def authenticate(server, session, envelope, mechanism, auth_data):
        if isinstance(auth_data, LoginPassword):
            if auth_data.login == arguments.user.encode() and auth_data.password == password.encode():
                return AuthResult(success=True)
        return AuthResult(success=False, handled=False)

    port = arguments.port or unused_port()
    if arguments.implicit_tls:
        # TLS from the first byte: aiosmtpd's STARTTLS flags do not apply, the whole session is encrypted.
        tls = {"ssl_context": context, "auth_require_tls": False}
    else:
        tls = {"tls_context": context, "require_starttls": True, "auth_require_tls": True}
    controller = Controller(
        Handler(arguments.dir), hostname="127.0.0.1", port=port, authenticator=authenticate, auth_required=True, **tls
    )
    controller.start()
    ready = os.path.join(arguments.dir, "ready.json")
    with open(ready + ".tmp", "w") as out:
        json.dump({"port": port, "ca": cert_path}, out)
    os.rename(ready + ".tmp", ready)
    print(f"smtp-test-server: listening on 127.0.0.1:{port}", flush=True)

    stop = threading.Event()
    # A parent that handles signals itself may have left them blocked or ignored.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    parent = os.getppid()
    # Bounded: a test server never outlives its test run by more than an hour.
    deadline = time.monotonic() + 3600
    while not stop.is_set() and os.getppid() == parent and time.monotonic() < deadline:
        stop.wait(0.5)
    controller.stop()


if __name__ == "__main__":
    main()
