#!/usr/bin/env python3
"""Long polls held on a cluster: HELD long polls on node A of two nodes sharing
one PostgreSQL database (a throw-away server from scripts/pg-test-server.sh),
each on its own connection from its own X-Forwarded-For address; the approval
is sent to node B. Prints node A's RSS per held poll and when the last poll
was answered after the approval. Only 127.0.0.1; both nodes are killed and the
server stops when this script ends. Needs a release build.

usage: python3 benchmarks/long-polls-cluster.py [--held 18000] [--idle-reader SECONDS] [--approve-on a|b]
                                                [--binary .build/release/countersign]

With --approve-on a, the approval goes to node A itself: its polls are woken by
its own commit, not by a notification.

With --idle-reader, the reader sleeps that long after the approval before it
reads, as the suite's longpoll row does: the answers' arrival is the kernel's
receive time of each socket, and the reader takes no CPU from the nodes.
"""
import argparse, os, resource, sys, time

sys.path.insert(0, os.path.dirname(__file__))
import suite  # noqa: E402
from daemon import PostgresServer  # noqa: E402


def measure(binary, held, idle_reader=0, approve_on="b"):
    """Holds `held` polls on node A, approves on node B (or, with
    `approve_on="a"`, on node A itself); returns (polls held,
    RSS before and after in KiB, answered early, answered, approved, seconds
    to the last read, seconds to the last arrival after the approval). Raises
    NoPostgres when no PostgreSQL server is installed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    held = min(held, hard - 500)
    server = PostgresServer()
    url, key = server.new_database("polls"), server.key
    extra = suite.RAISED + ["--request-ttl", "3600", "--trusted-proxy", "127.0.0.1", "--long-polls-per-address", "1000000",
                            "--long-polls-max", "1000000", "--idle-timeout", "120", "--secret-key-file", key]
    # Each node its own metrics listener: two on the default port would not both start.
    a = suite.Daemon(binary, extra + ["--node-id", "a", "--metrics-listen", f"127.0.0.1:{suite.free_port()}"], database=url)
    b = suite.Daemon(binary, extra + ["--node-id", "b", "--metrics-listen", f"127.0.0.1:{suite.free_port()}"], database=url)
    try:
        suite.add_user(a, "ana@bench.test")
        a.start()
        b.start()
        approver = b if approve_on == "b" else a
        device = suite.login(suite.Client(approver.port), "ana@bench.test")
        started = suite.initiate(suite.Client(a.port), "ana@bench.test")
        request = started["requestId"]
        time.sleep(1)
        before = a.rss_kib()

        def poll(index):
            address = f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"
            return (f"GET /api/mobile/auth/reset/phone/status/{request}?wait=30 HTTP/1.1\r\n"
                    f"Host: localhost\r\nX-Forwarded-For: {address}\r\n\r\n")

        opened = time.perf_counter()
        sockets = suite.open_held(a.port, held, poll)
        suite.log(f"{held:,} sent to node A in {time.perf_counter() - opened:.1f} s")
        time.sleep(4)
        after = a.rss_kib()
        return (held, before, after) + suite.answered_after(
            sockets, lambda: suite.Client(approver.port).call("POST", f"/api/mobile/approvals/{request}/respond",
                                                       {"decision": "approve", "numberCode": started.get("numberCode")},
                                                       headers={"X-API-Key": device}), idle=idle_reader)
    finally:
        a.stop(kill=True)
        b.stop(kill=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--held", type=int, default=18000)
    parser.add_argument("--idle-reader", type=float, default=0)
    parser.add_argument("--binary", default=".build/release/countersign")
    parser.add_argument("--approve-on", choices=("a", "b"), default="b",
                        help="the node the approval is sent to: b (another node, the default) or a (the node the polls wait on)")
    arguments = parser.parse_args()
    held, before, after, early, answered, approved, took, arrived = measure(arguments.binary, arguments.held, arguments.idle_reader,
                                                                           arguments.approve_on)
    print(f"node A: RSS {before / 1024:.0f} → {after / 1024:.0f} MiB, {(after - before) / held:.1f} KiB per held poll; {early} answered early; "
          f"{answered:,} answered ({approved:,} approved), the last read {took:.2f} s and arrived {arrived:.2f} s after the approval sent to node "
          f"{arguments.approve_on.upper()}"
          + (f" (the reader idle {arguments.idle_reader:g} s)" if arguments.idle_reader else ""))


if __name__ == "__main__":
    main()
