#!/usr/bin/env python3
"""Push through the whole daemon, builds alternated round by round: the suite's
push row (users × devices × rounds of password-reset initiates, each prompt and
each superseded request's notice sent to the FCM stub) without firebase-admin
and h2load, for comparing two or more builds of the daemon in the same minutes.
Per round it prints each build's messages/s and the daemon's own CPU time per
message (utime + stime from /proc, sampled every 20 ms over the push phase:
from the first initiate until the last message was counted sent). Absolute
figures move with the machine; compare builds within one run. Only 127.0.0.1;
needs nginx with HTTP/2 and the FCM stub, as the suite's push row does.

usage: python3 benchmarks/push-builds.py --binary A [--binary B ...] [--rounds 5]
                                         [--fcm-stub ../shared/bench/fcm-stub] [--postgres]

With --postgres each round's daemon runs on a new database of a throw-away
PostgreSQL server (scripts/pg-test-server.sh). Each round then also prints how
many of the daemon's `pushed` audit events were committed when the last
message was counted sent, how long SIGTERM took to stop the daemon (its audit
writer stores what is left first), and how many were committed after it.
"""
import argparse, os, statistics, subprocess, sys, threading, time

sys.path.insert(0, os.path.dirname(__file__))
import suite  # noqa: E402
from daemon import PostgresServer, cpu_ticks  # noqa: E402


def daemon_pid(binary):
    """The `BINARY serve` process running now, if any."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if open(f"/proc/{pid}/cmdline", "rb").read().startswith(binary.encode() + b"\0serve\0"):
                return pid
        except OSError:
            pass
    return None


def audit_check(postgres, name):
    """After the last message was sent: the pushed events committed then, the time SIGTERM takes, and those after."""
    def check(daemon):
        counted = "SELECT count(*) FROM audit_events WHERE kind = 'pushed'"
        pushed = suite.metric_sum(daemon.metrics_port, "countersign_pushes_total") - suite.metric_sum(
            daemon.metrics_port, "countersign_pushes_total", outcome="disabled")
        committed = int(postgres.query(name, counted))
        began = time.perf_counter()
        try:
            daemon.stop()
            stopped = f"stopped {time.perf_counter() - began:.1f} s after SIGTERM"
        except subprocess.TimeoutExpired:
            daemon.stop(kill=True)
            stopped = "not stopped 60 s after SIGTERM (killed)"
        print(f"  audit: {committed:,} of {pushed:,.0f} pushed events committed when the last message was sent; "
              f"{stopped}; {int(postgres.query(name, counted)):,} committed then", flush=True)
    return check


def one_round(args, binary, folder):
    """One push round of `binary`: (messages/s, daemon CPU µs per message)."""
    started, samples, stop = [], [], threading.Event()
    original = suite.initiate

    def initiate(client, email):
        if not started:
            started.append(time.perf_counter())
        return original(client, email)

    def sample():
        pid = None
        while not stop.is_set():
            pid = pid or daemon_pid(binary)
            if pid:
                samples.append((time.perf_counter(), cpu_ticks(pid)))
            stop.wait(0.02)

    suite.initiate = initiate
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        on = {}
        if args.postgres:
            args.databases += 1
            name = f"push{args.databases}"
            url = args.postgres.new_database(name)
            on = dict(database=url, more=["--secret-key-file", args.postgres.key], after=audit_check(args.postgres, name))
        rate, sent, expected, others = suite.daemon_push_rate(
            argparse.Namespace(push_users=args.push_users, push_devices=args.push_devices, push_rounds=args.push_rounds,
                               binary=binary), folder, **on)
    finally:
        stop.set()
        sampler.join()
        suite.initiate = original
    if sent < expected or others:
        print(f"  {sent:,} of {expected:,} sent, {others} other outcomes", flush=True)
    begin, end = started[0], started[0] + sent / rate
    window = [ticks for at, ticks in samples if ticks is not None and begin - 0.02 <= at <= end + 0.02]
    ticks_per_second = os.sysconf("SC_CLK_TCK")
    cpu = (window[-1] - window[0]) / ticks_per_second if len(window) > 1 else float("nan")
    return rate, cpu / sent * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", action="append", required=True, help="a daemon build (give two or more)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--push-users", type=int, default=50)
    parser.add_argument("--push-devices", type=int, default=40)
    parser.add_argument("--push-rounds", type=int, default=8)
    parser.add_argument("--fcm-stub", default=os.path.join(suite.ROOT, "..", "shared", "bench", "fcm-stub"))
    parser.add_argument("--postgres", action="store_true", help="run each round's daemon on a throw-away PostgreSQL server")
    args = parser.parse_args()
    args.postgres, args.databases = PostgresServer() if args.postgres else None, 0
    binaries = [os.path.abspath(binary) for binary in args.binary]
    folder = suite.start_stub(args.fcm_stub)
    measured = {binary: [] for binary in binaries}
    try:
        for round in range(args.rounds):
            for binary in binaries:
                rate, cpu = one_round(args, binary, folder)
                measured[binary].append((rate, cpu))
                print(f"round {round + 1}, {binary}: {rate:,.0f} msg/s, daemon CPU {cpu:.0f} µs per message", flush=True)
    finally:
        suite.stop_stub(folder)
    for binary in binaries:
        rates = [rate for rate, _ in measured[binary]]
        cpus = [cpu for _, cpu in measured[binary]]
        print(f"{binary}: median {statistics.median(rates):,.0f} msg/s, {statistics.median(cpus):.0f} µs per message "
              f"(msg/s per round: {', '.join(f'{rate:,.0f}' for rate in rates)})")


if __name__ == "__main__":
    main()
