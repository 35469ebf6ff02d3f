"""Shared by the benchmark scripts: run `countersign serve` on 127.0.0.1 for a measurement."""
import contextlib, os, shutil, socket, subprocess, tempfile, time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def cpu_ticks(pid):
    """User + system CPU of `pid` so far, every thread, in clock ticks (/proc/PID/stat); None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except OSError:
        return None


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def wait_for_port(port, process, seconds=60):
    """Returns once something listens on `port`; raises if `process` exits first or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"process exited with {process.returncode} before listening on {port}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port} after {seconds} s")


@contextlib.contextmanager
def serving(binary, extra_arguments=(), users=()):
    """Yields (process, port, database) for a daemon on a fresh database in a
    temporary folder; `users` are (email, password, bcrypt cost) created first.
    The daemon is stopped with SIGTERM and the folder removed afterwards."""
    work = tempfile.mkdtemp()
    database = f"{work}/bench.sqlite"
    port = free_port()
    for email, password, cost in users:
        subprocess.run([binary, "user", "add", email, "--database", database, "--bcrypt-cost", str(cost)],
                       input=(password + "\n").encode(), check=True, stdout=subprocess.DEVNULL)
    daemon = subprocess.Popen(
        [binary, "serve", "--database", database, "--listen", f"127.0.0.1:{port}", "--log-level", "error",
         # The load comes from one address: no per-address cap; no metrics listener to collide.
         "--metrics-listen", "off", "--connections-per-address", "0", *extra_arguments],
        stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, daemon, seconds=30)
        yield daemon, port, database
    finally:
        daemon.terminate()
        daemon.wait(timeout=15)
        shutil.rmtree(work, ignore_errors=True)


class NoPostgres(Exception):
    """No PostgreSQL server is installed (pg-test-server.sh exits 2)."""


class PostgresServer:
    """A throw-away PostgreSQL server (scripts/pg-test-server.sh) that stops when this
    script ends, and a secret key file for the nodes that share it. Raises NoPostgres
    when no server is installed."""

    def __init__(self):
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "pg-test-server.sh")
        server = subprocess.run(["bash", script, str(os.getpid())], capture_output=True, text=True)
        if server.returncode == 2:
            raise NoPostgres(server.stderr.strip())
        server.check_returncode()
        self.port, self.password, _ = server.stdout.split()
        self.key = os.path.join(tempfile.mkdtemp(prefix="countersign-bench-pg-"), "secret-key")
        with open(self.key, "wb") as file:
            file.write(os.urandom(32))

    def query(self, database, sql):
        """`sql` run by psql in `database`; its unaligned output."""
        return subprocess.run(["psql", "-X", "-qAt", "-h", "127.0.0.1", "-p", self.port, "-U", "countersign", "-d", database, "-c", sql],
                              env=dict(os.environ, PGPASSWORD=self.password), capture_output=True, text=True, check=True).stdout.strip()

    def new_database(self, name):
        """Creates the database `name`; its URL for `--database`."""
        self.query("postgres", f"CREATE DATABASE {name}")
        return f"postgres://countersign:{self.password}@127.0.0.1:{self.port}/{name}?sslmode=disable"
