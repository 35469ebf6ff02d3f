#!/usr/bin/env python3
"""What the daemon holds at its connection and long-poll caps, and its memory then.

Starts `countersign serve` on 127.0.0.1 (trusting 127.0.0.1 as a proxy, so each
connection's X-Forwarded-For names its client), makes one pending request, and:
  1. from ONE client address, opens per-address-cap + 200 long polls (wait=30):
     counts how many are held and how many are answered at once;
  2. from many addresses, opens long polls up to the node cap + 200: same counts;
  3. opens idle connections that send nothing, and checks they are closed at
     the idle timeout;
  4. opens --hang-ups long polls from one address, waits until the daemon holds
     them all (its countersign_long_polls_waiting gauge), closes every client
     socket, and times how long until the gauge is back at 0.
Prints VmRSS at each step. Only 127.0.0.1 is contacted; everything stops by itself.
Usage:
    benchmarks/long-poll-caps.py [--binary .build/release/countersign] [--per-address 1000] [--total 3000] [--idle 2000] [--hang-ups 1000]
"""
import argparse, json, resource, selectors, socket, sys, time, urllib.request

from daemon import free_port, rss_kib, serving


def open_polls(port, request_id, addresses):
    """One connection per address entry, each sending a long poll; returns the sockets."""
    sockets = []
    for address in addresses:
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /api/mobile/auth/reset/phone/status/{request_id}?wait=30 HTTP/1.1\r\n"
                  f"Host: localhost\r\nX-Forwarded-For: {address}\r\n\r\n".encode())
        sockets.append(s)
    return sockets


def answered_within(sockets, seconds):
    """How many sockets received an answer within `seconds`."""
    selector = selectors.DefaultSelector()
    for s in sockets:
        selector.register(s, selectors.EVENT_READ)
    answered = set()
    deadline = time.time() + seconds
    while time.time() < deadline:
        for key, _ in selector.select(timeout=max(0, deadline - time.time())):
            answered.add(key.fileobj)
            selector.unregister(key.fileobj)
    selector.close()
    return len(answered)


def close_all(sockets):
    for s in sockets:
        s.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=".build/debug/countersign")
    parser.add_argument("--per-address", type=int, default=1000)
    parser.add_argument("--total", type=int, default=3000)
    parser.add_argument("--idle", type=int, default=2000)
    parser.add_argument("--idle-timeout", type=int, default=5)
    parser.add_argument("--hang-ups", type=int, default=1000)
    parser.add_argument("--only-hang-ups", action="store_true")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    needed = args.total + args.per_address + args.idle + 1000
    if hard < needed:
        sys.exit(f"open-file limit {hard} is below the {needed} this run needs")

    arguments = ["--trusted-proxy", "127.0.0.1", "--rate-limit", "statusPollsPerIP=1000000/1", "--connections-per-address", "0",
                 "--long-polls-per-address", str(args.per_address), "--long-polls-max", str(args.total),
                 "--idle-timeout", str(args.idle_timeout), "--request-ttl", "300", "--bcrypt-cost", "4"]
    print(f"caps: {args.per_address} per address, {args.total} per node; idle timeout {args.idle_timeout} s; binary {args.binary}")

    if args.only_hang_ups:
        measure_hang_ups(args, arguments)
        return
    # Each step on a daemon of its own, so that nothing of one step counts in the next.
    # 1. One address, over its cap.
    measure_polls(args, arguments, "one address", ["198.51.100.1"] * (args.per_address + 200))
    # 2. Many addresses, over the node cap (each address stays under its own cap).
    measure_polls(args, arguments, "one long poll each from many addresses",
                  [f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}" for i in range(args.total + 200)])

    # 3. Idle connections: held until the idle timeout, then closed by the daemon.
    with serving(args.binary, arguments) as (daemon, port, _):
        time.sleep(0.5)
        base = rss_kib(daemon.pid)
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(args.idle)]
        time.sleep(0.5)
        rss = rss_kib(daemon.pid)
        print(f"{len(idle)} idle connections: rss {base} -> {rss} KiB (+{(rss - base) / len(idle):.1f} KiB each)")
        closed = answered_within(idle, args.idle_timeout + 3)  # a close is readable (EOF)
        print(f"closed by the daemon within {args.idle_timeout + 3} s: {closed} of {len(idle)}")
        close_all(idle)

    # 4. Long polls whose clients hang up.
    measure_hang_ups(args, arguments)


def long_polls_waiting(metrics_port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    for line in text.splitlines():
        if line.startswith("countersign_long_polls_waiting "):
            return int(float(line.split()[-1]))
    return 0


def measure_hang_ups(args, arguments):
    """Long polls held, then every client closes: how long until the daemon holds none."""
    metrics_port = free_port()
    with serving(args.binary, arguments + ["--metrics-listen", f"127.0.0.1:{metrics_port}"]) as (daemon, port, _):
        request_id = pending_request(port)
        polls = open_polls(port, request_id, ["198.51.100.9"] * args.hang_ups)
        deadline = time.monotonic() + 30
        while long_polls_waiting(metrics_port) < args.hang_ups and time.monotonic() < deadline:
            time.sleep(0.01)
        held = long_polls_waiting(metrics_port)
        started = time.monotonic()
        close_all(polls)
        while long_polls_waiting(metrics_port) > 0 and time.monotonic() - started < 30:
            time.sleep(0.01)
        left, took = long_polls_waiting(metrics_port), time.monotonic() - started
        print(f"{held} long polls held, then every client hung up: {left} held {took * 1000:.0f} ms later")


def measure_polls(args, arguments, label, addresses):
    """On a daemon of its own: a long poll per address, then how many are held and the memory."""
    with serving(args.binary, arguments) as (daemon, port, _):
        request_id, base = pending_request(port), rss_kib(daemon.pid)
        polls = open_polls(port, request_id, addresses)
        at_once = answered_within(polls, 2.0)
        rss = rss_kib(daemon.pid)
        held = len(polls) - at_once
        print(f"{label}, {len(polls)} long polls: {held} held, {at_once} answered at once; "
              f"rss {base} -> {rss} KiB (+{(rss - base) / max(1, held):.1f} KiB per held poll)")
        close_all(polls)


def pending_request(port):
    """A pending request to long-poll on (an unknown email: it stays pending until it expires)."""
    body = json.dumps({"email": "nobody@example.com", "newPassword": "long enough password"}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/mobile/auth/reset/phone/initiate", data=body,
                                     headers={"Content-Type": "application/json"})
    request_id = json.load(urllib.request.urlopen(request))["requestId"]
    time.sleep(0.5)
    return request_id

if __name__ == "__main__":
    main()
