#!/usr/bin/env python3
"""How many guesses a burst of parallel wrong logins gets, and what the rest see.

Starts `countersign serve` on 127.0.0.1 with one user (bcrypt cost 12 by
default, as in production), fires N wrong-password logins for that email at
once from N threads, then tries the right password. Prints the answers by
status. Only 127.0.0.1 is contacted. Usage:
    benchmarks/login-burst.py [--binary .build/release/countersign] [--burst 50] [--cost 12]
"""
import argparse, collections, http.client, json, threading, time

from daemon import serving


def login(port, password):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"email": "ana@example.com", "password": password, "deviceName": "d", "platform": "iOS"})
    connection.request("POST", "/api/mobile/auth/login", body, {"Content-Type": "application/json"})
    status = connection.getresponse().status
    connection.close()
    return status


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/debug/countersign")
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--cost", type=int, default=12)
    args = parser.parse_args()
    users = [("ana@example.com", "correct horse battery", args.cost)]
    with serving(args.binary, ["--bcrypt-cost", str(args.cost)], users=users) as (_, port, _):
        statuses = collections.Counter()
        lock = threading.Lock()
        start = threading.Barrier(args.burst)

        def guess(index):
            start.wait()
            status = login(port, f"wrong guess {index}")
            with lock:
                statuses[status] += 1

        began = time.time()
        threads = [threading.Thread(target=guess, args=(i,)) for i in range(args.burst)]
        for thread in threads: thread.start()
        for thread in threads: thread.join()
        took = time.time() - began
        right = login(port, "correct horse battery")
        print(f"{args.burst} parallel wrong logins, bcrypt cost {args.cost}: "
              + ", ".join(f"{count} × {status}" for status, count in sorted(statuses.items()))
              + f" in {took:.2f} s; then the right password: {right}")


if __name__ == "__main__":
    main()
