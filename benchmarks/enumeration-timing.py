#!/usr/bin/env python3
"""Do known and unknown emails take the same time? Measures phone-reset
initiation and failed logins for an existing account and for an unknown email
against a real daemon on 127.0.0.1 with the production bcrypt cost (12).
Usage: benchmarks/enumeration-timing.py [--binary .build/release/countersign] [--rounds 20]
"""
import argparse, http.client, json, statistics, time

from daemon import serving


def timed(conn, path, body):
    started = time.perf_counter()
    conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = response.read()
    return (time.perf_counter() - started) * 1000, response.status, payload


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/release/countersign")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    limits = ["--rate-limit", "resetInitiatePerIP=100000/900", "--rate-limit", "resetInitiatePerEmail=100000/900",
              "--rate-limit", "loginFailuresPerIP=100000/900", "--rate-limit", "loginFailuresPerEmail=100000/900"]
    with serving(args.binary, limits, users=[("ana@example.com", "correct horse battery", 12)]) as (_, port, _):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        samples = {"initiate known": [], "initiate unknown": [], "login wrong password": [], "login unknown email": []}
        statuses = {}
        for _ in range(args.rounds):
            # Alternate so drift affects both sides alike.
            for label, path, body in [
                ("initiate known", "/api/mobile/auth/reset/phone/initiate", {"email": "ana@example.com", "newPassword": "staple orbit lantern"}),
                ("initiate unknown", "/api/mobile/auth/reset/phone/initiate", {"email": "ghost@example.com", "newPassword": "staple orbit lantern"}),
                ("login wrong password", "/api/mobile/auth/login", {"email": "ana@example.com", "password": "wrong-password", "deviceName": "x", "platform": "iOS"}),
                ("login unknown email", "/api/mobile/auth/login", {"email": "ghost@example.com", "password": "wrong-password", "deviceName": "x", "platform": "iOS"}),
            ]:
                ms, status, _ = timed(conn, path, body)
                samples[label].append(ms)
                statuses.setdefault(label, set()).add(status)
        print(f"binary: {args.binary}, bcrypt cost 12, {args.rounds} rounds each")
        for label, values in samples.items():
            print(f"{label:22s} median {statistics.median(values):7.1f} ms  stdev {statistics.pstdev(values):5.1f} ms  statuses {sorted(statuses[label])}")


if __name__ == "__main__":
    main()
