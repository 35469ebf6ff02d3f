#!/usr/bin/env python3
"""A Countersign webhook receiver that checks every event before it trusts it.

    COUNTERSIGN_WEBHOOK_SECRET=whsec_... python3 examples/webhook_receiver.py --port 9000

Countersign signs as the Standard Webhooks specification says (`webhook-id`,
`webhook-timestamp`, `webhook-signature`), so the check is the specification's
own library (`pip install standardwebhooks`): the signature over the raw body,
and a timestamp no more than 5 minutes away (a replay). Each event id is
handled once (delivery is at least once). Prints one line per event.
"""
import argparse
import json
import os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

WEBHOOK = Webhook(os.environ["COUNTERSIGN_WEBHOOK_SECRET"])
MAX_BODY = 1 << 20
seen = set()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self.answer(413)
        body = self.rfile.read(length)
        try:
            event = WEBHOOK.verify(body, dict(self.headers.items()))
        except WebhookVerificationError:
            print("refused: signature not valid or too old", flush=True)
            return self.answer(400)
        if event["id"] in seen:
            print(f"duplicate {event['id']} ignored", flush=True)
            return self.answer(200)
        seen.add(event["id"])
        data = event["data"]
        if event["type"] == "webhook.ping":  # a test event (POST /v1/webhook/ping): no approval in it
            print(f"event {event['id']} webhook.ping", flush=True)
        else:
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
