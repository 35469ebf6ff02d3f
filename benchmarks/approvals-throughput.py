#!/usr/bin/env python3
"""Approvals created per second through the approvals API, one enrolled
device per user (no bcrypt on this path), and webhook deliveries per second
to a receiver on 127.0.0.1 that checks every signature.

    python3 benchmarks/approvals-throughput.py --binary .build/release/countersign \
        [--users 200] [--approvals 2000] [--threads 16]

Everything runs on 127.0.0.1 and stops by itself. The per-user and
per-integration limits are raised for the run (`--rate-limit`), as an
operator would for a load test.
"""
import argparse, hashlib, hmac, http.client, json, os, subprocess, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(__file__))
from daemon import free_port, serving  # noqa: E402


class Client:
    """One keep-alive connection per thread."""
    local = threading.local()

    def __init__(self, port, key):
        self.port, self.key = port, key

    def call(self, method, path, body=None, headers=None):
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = self.local.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        all_headers = {"Content-Type": "application/json", **(headers or {})}
        if self.key:
            all_headers["Authorization"] = "Bearer " + self.key
        connection.request(method, path, body=None if body is None else json.dumps(body), headers=all_headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"{}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/countersign")
    parser.add_argument("--users", type=int, default=200)
    parser.add_argument("--approvals", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=16)
    args = parser.parse_args()

    hook_port = free_port()
    received, lock, valid = [], threading.Lock(), [True]
    secret_holder = {}

    class Receiver(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            fields = dict(part.split("=", 1) for part in self.headers["Countersign-Signature"].split(","))
            expected = hmac.new(secret_holder["secret"], f"{fields['t']}.".encode() + body, hashlib.sha256).hexdigest()
            with lock:
                valid[0] &= hmac.compare_digest(expected, fields["v1"])
                received.append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    limits = ["--rate-limit", "approvalsPerUser=1000000/60", "--rate-limit", "approvalsPerIntegration=1000000/1"]
    with serving(args.binary, limits) as (daemon, port, database):
        added = subprocess.run(
            [args.binary, "integration", "add", "bench", "--webhook-url", f"http://127.0.0.1:{hook_port}/hook", "--database", database],
            check=True, capture_output=True, text=True).stdout
        key = next(line.split()[-1] for line in added.splitlines() if line.startswith("API key:"))
        secret_holder["secret"] = next(line.split()[-1] for line in added.splitlines() if line.startswith("webhook secret:")).encode()
        api = Client(port, key)
        device = Client(port, None)

        # Users, each with one pull-only device enrolled by code.
        emails = [f"user{i}@bench.test" for i in range(args.users)]
        for email in emails:
            api.call("POST", "/v1/users", {"email": email})
            _, issued = api.call("POST", f"/v1/users/{email}/enrollments")
            status, _ = device.call("POST", "/api/mobile/auth/enroll",
                                    {"enrollmentCode": issued["enrollmentCode"], "deviceName": "bench", "platform": "android"})
            assert status == 200, status

        # Creates: distinct actions so that no approval replaces another.
        def create(index):
            status, answer = api.call("POST", "/v1/approvals", {
                "user": emails[index % len(emails)], "action": f"bench.{index}", "title": "Benchmark", "body": "one approval",
                "context": {"n": str(index)}})
            assert status == 201, (status, answer)
            return answer["approvalId"]

        started = time.monotonic()
        with ThreadPoolExecutor(args.threads) as pool:
            ids = list(pool.map(create, range(args.approvals)))
        created_in = time.monotonic() - started
        print(f"created {len(ids)} approvals in {created_in:.2f} s: {len(ids) / created_in:.0f} approvals/s "
              f"({args.threads} client threads, {args.users} users)")

        # Webhooks: cancel each (one event each) with the receiver up, count until all arrive.
        server = ThreadingHTTPServer(("127.0.0.1", hook_port), Receiver)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        started = time.monotonic()
        with ThreadPoolExecutor(args.threads) as pool:
            list(pool.map(lambda approval: api.call("POST", f"/v1/approvals/{approval}/cancel"), ids))
        cancelled_in = time.monotonic() - started
        deadline = time.monotonic() + 300
        while len(received) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.05)
        server.shutdown()
        if len(received) < len(ids):
            print(f"only {len(received)} of {len(ids)} webhooks arrived within 300 s")
            return 1
        delivered_in = received[-1] - started
        print(f"cancelled {len(ids)} in {cancelled_in:.2f} s; {len(received)} webhook events delivered in {delivered_in:.2f} s: "
              f"{len(received) / delivered_in:.0f} deliveries/s; every signature valid: {valid[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
