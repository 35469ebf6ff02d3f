#!/usr/bin/env python3
"""Long-poll wake-up latency and status-poll throughput of a real daemon on 127.0.0.1.

Starts `countersign serve` on a fresh database (bcrypt cost 4, limits raised so
they do not interfere), creates a user and a device, then:
  1. for each of N requests: a requester long-polls (wait=10) while the device
     approves; reports how long after the approval was sent the long poll
     answered, and the approval's own round trip (median, p95, max);
  2. sends M status polls on keep-alive connections from 4 threads and
     reports requests per second.
Only 127.0.0.1 is contacted. Usage:
    benchmarks/api-latency.py [--binary .build/release/countersign] [--requests 200] [--polls 20000]
"""
import argparse, http.client, json, statistics, threading, time

from daemon import percentile, serving


def call(conn, method, path, body=None, key=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    if key:
        headers["X-API-Key"] = key
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    return response.status, json.loads(response.read() or b"{}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/countersign")
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--polls", type=int, default=20000)
    args = parser.parse_args()

    limits = ["--bcrypt-cost", "4", "--rate-limit", "statusPollsPerIP=1000000/1", "--rate-limit", "resetInitiatePerIP=1000000/900",
              "--rate-limit", "resetInitiatePerEmail=1000000/900", "--rate-limit", "respondPerDevice=1000000/60"]
    with serving(args.binary, limits, users=[("ana@example.com", "correct horse battery", 4)]) as (_, port, _):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        status, login = call(conn, "POST", "/api/mobile/auth/login",
                             {"email": "ana@example.com", "password": "correct horse battery", "deviceName": "bench", "platform": "iOS"})
        assert status == 200, login
        key = login["apiKey"]

        wake, respond = [], []
        for _ in range(args.requests):
            status, started = call(conn, "POST", "/api/mobile/auth/reset/phone/initiate",
                                   {"email": "ana@example.com", "newPassword": "staple orbit lantern"})
            assert status == 200, started
            rid = started["requestId"]
            result = {}

            def poll():
                poller = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                status, body = call(poller, "GET", f"/api/mobile/auth/reset/phone/status/{rid}?wait=10")
                result["at"] = time.perf_counter()
                result["status"] = body.get("status")
                poller.close()

            thread = threading.Thread(target=poll)
            thread.start()
            time.sleep(0.02)  # let the long poll arrive and wait
            sent = time.perf_counter()
            status, answer = call(conn, "POST", f"/api/mobile/approvals/{rid}/respond",
                                  {"decision": "approve", "numberCode": started.get("numberCode")}, key=key)
            answered = time.perf_counter()
            thread.join()
            assert status == 200 and result["status"] == "approved", (status, answer, result)
            respond.append((answered - sent) * 1000)
            wake.append((result["at"] - sent) * 1000)

        def summary(values):
            return (f"median {statistics.median(values):.2f} ms, p95 {percentile(values, 95):.2f} ms, "
                    f"max {max(values):.2f} ms")

        print(f"binary: {args.binary}")
        print(f"long poll woken after the approval was sent ({args.requests} requests): {summary(wake)}")
        print(f"approval round trip, committed to SQLite before the answer: {summary(respond)}")

        rid = started["requestId"]
        per = args.polls // 4
        counts = [0] * 4

        def poller(slot):
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for _ in range(per):
                c.request("GET", f"/api/mobile/auth/reset/phone/status/{rid}")
                r = c.getresponse()
                r.read()
                counts[slot] += r.status == 200
            c.close()

        begin = time.perf_counter()
        threads = [threading.Thread(target=poller, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - begin
        print(f"status polls: {sum(counts)} answered 200 in {elapsed:.2f} s: {sum(counts) / elapsed:.0f} requests/s "
              f"(4 keep-alive clients in Python on the same 2 cores)")


if __name__ == "__main__":
    main()
