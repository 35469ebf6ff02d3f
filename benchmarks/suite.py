#!/usr/bin/env python3
"""The benchmark suite: every row of the performance table, measured in one run
on 127.0.0.1, each beside its reference where one exists, printed as one table.

    python3 benchmarks/suite.py                 # builds release, runs every row (about 10 minutes)
    python3 benchmarks/suite.py --skip-build --rows status,wake

Needs wrk (Debian's `wrk`) and, for the push rows, nginx with HTTP/2 (Debian's
`nginx-light`), the fast FCM stub and firebase-admin (`pip install
firebase-admin`); see `--fcm-stub`. A row whose tools are missing prints why
instead of a figure. Limits are raised for the run through the same
`--rate-limit` and cap settings an operator has; bcrypt runs at cost 4.

Rows:
  status     GET …/status/{id} of a pending request ÷ a bare Hummingbird route
             answering "ok" (countersign-bare-route), `wrk -t1 -c64`, same run,
             alternating, per round
  wake       approve sent → waiting long poll answered: p50/p95/p99/max, idle
             and while wrk polls status on 64 connections
  creates    durable creates/s: phone initiate for unknown emails (bcrypt cost
             4) and POST /v1/approvals (no bcrypt), wrk on 16 connections,
             200 users, each create superseding (cancelling) that user's
             previous one, as a repeated login does;
             beside the first, bcrypt's own ceiling: HummingbirdBcrypt's C code
             (benchmarks/bcrypt_ceiling.c) hashing on every core, nothing else;
             beside the second, the durable single-row loop (one Python thread
             committing one approval-shaped row per transaction to SQLite in
             WAL mode, synchronous=FULL, in the daemon's folder), alternated
             over --rounds rounds
  memory     RSS delta ÷ live requests, after creating --live requests
  restart    kill -9 with those requests live, then start → READY=1 (sd_notify),
             and the RSS of the restarted daemon over a fresh one's ÷ live
  longpoll   --held long polls held at once from distinct X-Forwarded-For
             addresses: RSS per waiting poll, and when the last answer
             arrived after the approval (the kernel's receive time of each
             socket; --idle-reader keeps the reader off the CPU while the
             daemon answers); beside it the bare route holding as many
             requests open (its /held route), the framework's own cost, and
             the floor under it: SwiftNIO's HTTP/1 pipeline alone holding as
             many (countersign-bare-route --nio). Twice:
             each poll on a new connection, then (a new daemon) each on a
             connection that carried a plain status poll first
  cluster    the longpoll row's polls (new connections) on node A of two
             nodes sharing a throw-away PostgreSQL database
             (scripts/pg-test-server.sh; needs Debian's `postgresql`), the
             approval sent to node B: RSS per waiting poll on node A, and when
             the last answer arrived (benchmarks/long-polls-cluster.py)
  push       prompts/s through the whole daemon (initiate → fan-out → FCM send)
             to the nginx stub ÷ firebase-admin's send_each/send_each_async to
             the same stub, and ÷ h2load's rate to it with the same body,
             alternated over --rounds rounds (median of each ratio); and the
             same daemon against the stub's early-answer mode (complete 200,
             then RST_STREAM(NO_ERROR))
  sealed     the push row's prompts with no device, half and all devices
             holding a sealing key (each message sealed with HPKE), alternated
             over --rounds rounds: what sealing adds per push
  pushclients  the HTTP/2 client alone: AsyncHTTPClient as the daemon
             configures it for APNs and Web Push, HTTP2PushClient (FCM's:
             frames on the connection, no channel per stream;
             countersign-push-bench clients) and h2load, alternated, same
             stub, body and streams
  pushratio  the push row's prompts through the whole daemon with half the
             devices sealed and with none, beside HTTP2PushClient alone
             sending as many messages of the same body to the same stub,
             alternated over --rounds rounds: the daemon's own cost per push
  pamlogin   an SSH login on loopback through pam_countersign, the phone
             answering at once (scripts/demo-ssh.sh --measure; needs root and
             openssh-server): its time with the phone's part taken out beside
             the same login through pam_permit alone, and the memory of sshd's
             processes for a login waiting in the module
  providers  the same through APNs (HTTP/2 over TLS, normal and early-answer)
             and Web Push (encrypted, VAPID-signed, HTTP/1.1) to the nginx stubs
             in benchmarks/provider-stub/
"""
import argparse, base64, http.client, json, os, platform, re, resource, selectors, shutil, signal, socket, statistics, struct
import subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(__file__))
from daemon import NoPostgres, cpu_ticks, free_port, percentile, rss_kib, wait_for_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSWORD = "correct horse battery"
NEW_PASSWORD = "staple orbit lantern"
RAISED = ["--bcrypt-cost", "4", "--bcrypt-queue", "256",
          "--rate-limit", "statusPollsPerIP=1000000000/1", "--rate-limit", "resetInitiatePerIP=1000000000/1",
          "--rate-limit", "resetInitiatePerEmail=1000000000/1", "--rate-limit", "respondPerDevice=1000000000/1",
          "--rate-limit", "approvalsPerUser=1000000000/1", "--rate-limit", "approvalsPerIntegration=1000000000/1",
          "--rate-limit", "loginFailuresPerIP=1000000000/1", "--rate-limit", "enrollmentsPerIntegration=1000000000/1",
          "--rate-limit", "approvalsPerUserAllIntegrations=1000000000/1", "--rate-limit", "userCreatesPerIntegration=1000000000/1",
          "--max-devices-per-user", "1000"]


def log(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def histogram(values):
    return (f"p50 {statistics.median(values):.2f} · p95 {percentile(values, 95):.2f} · "
            f"p99 {percentile(values, 99):.2f} · max {max(values):.2f} ms")


class Daemon:
    """`countersign serve` on a database in a folder of its own; restartable on the same database."""

    def __init__(self, binary, extra=(), database=None):
        self.binary, self.extra = binary, list(extra)
        self.folder = tempfile.mkdtemp(prefix="countersign-bench-")
        self.database = database or f"{self.folder}/bench.sqlite"
        self.port = free_port()
        self.metrics_port = free_port()
        self.process = None

    def command(self, *arguments, stdin=None):
        return subprocess.run([self.binary, *arguments, "--database", self.database], input=stdin,
                              capture_output=True, text=True, check=True).stdout

    def start(self, notify_socket=None):
        environment = dict(os.environ)
        if notify_socket:
            environment["NOTIFY_SOCKET"] = notify_socket
        self.process = subprocess.Popen(
            [self.binary, "serve", "--database", self.database, "--listen", f"127.0.0.1:{self.port}", "--log-level", "error",
             # /metrics has a listener of its own; the load comes from one address, so no per-address cap.
             "--metrics-listen", f"127.0.0.1:{self.metrics_port}", "--connections-per-address", "0",
             *self.extra], stderr=subprocess.DEVNULL, env=environment)
        if not notify_socket:
            wait_for_port(self.port, self.process)
        return self.process

    def rss_kib(self):
        return rss_kib(self.process.pid)

    def stop(self, kill=False):
        if self.process and self.process.poll() is None:
            if kill:
                self.process.kill()
            else:
                self.process.terminate()
            self.process.wait(timeout=60)

    def close(self):
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()


class Client:
    """One keep-alive connection."""

    def __init__(self, port, timeout=60):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method, path, body=None, headers=None):
        all_headers = dict(headers or {})
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        self.connection.request(method, path, body=None if body is None else json.dumps(body), headers=all_headers)
        response = self.connection.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw or b"{}")
        except ValueError:
            return response.status, {"text": raw.decode(errors="replace")}


def metric_sum(port, name, **labels):
    """Sum of a Prometheus metric's samples whose labels include `labels`."""
    text = Client(port).call("GET", "/metrics")[1].get("text", "")
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{key}="{value}"' in line for key, value in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def wrk(port, path, seconds, connections=64, script=None):
    """Runs wrk; returns (2xx answers per second, wrk's output)."""
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    if script:
        command += ["-s", script]
    output = subprocess.run([*command, f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, check=True).stdout
    total = int(re.search(r"(\d+) requests in", output).group(1))
    duration = float(re.search(r"requests in ([\d.]+)s", output).group(1))
    failed = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output)
    bad = (int(failed.group(1)) if failed else 0)
    if errors:
        bad += sum(int(g) for g in errors.groups()[1:3])
    return (total - bad) / duration, output


def initiate(client, email):
    status, answer = client.call("POST", "/api/mobile/auth/reset/phone/initiate", {"email": email, "newPassword": NEW_PASSWORD})
    assert status == 200, (status, answer)
    return answer


def login(client, email, token=None, push=None, seal_key=None):
    body = {"email": email, "password": PASSWORD, "deviceName": "bench", "platform": "android"}
    if token:
        body["fcmToken"] = token
    if push:
        body["push"] = push
    if seal_key:  # beside `push`, not in it
        body["sealKey"] = seal_key
    status, answer = client.call("POST", "/api/mobile/auth/login", body)
    assert status == 200, (status, answer)
    return answer["apiKey"]


def add_user(daemon, email):
    daemon.command("user", "add", email, "--bcrypt-cost", "4", stdin=PASSWORD + "\n")


# ---------------------------------------------------------------- rows


def row_status(args, rows):
    bare_port = free_port()
    bare = subprocess.Popen([args.bare, str(bare_port)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(bare_port, bare)
        with Daemon(args.binary, RAISED + ["--request-ttl", "3600"]) as daemon:
            daemon.start()
            request = initiate(Client(daemon.port), "nobody@bench.test")["requestId"]
            path = f"/api/mobile/auth/reset/phone/status/{request}"
            ratios, figures = [], []
            for round_ in range(args.rounds):
                reference, _ = wrk(bare_port, path, args.seconds)
                measured, _ = wrk(daemon.port, path, args.seconds)
                ratios.append(measured / reference)
                figures.append(f"{measured:,.0f}/{reference:,.0f}")
                log(f"status round {round_ + 1}: {measured:,.0f} vs bare {reference:,.0f} req/s = {measured / reference:.2f}")
    finally:
        bare.terminate()
        bare.wait()
    rows.append(("status poll ÷ bare route (wrk -t1 -c64)", ", ".join(f"{r:.2f}" for r in ratios) + f" (median {statistics.median(ratios):.2f}; req/s {'; '.join(figures)})",
                 "median ≥ 0.85"))


def wake_rounds(daemon, key, rounds):
    client = Client(daemon.port)
    wake = []
    for _ in range(rounds):
        started = initiate(client, "ana@bench.test")
        request = started["requestId"]
        result = {}

        def poll():
            status, body = Client(daemon.port).call("GET", f"/api/mobile/auth/reset/phone/status/{request}?wait=10")
            result["at"] = time.perf_counter()
            result["status"] = body.get("status")

        thread = threading.Thread(target=poll)
        thread.start()
        time.sleep(0.03)  # the long poll arrives and parks
        sent = time.perf_counter()
        status, answer = client.call("POST", f"/api/mobile/approvals/{request}/respond",
                                     {"decision": "approve", "numberCode": started.get("numberCode")}, headers={"X-API-Key": key})
        thread.join()
        assert status == 200 and result.get("status") == "approved", (status, answer, result)
        wake.append((result["at"] - sent) * 1000)
    return wake


def row_wake(args, rows):
    with Daemon(args.binary, RAISED + ["--request-ttl", "3600"]) as daemon:
        add_user(daemon, "ana@bench.test")
        daemon.start()
        key = login(Client(daemon.port), "ana@bench.test")
        idle = wake_rounds(daemon, key, args.wake_rounds)
        log(f"wake idle: {histogram(idle)}")
        rows.append(("approve → long poll answered, idle", histogram(idle), "p99 ≤ 5 ms"))

        request = initiate(Client(daemon.port), "nobody@bench.test")["requestId"]
        # wrk polls in the background for as long as the rounds take.
        process = subprocess.Popen(["wrk", "-t1", "-c64", "-d600s", f"http://127.0.0.1:{daemon.port}/api/mobile/auth/reset/phone/status/{request}"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(1)
            loaded = wake_rounds(daemon, key, args.wake_rounds)
        finally:
            process.send_signal(signal.SIGINT)
            process.wait()
        log(f"wake under load: {histogram(loaded)}")
        rows.append(("same, while wrk polls status on 64 connections", histogram(loaded), "p99 ≤ 15 ms"))


CREATE_LUA = """
counter = 0
request = function()
  counter = counter + 1
  local body = string.format('{"email":"u-RUN-%d@bench.test","newPassword":"staple orbit lantern"}', counter)
  return wrk.format("POST", "/api/mobile/auth/reset/phone/initiate", {["Content-Type"] = "application/json"}, body)
end
"""

APPROVALS_LUA = """
counter = 0
request = function()
  counter = counter + 1
  local body = string.format('{"user":"user%d@bench.test","action":"bench.RUN","title":"Benchmark","body":"one approval"}',
                             counter % USERS)
  return wrk.format("POST", "/v1/approvals", {["Content-Type"] = "application/json", ["Authorization"] = "Bearer KEY"}, body)
end
"""


def lua(folder, name, text):
    """Writes a wrk script; RUN becomes a token of its own, so no two runs make the same emails or actions."""
    path = os.path.join(folder, name)
    with open(path, "w") as file:
        file.write(text.replace("RUN", os.urandom(6).hex()))
    return path


DURABLE_LOOP_SCHEMA = """
CREATE TABLE approval_requests (
    id TEXT PRIMARY KEY NOT NULL, user_id TEXT, subject TEXT NOT NULL, action TEXT NOT NULL, state TEXT NOT NULL,
    created_at REAL NOT NULL, expires_at REAL NOT NULL, completion_window REAL NOT NULL, complete_by REAL,
    updated_at REAL NOT NULL, number_code_salt TEXT, number_code_hash TEXT, new_password_hash TEXT,
    requester_ip TEXT NOT NULL, requester_user_agent TEXT, responding_device_id TEXT, integration_id TEXT, prompt TEXT);
CREATE INDEX approvals_live ON approval_requests(state) WHERE state IN ('pending','approved');
CREATE INDEX approvals_by_subject ON approval_requests(subject, action, state);
"""


def durable_loop(folder, seconds):
    """The creates row's reference: one Python thread committing one approval-shaped row per
    transaction to a SQLite file in WAL mode with synchronous=FULL (one fsync per row), as
    long as the daemon's run. Returns transactions per second."""
    import sqlite3
    path = os.path.join(folder, "loop.sqlite3")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = FULL")
    db.executescript(DURABLE_LOOP_SCHEMA)
    prompt = json.dumps({"integrationID": "i" * 32, "integrationName": "bench", "userEmail": "user1@bench.test",
                         "title": "Benchmark", "body": "one approval", "context": {}})
    count, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds:
        now = time.time()
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO approval_requests VALUES (?, ?, ?, ?, 'pending', ?, ?, 60, NULL, ?, ?, ?, NULL, '127.0.0.1', "
                   "'wrk', NULL, ?, ?)", (os.urandom(16).hex(), f"u{count % 200}", f"user:u{count % 200}", f"bench.{count}",
                                          now, now + 60, now, os.urandom(16).hex(), os.urandom(32).hex(), "i" * 32, prompt))
        db.execute("COMMIT")
        count += 1
    took = time.perf_counter() - began
    db.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    return count / took


def row_creates(args, rows):
    with Daemon(args.binary, RAISED) as daemon:
        daemon.start()
        script = lua(daemon.folder, "create.lua", CREATE_LUA)
        phone, _ = wrk(daemon.port, "/", args.seconds, connections=16, script=script)
        log(f"creates (phone initiate, bcrypt 4): {phone:,.0f}/s")
    hashes = bcrypt_ceiling(args)

    with Daemon(args.binary, RAISED) as daemon:
        daemon.start()
        added = daemon.command("integration", "add", "bench")
        key = next(line.split()[-1] for line in added.splitlines() if line.startswith("API key:"))
        api = Client(daemon.port)
        users = 200
        for index in range(users):
            email = f"user{index}@bench.test"
            api.call("POST", "/v1/users", {"email": email}, headers={"Authorization": f"Bearer {key}"})
            _, issued = api.call("POST", f"/v1/users/{email}/enrollments", headers={"Authorization": f"Bearer {key}"})
            status, _ = api.call("POST", "/api/mobile/auth/enroll",
                                 {"enrollmentCode": issued["enrollmentCode"], "deviceName": "bench", "platform": "android"})
            assert status == 200, status
        script = lua(daemon.folder, "approvals.lua", APPROVALS_LUA.replace("USERS", str(users)).replace("KEY", key))
        # Alternated with the durable loop, same folder (same file system), same minutes: the median of each.
        rates, loops, costs, busy = [], [], [], []
        for round in range(args.rounds):
            cpu, machine = process_cpu_seconds(daemon.process.pid), machine_ticks()
            rate, output = wrk(daemon.port, "/", args.seconds, connections=16, script=script)
            cpu, machine = process_cpu_seconds(daemon.process.pid) - cpu, [b - a for a, b in zip(machine, machine_ticks())]
            created = rate * float(re.search(r"requests in ([\d.]+)s", output).group(1))
            loop = durable_loop(daemon.folder, args.seconds)
            rates.append(rate)
            loops.append(loop)
            costs.append(cpu / max(created, 1.0) * 1e6)
            busy.append(1 - machine[1] / max(machine[0], 1))
            log(f"creates (POST /v1/approvals) round {round + 1}: {rate:,.0f}/s; the durable single-row loop: {loop:,.0f} tx/s "
                f"({rate / loop:.2f}×); the daemon's CPU {costs[-1]:.0f} µs per create, the machine {busy[-1]:.0%} busy")
        rate, loop = statistics.median(rates), statistics.median(loops)
        ratio = statistics.median(r / l for r, l in zip(rates, loops))
    # Both runs fill every core: a phone create costs about one bcrypt hash plus
    # one create without bcrypt, so together they bound the phone rate.
    ceiling = ""
    if hashes and rate > 0:
        bound = 1 / (1 / hashes + 1 / rate)
        ceiling = (f" (bcrypt cost 4 alone, every core, no HTTP: {hashes:,.0f} hashes/s; with the /v1 create's own cost"
                   f" the cores allow about {bound:,.0f}/s; reached: about {phone / bound:.0%})")
        log(f"phone creates bound by bcrypt + a /v1 create: {bound:,.0f}/s")
    rows.append(("durable creates/s, phone initiate (unknown emails, bcrypt 4, 16 conn.)", f"{phone:,.0f}{ceiling}", "≥ 2,000"))
    per_round = "; ".join(f"{r:,.0f} vs {l:,.0f}" for r, l in zip(rates, loops))
    rows.append(("durable creates/s, POST /v1/approvals (no bcrypt, 16 conn.) ÷ one thread committing one row per transaction "
                 "(SQLite, WAL, synchronous=FULL), alternated", f"median {ratio:.2f}× ({rate:,.0f}/s vs {loop:,.0f} tx/s; per round: {per_round}); "
                 f"the daemon's CPU per create (user + system, every thread) median {statistics.median(costs):.0f} µs, "
                 f"the machine {statistics.median(busy):.0%} busy while wrk ran", "≥ 1.5×"))


def process_cpu_seconds(pid):
    """User and system CPU seconds a process has used so far, every thread."""
    return cpu_ticks(pid) / os.sysconf("SC_CLK_TCK")


def machine_ticks():
    """(all, idle + iowait) clock ticks of every core so far (/proc/stat)."""
    with open("/proc/stat") as file:
        values = [int(value) for value in file.readline().split()[1:]]
    return sum(values), values[3] + values[4]


def bcrypt_ceiling(args):
    """bcrypt cost 4 hashes/s alone on every core, nothing else running (None when not measured)."""
    source = os.path.join(ROOT, ".build", "checkouts", "hummingbird-auth", "Sources", "CBcrypt")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not (compiler and os.path.isdir(source)):
        return None
    folder = tempfile.mkdtemp(prefix="countersign-bcrypt-")
    binary = os.path.join(folder, "bcrypt-ceiling")
    try:
        subprocess.run([compiler, "-O2", "-pthread", "-I", os.path.join(source, "include"), os.path.join(ROOT, "benchmarks", "bcrypt_ceiling.c"),
                        os.path.join(source, "bcrypt.c"), os.path.join(source, "blf.c"), "-o", binary], check=True, capture_output=True)
        threads = min(os.cpu_count() or 1, 256)
        output = subprocess.run([binary, "4", str(threads), str(min(args.seconds, 5))], check=True, capture_output=True, text=True).stdout.strip()
    except subprocess.CalledProcessError as error:
        log(f"bcrypt ceiling not measured: {error}")
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    log(f"bcrypt cost 4 alone: {output}")
    found = re.match(r"(\d+) hashes/s", output)
    return float(found.group(1)) if found else None


def notify_listener():
    """A datagram socket standing in for systemd's notification socket."""
    path = os.path.join(tempfile.mkdtemp(prefix="countersign-notify-"), "notify")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)
    return listener, path


def wait_ready(listener, seconds=120):
    listener.settimeout(seconds)
    while True:
        message = listener.recv(4096).decode()
        if "READY=1" in message:
            return time.perf_counter()


def row_memory_and_restart(args, rows):
    with Daemon(args.binary, RAISED + ["--request-ttl", "3600"]) as daemon:
        daemon.start()
        time.sleep(1)
        before = daemon.rss_kib()
        live = 0
        while live < args.live:
            wrk(daemon.port, "/", 10, connections=16, script=lua(daemon.folder, "create.lua", CREATE_LUA))
            live = int(metric_sum(daemon.metrics_port, "countersign_live_requests", state="pending"))
            log(f"memory: {live:,} live requests")
        time.sleep(1)
        after = daemon.rss_kib()
        per = (after - before) * 1024 / live
        log(f"memory: RSS {before / 1024:.0f} → {after / 1024:.0f} MiB for {live:,} live: {per:,.0f} bytes each")
        rows.append(("memory per live request (RSS delta ÷ live)", f"{per / 1024:.2f} KiB ({live:,} live; RSS {before / 1024:.0f} → {after / 1024:.0f} MiB)", "≤ 1 KiB"))

        daemon.stop(kill=True)
        listener, path = notify_listener()
        began = time.perf_counter()
        daemon.start(notify_socket=path)
        ready = wait_ready(listener)
        wait_for_port(daemon.port, daemon.process)
        reloaded = int(metric_sum(daemon.metrics_port, "countersign_live_requests", state="pending"))
        rss = daemon.rss_kib()
        loaded = (rss - before) * 1024 / reloaded
        log(f"restart: READY after {ready - began:.2f} s with {reloaded:,} live (RSS {rss / 1024:.0f} MiB: {loaded:,.0f} bytes each)")
        listener.close()
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        rows.append(("kill -9, restart → READY", f"{ready - began:.2f} s with {reloaded:,} live (RSS after {rss / 1024:.0f} MiB)", "≤ 2 s with 100k"))
        rows.append(("memory per live request after that restart (RSS − a fresh daemon's) ÷ live",
                     f"{loaded / 1024:.2f} KiB ({reloaded:,} loaded; RSS {before / 1024:.0f} → {rss / 1024:.0f} MiB)", "≤ 1 KiB"))


# Connections from one source address to one port are capped by the ephemeral port range (28,232 ports by default):
# past this many, the next connections come from the next loopback address (127.0.0.2, …), all on this machine.
PER_SOURCE = 25_000
IP_BIND_ADDRESS_NO_PORT = 24  # Linux


def open_held(port, held, request_line):
    """Opens `held` connections, each sending `request_line(index)`, from 8 threads, at most PER_SOURCE from each
    loopback source address (127.0.0.1, then 127.0.0.2, …); returns the sockets."""
    sockets = []

    def open_some(indices):
        for index in indices:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            # The port is chosen at connect, for this destination, as without a bind (else bind takes one of its own).
            s.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
            s.bind((f"127.0.0.{1 + index // PER_SOURCE}", 0))
            s.connect(("127.0.0.1", port))
            s.sendall(request_line(index).encode())
            sockets.append(s)

    openers = [threading.Thread(target=open_some, args=(range(k, held, 8),)) for k in range(8)]
    for opener in openers:
        opener.start()
    for opener in openers:
        opener.join()
    return sockets


def bare_held(args, held, nio=False):
    """The framework's own cost of a waiting request: the bare Hummingbird route
    holding `held` requests until they are released; with `nio`, the floor under
    it, SwiftNIO's HTTP/1 pipeline alone (countersign-bare-route --nio). Returns
    (KiB each, seconds from the release to the last answer's arrival)."""
    port = free_port()
    bare = subprocess.Popen([args.bare, str(port)] + (["--nio"] if nio else []), stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(port, bare)
        time.sleep(1)
        before = rss_kib(bare.pid)
        sockets = open_held(port, held, lambda _: "GET /held?until=released HTTP/1.1\r\nHost: localhost\r\n\r\n")
        time.sleep(2)
        after = rss_kib(bare.pid)

        def release():
            status, answer = Client(port).call("POST", "/release")
            assert answer == held, answer  # how many it released
            return status, answer

        _, answered, _, _, arrived = answered_after(sockets, release, idle=args.idle_reader)
        assert answered == held, answered
        return (after - before) / held, arrived
    finally:
        bare.kill()
        bare.wait()


def held_polls(args, held, served_first):
    """A daemon holding `held` long polls, each on its own connection from its own
    X-Forwarded-For address; with `served_first`, each connection first carries
    a plain status poll. Returns (RSS KiB before, after, answered early,
    answered, approved, seconds from the approval to the last answer)."""
    extra = RAISED + ["--request-ttl", "3600", "--trusted-proxy", "127.0.0.0/8", "--long-polls-per-address", "1000000",
                      "--long-polls-max", "1000000", "--idle-timeout", "120"]
    with Daemon(args.binary, extra) as daemon:
        add_user(daemon, "ana@bench.test")
        daemon.start()
        key = login(Client(daemon.port), "ana@bench.test")
        started = initiate(Client(daemon.port), "ana@bench.test")
        request = started["requestId"]
        time.sleep(1)
        before = daemon.rss_kib()
        opened = time.perf_counter()

        def poll(index, wait=30):
            address = f"10.{index >> 16 & 255}.{index >> 8 & 255}.{index & 255}"
            return (f"GET /api/mobile/auth/reset/phone/status/{request}?wait={wait} HTTP/1.1\r\n"
                    f"Host: localhost\r\nX-Forwarded-For: {address}\r\n\r\n")

        if served_first:
            sockets = open_held(daemon.port, held, lambda index: poll(index, wait=0))
            for s in sockets:
                s.settimeout(30)
                answer = s.recv(4096)
                assert b'"pending"' in answer, answer[:200]
            time.sleep(1)
            log(f"longpoll: RSS with {held:,} connections open, each after its plain poll: {daemon.rss_kib() / 1024:.0f} MiB")
            for index, s in enumerate(sockets):
                s.sendall(poll(index).encode())
        else:
            sockets = open_held(daemon.port, held, poll)
        log(f"longpoll: {held:,} sent in {time.perf_counter() - opened:.1f} s" + (" (each after a plain poll)" if served_first else ""))
        # Every poll parked: waiting count from the broker's gauge is not exported, so wait until none is answered early.
        time.sleep(2)
        after = daemon.rss_kib()
        early, answered, approved, took, arrived = answered_after(
            sockets, lambda: Client(daemon.port).call("POST", f"/api/mobile/approvals/{request}/respond",
                                                      {"decision": "approve", "numberCode": started.get("numberCode")},
                                                      headers={"X-API-Key": key}), idle=args.idle_reader)
        return before, after, early, answered, approved, took, arrived


SO_TIMESTAMPNS = 35  # Linux: each read's kernel receive time (struct timespec), as SCM_TIMESTAMPNS


def answered_after(sockets, approve, idle=0):
    """Counts the held polls answered already, calls `approve` (which must answer
    200), then reads every socket's answer (30 s at most) and closes them. With
    `idle`, the reader sleeps that many seconds after the approval before it
    reads, so that it takes no CPU from the daemon while the polls are answered.
    Returns (answered early, answered, approved, seconds from the approval to
    the last answer read, seconds from the approval to the last answer's arrival
    by the kernel's receive time of each socket)."""
    selector = selectors.DefaultSelector()
    for s in sockets:
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        selector.register(s, selectors.EVENT_READ)
    early = sum(1 for _ in selector.select(timeout=0))
    sent, sent_wall = time.perf_counter(), time.time()
    status, _ = approve()
    assert status == 200, status
    if idle:
        time.sleep(idle)
    answered, approved, last, arrived = 0, 0, sent, sent_wall
    arrivals = []
    while answered < len(sockets) and time.perf_counter() < sent + 30:
        for selected, _ in selector.select(timeout=1):
            data, ancillary, _, _ = selected.fileobj.recvmsg(4096, socket.CMSG_SPACE(16))
            selector.unregister(selected.fileobj)
            answered += 1
            approved += b'"approved"' in data
            last = time.perf_counter()
            for level, kind, stamp in ancillary:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    seconds, nanoseconds = struct.unpack("qq", stamp[:16])
                    arrived = max(arrived, seconds + nanoseconds / 1e9)
                    arrivals.append(seconds + nanoseconds / 1e9 - sent_wall)
    for s in sockets:
        s.close()
    if arrivals:
        arrivals.sort()
        log("answers arrived after the approval: " + ", ".join(
            f"{name} {arrivals[min(len(arrivals) - 1, len(arrivals) * q // 100)]:.2f} s" for name, q in (("first", 0), ("median", 50), ("p90", 90), ("last", 100))))
    return early, answered, approved, last - sent, arrived - sent_wall


def raise_open_files(held):
    """Raises this process's open files limit (inherited by the servers it starts) for `held` connections and
    returns how many it can hold: past the hard limit only with the privilege to raise it (root), else fewer."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = held + 1000
    if wanted > hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
            return held
        except (ValueError, OSError):
            log(f"longpoll: the open files limit is {hard:,} and cannot be raised here: {hard - 500:,} held, not {held:,}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return min(held, hard - 500)


def row_longpoll(args, rows):
    held = raise_open_files(args.held)
    reference, bare_arrived = bare_held(args, held)
    log(f"longpoll: the bare route holding {held:,} requests: {reference:.1f} KiB each; all released at once, the last "
        f"answer arrived {bare_arrived:.2f} s after the release")
    floor, floor_arrived = bare_held(args, held, nio=True)
    log(f"longpoll: SwiftNIO's HTTP/1 pipeline alone holding {held:,} requests: {floor:.1f} KiB each; the last answer "
        f"arrived {floor_arrived:.2f} s after the release")
    for served_first in (False, True):
        before, after, early, answered, approved, took, arrived = held_polls(args, held, served_first)
        per = (after - before) * 1024 / held
        log(f"longpoll: RSS {before / 1024:.0f} → {after / 1024:.0f} MiB: {per / 1024:.1f} KiB each; {early} answered early; "
            f"{answered:,} answered ({approved:,} approved), the last read {took:.2f} s and arrived {arrived:.2f} s after the approval")
        what = (f"{held:,} long polls held at once, each on a connection that carried a plain poll first" if served_first
                else f"{held:,} long polls held at once, each on a new connection")
        rows.append((what, f"{per / 1024:.1f} KiB each (RSS {before / 1024:.0f} → {after / 1024:.0f} MiB; "
                     f"the bare route holding as many: {reference:.1f} KiB each, its last answer {bare_arrived:.2f} s "
                     f"after their release; the floor, SwiftNIO's HTTP/1 pipeline alone: {floor:.1f} KiB each, "
                     f"{per / 1024 - floor:.1f} KiB below the daemon's, its last answer {floor_arrived:.2f} s after); "
                     f"{approved:,}/{held:,} answered approved ({early} early), the last arrived after {arrived:.2f} s"
                     + (f" (the reader idle {args.idle_reader:g} s)" if args.idle_reader else f" and was read after {took:.2f} s"),
                     "≤ 8 KiB each; all within 0.5 s"))


def start_stub(stub, mode=None):
    folder = tempfile.mkdtemp(prefix="countersign-fcm-stub-")
    environment = dict(os.environ)
    if mode:
        environment["MODE"] = mode
    # nginx stays in the background holding start.sh's output: no pipe to wait on.
    subprocess.run([os.path.join(stub, "start.sh"), folder], env=environment, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return folder


def stop_stub(folder):
    try:
        with open(os.path.join(folder, "nginx.pid")) as file:
            os.kill(int(file.read().strip()), signal.SIGTERM)
    except (OSError, ValueError):
        pass
    time.sleep(0.5)
    shutil.rmtree(folder, ignore_errors=True)


def daemon_push_rate(args, folder, provider_flags=None, address=None, database=None, more=(), after=None, seal=None):
    """Prompts/s through the whole daemon to a stub: FCM by default, else the
    flags of another provider and the push address of each user's device. A
    `database` URL and `more` flags run the daemon on another database; `after`
    is called with the daemon once the last message was counted sent; `seal`
    gives a device's sealing key (or None), checked stored before the run."""
    extra = RAISED + ["--request-ttl", "3600"] + (provider_flags or [
        "--fcm-service-account", f"{folder}/sa.json", "--fcm-ca-file", f"{folder}/ca.pem", "--fcm-endpoint", "https://127.0.0.1:18443"])
    address = address or (lambda index, device: {"provider": "fcm", "token": f"bench-token-{index}-{device}-" + "x" * 120})
    users, devices = args.push_users, args.push_devices
    with Daemon(args.binary, extra + list(more), database=database) as daemon:
        for index in range(users):
            add_user(daemon, f"user{index}@bench.test")
        daemon.start()

        def enrol(index):
            client = Client(daemon.port)
            for device in range(devices):
                key = seal(index, device) if seal else None
                api_key = login(client, f"user{index}@bench.test", push=address(index, device), seal_key=key)
                if key:
                    status, shown = client.call("GET", "/api/mobile/device", headers={"X-API-Key": api_key})
                    assert status == 200 and shown.get("sealKey"), (status, shown)

        threads = [threading.Thread(target=enrol, args=(index,)) for index in range(users)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Each sign-in sends the user's other devices a `device_added` notice: let them all go out first.
        settled, last = time.perf_counter(), -1
        while time.perf_counter() - settled < 1.5:
            total = metric_sum(daemon.metrics_port, "countersign_pushes_total")
            if total != last:
                settled, last = time.perf_counter(), total
            time.sleep(0.1)
        expected = users * devices * args.push_rounds
        base = metric_sum(daemon.metrics_port, "countersign_pushes_total", outcome="sent")
        began = time.perf_counter()

        def requester(index):
            client = Client(daemon.port)
            for _ in range(args.push_rounds):
                initiate(client, f"user{index}@bench.test")

        threads = [threading.Thread(target=requester, args=(index,)) for index in range(users)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Prompts, plus the resolution notice each superseded request sends to the same devices.
        expected += users * devices * (args.push_rounds - 1)
        sent, last_change, previous = 0, time.perf_counter(), -1
        while sent < expected and time.perf_counter() - last_change < 5:
            sent = metric_sum(daemon.metrics_port, "countersign_pushes_total", outcome="sent") - base
            if sent != previous:
                previous, last_change = sent, time.perf_counter()
            time.sleep(0.05)
        elapsed = last_change - began
        others = metric_sum(daemon.metrics_port, "countersign_pushes_total") - base - sent
        if others:
            breakdown = {outcome: metric_sum(daemon.metrics_port, "countersign_pushes_total", outcome=outcome)
                         for outcome in ("dropped", "rejected", "token_dead", "auth_error", "misconfigured", "disabled")}
            log(f"push outcomes other than sent, since the start: {breakdown}")
        if after:
            after(daemon)
        return sent / elapsed, int(sent), expected, int(others)


def users_devices_rounds(args):
    return args.push_users * args.push_devices * args.push_rounds


def h2load_stub_rate(folder, messages):
    """The stub's own rate to h2load (Debian's nghttp2-client) sending a prompt-sized body: the machine's ceiling
    for this stub, with a client that batches its writes (None when h2load is missing)."""
    if not shutil.which("h2load"):
        log("h2load not installed (apt-get install nghttp2-client): the stub's ceiling is not measured")
        return None
    body = prompt_body(folder)
    output = subprocess.run(["h2load", "-n", str(messages), "-c", "2", "-m", "32", "-H", "Authorization: Bearer ya29.stub-token",
                             "-H", "Content-Type: application/json; charset=utf-8", "-d", body,
                             "https://127.0.0.1:18443/v1/projects/bench/messages:send"], capture_output=True, text=True, timeout=300).stdout
    found = re.search(r"finished in [\d.]+m?s, ([\d.]+) req/s", output)
    succeeded = re.search(r"(\d+) succeeded", output)
    if not (found and succeeded and int(succeeded.group(1)) == messages):
        log(f"h2load did not complete: {output[-300:]}")
        return None
    log(f"h2load to the stub: {float(found.group(1)):,.0f}/s")
    return float(found.group(1))


def prompt_body(folder):
    """A prompt-sized FCM request body in a file in `folder` (h2load's and the client comparison's)."""
    body = os.path.join(folder, "h2load-body.json")
    prompt = {"message": {"token": "bench-token-0-0-" + "x" * 120,
                          "data": {"type": "approval_request", "requestId": "r" * 40, "action": "password_reset",
                                   "expiresAt": "2026-01-01T00:00:00Z"},
                          "android": {"priority": "HIGH", "ttl": "60s"},
                          "apns": {"headers": {"apns-priority": "10", "apns-expiration": "1767225600"},
                                   "payload": {"aps": {"alert": {"title": "Approve password reset?",
                                                                 "body": "Someone asked to reset the password of ana@example.com"},
                                                       "category": "APPROVAL_REQUEST"}}}}}
    with open(body, "w") as file:
        json.dump(prompt, file)
    return body


def firebase_admin_rate(stub, folder, messages):
    """firebase-admin's best mode (send_each or send_each_async) to the stub, in messages/s (0 when it failed)."""
    best = 0.0
    try:
        output = subprocess.run([sys.executable, os.path.join(stub, "bench_firebase_admin.py"), "--stub", folder, "-n", str(messages)],
                                capture_output=True, text=True, check=True, timeout=600).stdout
        for line in output.splitlines():
            log(line)
            found = re.search(r"= (\d+) msg/s", line)
            if found:
                best = max(best, float(found.group(1)))
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        log(f"firebase-admin failed: {error}")
    return best


def row_push(args, rows):
    target = "median ≥ 15× firebase-admin and ≥ 0.5 of h2load"
    stub = args.fcm_stub
    if not (stub and os.path.exists(os.path.join(stub, "start.sh"))):
        rows.append(("push", f"not measured: no FCM stub at {stub}", target))
        return
    if not shutil.which("nginx"):
        rows.append(("push", "not measured: nginx is not installed (apt-get install nginx-light)", target))
        return
    # Rounds alternate the reference, the daemon and h2load against one stub, so that a slow minute of the
    # machine falls on all three; each round's ratios are taken within the round.
    folder = start_stub(stub)
    measured = []
    try:
        for round in range(args.rounds):
            reference = firebase_admin_rate(stub, folder, args.admin_messages)
            rate, sent, expected, others = daemon_push_rate(args, folder)
            log(f"push round {round + 1}: {rate:,.0f} msg/s ({sent:,} of {expected:,} sent, {others} other outcomes)")
            ceiling = h2load_stub_rate(folder, messages=users_devices_rounds(args))
            measured.append((rate, reference, ceiling, sent, expected, others))
    finally:
        stop_stub(folder)
    admin = [rate / reference for rate, reference, _, _, _, _ in measured if reference]
    of_h2load = [rate / ceiling for rate, _, ceiling, _, _, _ in measured if ceiling]
    rate = statistics.median(m[0] for m in measured)
    sent, expected, others = sum(m[3] for m in measured), sum(m[4] for m in measured), sum(m[5] for m in measured)
    figures = "; ".join(f"{m[0]:,.0f} vs {m[1]:,.0f}" + (f" vs {m[2]:,.0f}" if m[2] else "") for m in measured)
    summary = (f"× firebase-admin: {', '.join(f'{r:.1f}' for r in admin)} (median {statistics.median(admin):.1f})" if admin
               else "no firebase-admin figure")
    summary += (f"; ÷ h2load: {', '.join(f'{r:.2f}' for r in of_h2load)} (median {statistics.median(of_h2load):.2f})" if of_h2load
                else "; no h2load figure")
    rows.append(("push msg/s, whole daemon vs firebase-admin (best mode) vs h2load (2 conn. × 32 streams, same body), same stub",
                 f"{summary} (msg/s per round, daemon vs firebase-admin vs h2load: {figures}; {sent:,}/{expected:,} sent, {others} not)",
                 target))

    folder = start_stub(stub, mode="early-answer")
    try:
        early, sent, expected, others = daemon_push_rate(args, folder)
        log(f"push, early answer + RST_STREAM(NO_ERROR): {early:,.0f} msg/s ({sent:,} of {expected:,} sent, {others} other outcomes)")
    finally:
        stop_stub(folder)
    rows.append(("push msg/s, stub answers early then RST_STREAM(NO_ERROR)",
                 f"{early:,.0f} ({sent:,}/{expected:,} sent, {others} not; {early / rate:.2f} of the normal stub)", "same rate, nothing dropped"))


def seal_key():
    """A device's sealing key as the daemon takes it (`sealKey`): base64url of an uncompressed P-256 point,
    made by cryptography. One for every sealed device: the daemon seals each message afresh all the same."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    point = ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)
    return base64.urlsafe_b64encode(point).decode().rstrip("=")


def row_sealed(args, rows):
    """Sealing's cost per push, two ways in one run: the push row's prompts through the whole daemon with no
    device sealed, half, and all (HPKE per message), in alternated rounds against one stub; and sealing alone
    on one core (countersign-push-bench seal: one ephemeral key, one ECDH, HKDF, AES-GCM per message), set
    against the daemon's time per push at its readable rate."""
    target = "sealing's cost per push shown (sealed-push.md); push through the daemon unchanged otherwise"
    stub = args.fcm_stub
    if not (stub and os.path.exists(os.path.join(stub, "start.sh"))) or not shutil.which("nginx") or not os.path.exists(args.push_bench):
        rows.append(("push, sealed vs readable", "not measured: needs the FCM stub, nginx and the countersign-push-bench release build", target))
        return
    key = seal_key()

    def sealing(share):
        sealed = int(args.push_devices * share)
        return lambda index, device: key if device < sealed else None

    folder = start_stub(stub)
    rates = {0.0: [], 0.5: [], 1.0: []}
    try:
        for round in range(args.rounds):
            for share in rates:
                rate, sent, expected, others = daemon_push_rate(args, folder, seal=sealing(share))
                log(f"sealed {share:.0%}, round {round + 1}: {rate:,.0f} msg/s ({sent:,} of {expected:,} sent, {others} other outcomes)")
                rates[share].append(rate)
    finally:
        stop_stub(folder)
    output = subprocess.run([args.push_bench, "seal", "--rounds", str(args.rounds)], capture_output=True, text=True, timeout=600)
    seals = [float(found) for found in re.findall(r"seal ([0-9.]+) µs each", output.stdout)]
    if output.returncode != 0 or not seals:
        raise RuntimeError(f"countersign-push-bench seal: {(output.stdout + output.stderr)[-300:]}")
    log(f"sealing alone: {output.stdout.strip()}")
    seal = statistics.median(seals)
    plain, half, whole = (statistics.median(rates[share]) for share in (0.0, 0.5, 1.0))
    per_push = 1e6 / plain * os.cpu_count()  # core-µs per readable push at its rate (every core: daemon, stub, client)
    spread = (min(min(r) for r in rates.values()), max(max(r) for r in rates.values()))
    per_round = "; ".join(f"{a:,.0f} / {b:,.0f} / {c:,.0f}" for a, b, c in zip(rates[0.0], rates[0.5], rates[1.0]))
    rows.append(("push msg/s through the whole daemon: no device sealed / half / all (same stub, alternated rounds); sealing alone",
                 f"median {plain:,.0f} / {half:,.0f} / {whole:,.0f} ({whole / plain:.2f} of readable when all are sealed; every round "
                 f"within {spread[0]:,.0f}–{spread[1]:,.0f}; per round: {per_round}); sealing alone {seal:.0f} µs per message on one "
                 f"core (median of {', '.join(f'{x:.0f}' for x in seals)}): {seal / per_push:.0%} of the {per_push:.0f} core-µs "
                 f"each readable push takes at that rate", target))


def push_client_rates(args, folder, body, messages):
    """One round of countersign-push-bench clients against the stub in `folder`: (AsyncHTTPClient, HTTP2PushClient) msg/s."""
    output = subprocess.run([args.push_bench, "clients", "--ca", os.path.join(folder, "ca.pem"), "--body", body,
                             "--messages", str(messages), "--rounds", "1"], capture_output=True, text=True, timeout=600)
    found = re.search(r"AsyncHTTPClient (\d+)/s, HTTP2PushClient (\d+)/s", output.stdout)
    if not found:
        raise RuntimeError(f"countersign-push-bench clients: {(output.stdout + output.stderr)[-300:]}")
    return float(found.group(1)), float(found.group(2))


def row_push_clients(args, rows):
    """The HTTP/2 client alone, without the daemon: AsyncHTTPClient as PushSetup configures it (APNs, Web Push,
    the token exchange) against HTTP2PushClient, the daemon's FCM client (countersign-push-bench clients), and
    h2load, alternated per round, each with 2 connections × 32 streams and the same body to the same stub."""
    what = "push client alone, msg/s: AsyncHTTPClient vs HTTP2PushClient (FCM's) vs h2load (2 conn. × 32 streams, same body)"
    if not (shutil.which("nginx") and shutil.which("h2load") and os.path.exists(args.push_bench)):
        rows.append((what, "not measured: needs nginx, h2load and the countersign-push-bench release build", "where target 3's time goes"))
        return
    messages = users_devices_rounds(args) + args.push_users * args.push_devices * (args.push_rounds - 1)
    folder = start_stub(args.fcm_stub)
    measured = []
    try:
        body = prompt_body(folder)
        for round in range(args.rounds):
            async_http_client, frames = push_client_rates(args, folder, body, messages)
            ceiling = h2load_stub_rate(folder, messages)
            log(f"push clients round {round + 1}: AsyncHTTPClient {async_http_client:,.0f}/s, HTTP2PushClient {frames:,.0f}/s")
            measured.append((async_http_client, frames, ceiling or 0.0))
    finally:
        stop_stub(folder)
    ahc, frames, h2 = (statistics.median(m[i] for m in measured) for i in range(3))
    figures = "; ".join(f"{a:,.0f} vs {f:,.0f} vs {h:,.0f}" for a, f, h in measured)
    rows.append((what, f"median {ahc:,.0f} vs {frames:,.0f} vs {h2:,.0f} ({ahc / h2:.2f} and {frames / h2:.2f} of h2load; per round: {figures}; "
                       f"{messages:,} sends each)", "where target 3's time goes"))


def row_push_vs_client(args, rows):
    """Issue 57's push target in one run: prompts/s through the whole daemon (each push audited) with no device
    sealed and with half of them sealed, beside HTTP2PushClient alone (the daemon's FCM client, no daemon around
    it: countersign-push-bench clients) sending as many messages of the same body to the same stub, alternated
    per round; the ratios are taken within each round."""
    what = ("push msg/s through the whole daemon (half the devices sealed / none) ÷ HTTP2PushClient alone "
            "(same stub, same message count, alternated)")
    target = "median ≥ 0.7 with half sealed"
    if not (shutil.which("nginx") and os.path.exists(args.push_bench) and os.path.exists(os.path.join(args.fcm_stub, "start.sh"))):
        rows.append((what, "not measured: needs nginx, the FCM stub and the countersign-push-bench release build", target))
        return
    key = seal_key()
    half = args.push_devices // 2
    messages = users_devices_rounds(args) + args.push_users * args.push_devices * (args.push_rounds - 1)
    folder = start_stub(args.fcm_stub)
    measured = []
    try:
        body = prompt_body(folder)
        for round in range(args.rounds):
            sealed, _, _, _ = daemon_push_rate(args, folder, seal=lambda index, device: key if device < half else None)
            readable, _, _, _ = daemon_push_rate(args, folder)
            _, client = push_client_rates(args, folder, body, messages)
            log(f"push vs client round {round + 1}: daemon, half sealed {sealed:,.0f}/s; daemon, none sealed {readable:,.0f}/s; "
                f"HTTP2PushClient alone {client:,.0f}/s")
            measured.append((sealed, readable, client))
    finally:
        stop_stub(folder)
    with_half = statistics.median(m[0] / m[2] for m in measured)
    without = statistics.median(m[1] / m[2] for m in measured)
    figures = "; ".join(f"{a:,.0f} / {b:,.0f} vs {c:,.0f}" for a, b, c in measured)
    rows.append((what, f"median {with_half:.2f} with half sealed, {without:.2f} with none (msg/s per round, half / none vs the client: "
                       f"{figures}; {messages:,} messages each)", target))


def row_pam_login(args, rows):
    """An SSH login through pam_countersign (scripts/demo-ssh.sh --measure: its own daemon, sshd on loopback and
    OpenSSH's client; the simulated phone answers as soon as the number shows): each login's time from the
    client's start to the shell's output with the phone's part taken out, beside the same logins through
    pam_permit alone; and the PSS of sshd's processes for a login waiting in the module."""
    what = "SSH login on loopback: added time of pam_countersign (phone's part out) over pam_permit alone; sshd's memory waiting"
    if os.geteuid() != 0 or not shutil.which("sshd"):
        rows.append((what, "not measured: needs root and openssh-server", "shown"))
        return
    environment = dict(os.environ, COUNTERSIGN=args.binary)
    output = subprocess.run(["bash", os.path.join(ROOT, "scripts", "demo-ssh.sh"), "--measure", str(args.logins)], capture_output=True,
                            text=True, timeout=900, env=environment, cwd=ROOT)
    timing = re.search(r"median login: (\d+) ms with pam_countersign .*?, (\d+) ms with pam_permit alone: the module adds (-?\d+) ms",
                       output.stdout)
    memory = re.search(r"\(PSS\): (\d+) KiB waiting in pam_countersign, (\d+) KiB waiting in pam_exec", output.stdout)
    if output.returncode != 0 or not timing:
        raise RuntimeError(f"demo-ssh.sh --measure: {(output.stdout + output.stderr)[-400:]}")
    log(f"pam login: {timing.group(0)}" + (f"; {memory.group(0)}" if memory else ""))
    rows.append((what, f"adds {timing.group(3)} ms (median of {args.logins}: {timing.group(1)} ms with the module, {timing.group(2)} ms "
                       f"with pam_permit)" + (f"; sshd's processes for a login waiting in the module: {int(memory.group(1)) / 1024:.1f} MiB PSS "
                                             f"(waiting in pam_exec running sleep: {int(memory.group(2)) / 1024:.1f} MiB)" if memory else ""),
                 "shown"))


def row_providers(args, rows):
    """APNs (HTTP/2 over TLS, normal and early-answer) and Web Push (RFC 8291
    encryption and VAPID per message, HTTP/1.1 to 127.0.0.1) to nginx stubs."""
    if not shutil.which("nginx"):
        rows.append(("push providers", "not measured: nginx is not installed (apt-get install nginx-light)", ""))
        return
    stub = os.path.join(ROOT, "benchmarks", "provider-stub")
    rates = {}
    for mode in (None, "early-answer"):
        folder = tempfile.mkdtemp(prefix="countersign-provider-stub-")
        environment = dict(os.environ, **({"MODE": mode} if mode else {}))
        subprocess.run([os.path.join(stub, "start.sh"), folder], env=environment, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            apns = ["--apns-key-file", f"{folder}/apns.p8", "--apns-key-id", "BENCH00001", "--apns-team-id", "BENCHTEAM1",
                    "--apns-url", "https://127.0.0.1:18453", "--apns-ca-file", f"{folder}/ca.pem"]
            token = lambda index, device: f"{index:04x}{device:04x}" + "ab" * 30
            rate, sent, expected, others = daemon_push_rate(
                args, folder, apns, lambda index, device: {"provider": "apns", "token": token(index, device), "topic": "bench.app"})
            rates[("apns", mode)] = (rate, sent, expected, others)
            log(f"push, APNs{' (early answer)' if mode else ''}: {rate:,.0f} msg/s ({sent:,} of {expected:,} sent, {others} other outcomes)")
            if not mode:
                p256dh, auth = open(f"{folder}/p256dh").read(), open(f"{folder}/auth").read()
                webpush = ["--vapid-subject", "mailto:bench@example.com", "--vapid-key-file", f"{folder}/vapid.pem",
                           "--push-allow-private-endpoints"]
                rate, sent, expected, others = daemon_push_rate(
                    args, folder, webpush, lambda index, device: {"provider": "webpush", "endpoint": f"http://127.0.0.1:18454/push/{index}-{device}",
                                                                  "p256dh": p256dh, "auth": auth})
                rates[("webpush", None)] = (rate, sent, expected, others)
                log(f"push, Web Push: {rate:,.0f} msg/s ({sent:,} of {expected:,} sent, {others} other outcomes)")
        finally:
            stop_stub(folder)
    for (provider, mode), (rate, sent, expected, others) in rates.items():
        name = {"apns": "APNs, HTTP/2 + TLS", "webpush": "Web Push, encrypted + VAPID, HTTP/1.1"}[provider]
        if mode:
            normal = rates[(provider, None)][0]
            rows.append((f"push msg/s, {name}, stub answers early then RST_STREAM(NO_ERROR)",
                         f"{rate:,.0f} ({sent:,}/{expected:,} sent, {others} not; {rate / normal:.2f} of the normal stub)",
                         "same rate, nothing dropped"))
        else:
            rows.append((f"push msg/s, whole daemon, {name}, nginx stub", f"{rate:,.0f} ({sent:,}/{expected:,} sent, {others} not)",
                         "nothing dropped"))


def row_longpoll_cluster(args, rows):
    """The longpoll row's polls on node A of two nodes sharing a throw-away
    PostgreSQL database, the approval sent to node B (long-polls-cluster.py)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("long_polls_cluster", os.path.join(os.path.dirname(__file__), "long-polls-cluster.py"))
    cluster = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cluster)
    what = "long polls held at once on one node of a PostgreSQL cluster, each on a new connection, the approval sent to the other node"
    target = "≤ 12 KiB each; all within 0.5 s"
    try:
        held, before, after, early, answered, approved, took, arrived = cluster.measure(args.binary, args.held, args.idle_reader)
    except NoPostgres as missing:
        rows.append((what, f"not measured: {missing}", target))
        return
    per = (after - before) * 1024 / held
    log(f"cluster: RSS {before / 1024:.0f} → {after / 1024:.0f} MiB: {per / 1024:.1f} KiB each; {early} answered early; "
        f"{answered:,} answered ({approved:,} approved), the last read {took:.2f} s and arrived {arrived:.2f} s after the approval")
    rows.append((what.replace("long polls", f"{held:,} long polls"),
                 f"{per / 1024:.1f} KiB each (RSS {before / 1024:.0f} → {after / 1024:.0f} MiB); {approved:,}/{held:,} answered approved "
                 f"({early} early), the last arrived after {arrived:.2f} s"
                 + (f" (the reader idle {args.idle_reader:g} s)" if args.idle_reader else f" and was read after {took:.2f} s"), target))


ROWS = {"status": row_status, "wake": row_wake, "creates": row_creates, "memory": row_memory_and_restart,
        "longpoll": row_longpoll, "cluster": row_longpoll_cluster, "push": row_push, "sealed": row_sealed, "pushclients": row_push_clients,
        "pushratio": row_push_vs_client, "pamlogin": row_pam_login,
        "providers": row_providers}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-build", action="store_true")
    parser.add_argument("--rows", default=",".join(ROWS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--wake-rounds", type=int, default=300)
    parser.add_argument("--live", type=int, default=100_000)
    parser.add_argument("--held", type=int, default=18_000)
    parser.add_argument("--idle-reader", type=float, default=0,
                        help="longpoll: seconds the reader waits after the approval before it reads, so that it takes no CPU "
                             "from the daemon while the polls are answered (arrival times come from the kernel either way)")
    parser.add_argument("--push-users", type=int, default=50)
    parser.add_argument("--push-devices", type=int, default=40)
    parser.add_argument("--push-rounds", type=int, default=8)
    parser.add_argument("--admin-messages", type=int, default=5000)
    parser.add_argument("--logins", type=int, default=10, help="pamlogin: logins timed each way")
    parser.add_argument("--binary", help="the daemon to measure (default: the release build's)")
    parser.add_argument("--fcm-stub", default=os.path.join(ROOT, "..", "shared", "bench", "fcm-stub"))
    args = parser.parse_args()

    if not shutil.which("wrk"):
        sys.exit("wrk is needed: apt-get install wrk")
    if not args.skip_build:
        log("building release (countersign, countersign-bare-route, countersign-push-bench)")
        for product in ("countersign", "countersign-bare-route", "countersign-push-bench"):
            subprocess.run(["swift", "build", "-c", "release", "--product", product], cwd=ROOT, check=True)
    bin_path = subprocess.run(["swift", "build", "-c", "release", "--show-bin-path"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    args.binary = args.binary or os.path.join(bin_path, "countersign")
    args.bare = os.path.join(bin_path, "countersign-bare-route")
    args.push_bench = os.path.join(bin_path, "countersign-push-bench")

    rows = []
    for name in args.rows.split(","):
        log(f"row: {name}")
        try:
            ROWS[name](args, rows)
        except Exception as error:  # a broken row still leaves the others' figures
            rows.append((name, f"failed: {error!r}", ""))

    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), platform.machine())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    print(f"\n{time.strftime('%Y-%m-%d')} · {os.cpu_count()} cores ({cpu}) · commit {commit} · release build · "
          f"python3 benchmarks/suite.py {' '.join(sys.argv[1:])}".rstrip())
    print("\n| what | measured | target |\n| --- | --- | --- |")
    for what, measured, target in rows:
        print(f"| {what} | {measured} | {target} |")


if __name__ == "__main__":
    main()
