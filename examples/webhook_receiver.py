#!/usr/bin/env python3
"""A Countersign webhook receiver that checks every event before it trusts it.

    COUNTERSIGN_WEBHOOK_SECRET=whsec_... python3 examples/webhook_receiver.py --port 9000

Checks the `Countersign-Signature` header (HMAC-SHA256 of "<t>.<raw body>"
keyed with the whole secret), refuses a timestamp more than 5 minutes away
(a replay), and handles each event id once (delivery is at least once).
Prints one line per event. Python standard library only.
"""
import argparse
import hashlib
import hmac
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SECRET = os.environ["COUNTERSIGN_WEBHOOK_SECRET"].encode()
TOLERANCE = 300
MAX_BODY = 1 << 20
seen = set()


def verify(header, body, now):
    """True when one v1 signature matches and t is within the tolerance."""
    fields = [part.split("=", 1) for part in header.split(",") if "=" in part]
    timestamps = [value for key, value in fields if key == "t"]
    signatures = [value for key, value in fields if key == "v1"]
    if len(timestamps) != 1 or not timestamps[0].isdigit() or not signatures:
        return False
    timestamp = int(timestamps[0])
    if abs(now - timestamp) > TOLERANCE:
        return False
    expected = hmac.new(SECRET, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, candidate) for candidate in signatures)


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413)
        body = self.rfile.read(length)
        if not verify(self.headers.get("Countersign-Signature", ""), body, time.time()):
            print("refused: signature not valid or too old", flush=True)
            return self.answer(400)
        event = json.loads(body)
        if event["id"] in seen:
            print(f"duplicate {event['id']} ignored", flush=True)
            return self.answer(200)
        seen.add(event["id"])
        data = event["data"]
        print(f"event {event['id']} {event['type']} approval={data['approvalId']} user={data['user']}", flush=True)
        self.answer(200)

    def answer(self, status):
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=9000, help="0: any free port (the one taken is printed)")
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    print(f"listening on 127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()
