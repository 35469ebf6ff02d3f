#!/usr/bin/env python3
"""Flood the daemon's per-IP status-poll limiter with distinct client addresses
and report its resident memory, to show the limiter's memory stays bounded.

Starts `countersign serve` on 127.0.0.1 (trusting 127.0.0.1 as a proxy, so each
request's X-Forwarded-For is a new client), sends N status polls, each from a
new address, on keep-alive connections, and prints VmRSS along the way.
Only 127.0.0.1 is contacted. Usage:
    benchmarks/limiter-flood.py [--binary .build/release/countersign] [--requests 100000]
"""
import argparse, http.client, sys, threading, time

from daemon import rss_kib, serving


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/debug/countersign")
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()

    with serving(args.binary, ["--trusted-proxy", "127.0.0.1", "--rate-limit", "statusPollsPerIP=50/3600"]) as (daemon, port, _):
        time.sleep(0.5)
        print(f"requests: {args.requests} distinct client addresses; binary: {args.binary}")
        print(f"rss before: {rss_kib(daemon.pid)} KiB")
        done = [0]
        lock = threading.Lock()
        statuses = {}

        def worker(first, count):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            for index in range(first, first + count):
                address = f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"
                connection.request("GET", "/api/mobile/auth/reset/phone/status/AAAAAAAAAAAAAAAAAAAAAA",
                                   headers={"X-Forwarded-For": address})
                response = connection.getresponse()
                response.read()
                with lock:
                    statuses[response.status] = statuses.get(response.status, 0) + 1
                    done[0] += 1

        per = args.requests // args.threads
        started = time.time()
        threads = [threading.Thread(target=worker, args=(i * per, per)) for i in range(args.threads)]
        for thread in threads:
            thread.start()
        marks = {args.requests // 4, args.requests // 2, 3 * args.requests // 4}
        while any(t.is_alive() for t in threads):
            time.sleep(0.5)
            with lock:
                current = done[0]
            for mark in sorted(marks):
                if current >= mark:
                    print(f"rss after ~{current} requests: {rss_kib(daemon.pid)} KiB")
                    marks.discard(mark)
        elapsed = time.time() - started
        print(f"rss after {done[0]} requests: {rss_kib(daemon.pid)} KiB")
        print(f"statuses: {statuses}; {done[0] / elapsed:.0f} requests/s over {elapsed:.1f} s")
        # A second flood of new addresses: memory should not climb further.
        done[0] = 0
        threads = [threading.Thread(target=worker, args=(args.requests + i * per, per)) for i in range(args.threads)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(f"rss after a second {done[0]} new addresses: {rss_kib(daemon.pid)} KiB")


if __name__ == "__main__":
    sys.exit(main())
