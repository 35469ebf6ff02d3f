#!/usr/bin/env python3
"""Cluster benchmark: one node on SQLite, then one node on PostgreSQL, then
two PostgreSQL nodes on one database. Prints, for each backend, durable
creates per second (POST /v1/approvals, each committed before its answer) and
status polls per second (GET /v1/approvals/{id}), and the cross-node long-poll
wake-up: a long poll waiting on node A, the device's answer sent to node B,
the time until A answers (median, p99), while other clients poll status on A
at full speed. Only 127.0.0.1; a throw-away PostgreSQL from
scripts/pg-test-server.sh, stopped when this script ends.

usage: python3 benchmarks/cluster.py --binary .build/release/countersign [--seconds 5] [--threads 8] [--rounds 200]
"""
import argparse, http.client, json, os, statistics, subprocess, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(__file__))
from daemon import PostgresServer, free_port  # noqa: E402

LIMITS = ["--rate-limit", "approvalsPerIntegration=1000000/1", "--rate-limit", "approvalsPerUser=1000000/60",
          "--rate-limit", "statusPollsPerIP=1000000/1", "--rate-limit", "respondPerDevice=1000000/60",
          "--rate-limit", "approvalsPerUserAllIntegrations=1000000/60", "--rate-limit", "enrollmentsPerIntegration=1000000/60"]


def call(connection, method, path, body=None, headers=None):
    data = json.dumps(body).encode() if body is not None else None
    all_headers = {"Content-Type": "application/json"} if data else {}
    all_headers.update(headers or {})
    connection.request(method, path, body=data, headers=all_headers)
    response = connection.getresponse()
    payload = response.read()
    return response.status, (json.loads(payload) if payload else {})


def start(binary, database, key, port, node):
    process = subprocess.Popen(
        # Each node its own metrics listener: two on the default port would not both start.
        [binary, "serve", "--database", database, "--secret-key-file", key, "--listen", f"127.0.0.1:{port}", "--node-id", node,
         "--metrics-listen", f"127.0.0.1:{free_port()}", "--log-level", "error", *LIMITS], stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            if call(http.client.HTTPConnection("127.0.0.1", port, timeout=1), "GET", "/healthz")[0] == 200:
                return process
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"node {node} did not start")


def setup(binary, database, port, users):
    """An integration, `users` users each with one enrolled device; their API keys."""
    added = subprocess.run([binary, "integration", "add", f"bench-{port}", "--database", database], capture_output=True, text=True, check=True)
    api_key = next(line.split(":", 1)[1].strip() for line in added.stdout.splitlines() if line.startswith("API key:"))
    auth = {"Authorization": f"Bearer {api_key}"}
    connection = http.client.HTTPConnection("127.0.0.1", port)
    devices = []
    for index in range(users):
        email = f"user{index}@example.com"
        call(connection, "POST", "/v1/users", {"email": email}, auth)
        code = call(connection, "POST", f"/v1/users/{email}/enrollments", None, auth)[1]["enrollmentCode"]
        login = call(connection, "POST", "/api/mobile/auth/enroll", {"enrollmentCode": code, "deviceName": "phone", "platform": "android"})[1]
        devices.append((email, {"X-API-Key": login["apiKey"]}))
    return auth, devices


def for_seconds(seconds, threads, port, work):
    """Runs work(connection, index) in `threads` threads for `seconds`; operations per second."""
    stop = time.monotonic() + seconds
    counts = [0] * threads

    def loop(thread):
        connection = http.client.HTTPConnection("127.0.0.1", port)
        index = 0
        while time.monotonic() < stop:
            work(connection, thread * 1_000_000 + index)
            index += 1
        counts[thread] = index

    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(loop, range(threads)))
    return sum(counts) / seconds


def one_node(binary, database, key, seconds, threads):
    port = free_port()
    process = start(binary, database, key, port, "bench")
    try:
        auth, devices = setup(binary, database, port, threads)

        def create(connection, index):
            email = devices[index // 1_000_000][0]
            status, _ = call(connection, "POST", "/v1/approvals", {"user": email, "action": "sign_in", "title": "Bench"}, auth)
            assert status == 201, status

        creates = for_seconds(seconds, threads, port, create)
        connection = http.client.HTTPConnection("127.0.0.1", port)
        approval = call(connection, "POST", "/v1/approvals", {"user": devices[0][0], "action": "poll", "title": "Polled", "ttl": 300}, auth)[1]

        def poll(connection, _):
            status, _ = call(connection, "GET", f"/v1/approvals/{approval['approvalId']}", None, auth)
            assert status == 200, status

        polls = for_seconds(seconds, threads, port, poll)
        return creates, polls
    finally:
        process.terminate()
        process.wait()


def cross_node(binary, database, key, rounds, threads):
    ports = [free_port(), free_port()]
    nodes = [start(binary, database, key, ports[0], "a")]
    try:
        nodes.append(start(binary, database, key, ports[1], "b"))
        auth, devices = setup(binary, database, ports[0], 1)
        email, device = devices[0]
        requester = http.client.HTTPConnection("127.0.0.1", ports[0])
        polled = call(requester, "POST", "/v1/approvals", {"user": email, "action": "load", "title": "Load", "ttl": 300}, auth)[1]["approvalId"]
        loading = threading.Event()
        loading.set()
        load_count = [0]

        def load(_):
            connection = http.client.HTTPConnection("127.0.0.1", ports[0])
            while loading.is_set():
                call(connection, "GET", f"/v1/approvals/{polled}", None, auth)
                load_count[0] += 1

        pool = ThreadPoolExecutor(threads)
        for thread in range(threads):
            pool.submit(load, thread)
        approver = http.client.HTTPConnection("127.0.0.1", ports[1])
        wakes = []
        started = time.monotonic()
        for _ in range(rounds):
            created = call(requester, "POST", "/v1/approvals", {"user": email, "action": "sign_in", "title": "Wake"}, auth)[1]
            answer = {}

            def long_poll():
                connection = http.client.HTTPConnection("127.0.0.1", ports[0])
                answer["state"] = call(connection, "GET", f"/v1/approvals/{created['approvalId']}?wait=20", None, auth)[1]["status"]
                answer["at"] = time.monotonic()

            waiter = threading.Thread(target=long_poll)
            waiter.start()
            time.sleep(0.05)
            sent = time.monotonic()
            call(approver, "POST", f"/api/mobile/approvals/{created['approvalId']}/respond",
                 {"decision": "approve", "numberCode": created["numberCode"]}, device)
            waiter.join()
            assert answer["state"] == "approved", answer
            wakes.append((answer["at"] - sent) * 1000)
        elapsed = time.monotonic() - started
        loading.clear()
        pool.shutdown()
        wakes.sort()
        return statistics.median(wakes), wakes[min(len(wakes) - 1, int(len(wakes) * 0.99))], max(wakes), load_count[0] / elapsed
    finally:
        for node in nodes:
            node.terminate()
            node.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=200)
    arguments = parser.parse_args()
    work = tempfile.mkdtemp()
    server = PostgresServer()
    key, new_database = server.key, server.new_database

    print(f"{os.cpu_count()} cores; {arguments.threads} client threads; {arguments.seconds:g} s per measurement")
    for backend, database in [("SQLite", f"{work}/bench.sqlite"), ("PostgreSQL", new_database("bench_one"))]:
        creates, polls = one_node(arguments.binary, database, key, arguments.seconds, arguments.threads)
        print(f"{backend:10}  one node: {creates:7.0f} durable creates/s   {polls:7.0f} status polls/s")
    median, p99, worst, load = cross_node(arguments.binary, new_database("bench_two"), key, arguments.rounds, arguments.threads)
    print(f"PostgreSQL  two nodes: cross-node long-poll wake-up median {median:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms"
          f" ({arguments.rounds} rounds, under {load:.0f} status polls/s on the waiting node)")


if __name__ == "__main__":
    main()
