#!/usr/bin/env python3
"""A hostile or broken Countersign, for the PAM module's tests.

Listens on 127.0.0.1 (a port of its own, written to the file given as the
first argument) and answers every request according to the first segment of
its path: /oversized/..., /truncated/..., and so on (see ANSWERS). A PAM
configuration whose url ends in /MODE meets that answer. Each request's
method and path is appended to the file given as the second argument, and
each request's body, after its method and path, to that file's name + ".bodies".
"""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VALID = {"approvalId": "a" * 22, "status": "pending", "expiresAt": "2030-01-01T00:00:00Z", "numberCode": "42"}


def created_then(status_body):
    """A valid create, then `status_body` for every other call."""

    def answer(handler):
        if handler.command == "POST" and handler.path.endswith("/v1/approvals"):
            return 201, json.dumps(VALID).encode(), None
        return 200, status_body, None

    return answer


ANSWERS = {
    # 2 MiB of a string: the module reads at most 64 KiB.
    "oversized": lambda h: (201, b'{"approvalId":"' + b"a" * (2 * 1024 * 1024) + b'"}', None),
    # Says 4000 bytes, sends 20, and closes.
    "truncated": lambda h: (201, b'{"approvalId":"aaaa', 4000),
    "notjson": lambda h: (201, b"<html><body>Welcome to nginx!</body></html>", None),
    # 100,000 nested arrays: a parser without a depth bound recurses until it crashes.
    "deep": lambda h: (201, b"[" * 100000 + b"]" * 100000, None),
    # An id that would walk up the path, and a number that is not one.
    "badid": lambda h: (201, json.dumps({"approvalId": "../../v1/users", "numberCode": "42"}).encode(), None),
    "wrongtypes": lambda h: (201, json.dumps({"approvalId": 12345, "numberCode": {"a": [1, 2]}}).encode(), None),
    "nul": lambda h: (201, b'{"approvalId":"abc\\u0000def","numberCode":"42"}', None),
    "longnumber": lambda h: (201, json.dumps({"approvalId": "a" * 22, "numberCode": "1" * 5000}).encode(), None),
    "trailing": lambda h: (201, json.dumps(VALID).encode() + b" {}", None),
    # A valid create, then a status that is garbage, or approved in a shape that is not.
    "statusgarbage": created_then(b"\x00\xff\xfe garbage"),
    "statusoversized": created_then(b'{"status":"' + b"p" * (1024 * 1024) + b'"}'),
    "statuswrongtype": created_then(json.dumps({"status": ["approved"]}).encode()),
    "server-error": lambda h: (500, b'{"error":"internal"}', None),
    # No answer for a minute: longer than the module waits for one.
    "hang": lambda h: (time.sleep(60), (500, b"{}", None))[1],
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 1 << 20)) if length else b""
        with open(sys.argv[2], "a") as log:
            log.write(f"{self.command} {self.path}\n")
        with open(sys.argv[2] + ".bodies", "ab") as log:
            log.write(f"{self.command} {self.path} ".encode() + body.replace(b"\n", b" ") + b"\n")
        mode = self.path.strip("/").split("/")[0]
        status, body, claimed = ANSWERS.get(mode, lambda h: (404, b"{}", None))(self)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(claimed if claimed is not None else len(body)))
        if claimed is not None:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        if claimed is not None:
            self.wfile.flush()
            self.close_connection = True

    do_GET = answer
    do_POST = answer


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os

os.rename(sys.argv[1] + ".tmp", sys.argv[1])
server.serve_forever()
