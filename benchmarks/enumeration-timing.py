#!/usr/bin/env python3
"""Do known and unknown emails take the same time? Measures phone-reset
initiation, failed logins, email-reset initiation and a wrong email-reset code
for an existing account and for an unknown email against a real daemon on
127.0.0.1 with the production bcrypt cost (12). Mail is on, pointed at a
loopback port where nothing listens, so a known address queues (and seals) its
mail as in production; the outbox's retries run meanwhile.
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
              "--rate-limit", "loginFailuresPerIP=100000/900", "--rate-limit", "loginFailuresPerEmail=100000/900",
              "--rate-limit", "emailResetPerIP=100000/3600", "--rate-limit", "emailResetPerEmail=100000/3600",
              "--rate-limit", "emailVerifyFailuresPerIP=100000/3600",
              "--smtp-url", "smtp://127.0.0.1:1", "--smtp-tls", "none", "--smtp-from", "noreply@example.com"]
    with serving(args.binary, limits, users=[("ana@example.com", "correct horse battery", 12)]) as (_, port, _):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        samples = {"initiate known": [], "initiate unknown": [], "login wrong password": [], "login unknown email": [],
                   "email initiate known": [], "email initiate unknown": [], "email wrong code known": [],
                   "email wrong code unknown": []}
        statuses = {}
        for _ in range(args.rounds):
            # Alternate so drift affects both sides alike.
            for label, path, body in [
                ("initiate known", "/api/mobile/auth/reset/phone/initiate", {"email": "ana@example.com", "newPassword": "staple orbit lantern"}),
                ("initiate unknown", "/api/mobile/auth/reset/phone/initiate", {"email": "ghost@example.com", "newPassword": "staple orbit lantern"}),
                ("login wrong password", "/api/mobile/auth/login", {"email": "ana@example.com", "password": "wrong-password", "deviceName": "x", "platform": "iOS"}),
                ("login unknown email", "/api/mobile/auth/login", {"email": "ghost@example.com", "password": "wrong-password", "deviceName": "x", "platform": "iOS"}),
                # Each initiate issues a fresh code, so each wrong code below meets a live one.
                ("email initiate known", "/api/mobile/auth/reset/email/initiate", {"email": "ana@example.com"}),
                ("email initiate unknown", "/api/mobile/auth/reset/email/initiate", {"email": "ghost@example.com"}),
                ("email wrong code known", "/api/mobile/auth/reset/email/verify", {"email": "ana@example.com", "code": "000000", "newPassword": "staple orbit lantern"}),
                ("email wrong code unknown", "/api/mobile/auth/reset/email/verify", {"email": "ghost@example.com", "code": "000000", "newPassword": "staple orbit lantern"}),
            ]:
                ms, status, _ = timed(conn, path, body)
                samples[label].append(ms)
                statuses.setdefault(label, set()).add(status)
        print(f"binary: {args.binary}, bcrypt cost 12, {args.rounds} rounds each")
        for label, values in samples.items():
            print(f"{label:24s} median {statistics.median(values):7.1f} ms  stdev {statistics.pstdev(values):5.1f} ms  statuses {sorted(statuses[label])}")


if __name__ == "__main__":
    main()
