"""Test helpers for real worker processes: start `python worker.py` with a test app's settings,
watch its memory, poll a source's status, read records and verify a source."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import psutil
import redis

from tests.conftest import REPO
from webapp import keys

SETTING_KEYS = (
    "DATA_DIR",
    "REDIS_URL",
    "DATABASE_URL",
    "SECRET_KEY",
    "SCAN_BATCH_SIZE",
    "SCAN_LOCK_SECONDS",
    "MAX_FILE_SIZE_MB",
    "EXTRACT_TIMEOUT_PDF",
    "EXTRACT_TIMEOUT_TEXT",
    "EXTRACT_TIMEOUT_DEFAULT",
    "EXTRACT_MEMORY_MB",
    "QUEUE_NAME",
    "SEARCH_BACKEND",
    "SEARCH_INDEX_DIR",
    "OCR_ENABLED",
    "OCR_LANGUAGES",
    "LIVE_MAX_PATHS",
)
WORKER_RSS_LIMIT_MB = 1024  # worker + work horse + extraction child, all together


DROP_DAC = [
    "setpriv",
    "--bounding-set",
    "-dac_override,-dac_read_search",
    "--inh-caps",
    "-dac_override,-dac_read_search",
]


def inotify_limit(watches: int) -> list[str] | None:
    """A Worker prefix that runs it in a user namespace of its own whose kernel limit on inotify
    watches is `watches` (/proc/sys/user/max_inotify_watches is per user namespace): the real
    limit, not the machine's. None when this machine cannot make user namespaces."""
    command = [
        "unshare",
        "--user",
        "--map-root-user",
        "sh",
        "-c",
        f'echo {watches} > /proc/sys/user/max_inotify_watches && exec "$@"',
        "sh",
    ]
    if not shutil.which("unshare"):
        return None
    probe = subprocess.run([*command, "true"], capture_output=True, check=False)
    return command if probe.returncode == 0 else None


def permissions_bind_worker() -> bool:
    """Whether our worker is refused unreadable files (not root, or root without DAC caps)."""
    return os.geteuid() != 0 or shutil.which("setpriv") is not None


class Worker:
    """A real `python worker.py [args]` in its own process group with the app's settings.

    As root it runs through `setpriv` without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, so file
    permissions bind it like any service account (mode 000 files are unreadable to it).
    """

    def __init__(self, app, *args: str, output=None, prefix: list[str] | None = None, **env):
        self.app = app
        self.args = args  # e.g. "watcher": `python worker.py watcher`
        self.output = output  # a file for the worker's stdout and stderr (else the test's)
        self.prefix = prefix  # a command to run it through (else setpriv when root, see below)
        self.env = {
            **os.environ,
            "LOG_LEVEL": "WARNING",
            "ALLOWED_ROOTS": ",".join(app.config["ALLOWED_ROOTS"]),
        }
        self.env.update({k: str(app.config[k]) for k in SETTING_KEYS})
        self.env.update(env)
        self.peak_rss = 0
        self._stop = threading.Event()

    def __enter__(self) -> Worker:
        prefix = self.prefix
        if prefix is None:
            prefix = DROP_DAC if os.geteuid() == 0 and shutil.which("setpriv") else []
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "worker.py", *self.args],
            cwd=REPO,
            env=self.env,
            start_new_session=True,
            stdout=self.output,
            stderr=subprocess.STDOUT if self.output else None,
        )
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def tree_rss(self) -> int:
        """Resident memory of the worker and all its descendants, in bytes."""
        try:
            top = psutil.Process(self.proc.pid)
            procs = [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return 0
        total = 0
        for proc in procs:
            try:
                total += proc.memory_info().rss
            except psutil.NoSuchProcess:
                continue
        return total

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak_rss = max(self.peak_rss, self.tree_rss())

    def kill(self) -> None:
        """SIGKILL the whole process group (worker, work horse, extraction child)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        stop_workers([self.proc], self.env["REDIS_URL"], self.env["QUEUE_NAME"], group=True)


def busy_in_background(pids: set[int], redis_url: str, queue_name: str) -> bool:
    """Whether the RQ workers among `pids` are busy, each with a background phase's job (OCR,
    meaning: the `<queue>-ocr` queue). A scan queues the meaning phase as it ends, so a worker
    stopped after a test's scan is often in it, and a warm shutdown waits for that job, which
    runs for up to a minute (it yields only to queued scans)."""
    from rq import Worker as RQWorker

    conn = redis.Redis.from_url(redis_url)
    try:
        mine = [w for w in RQWorker.all(connection=conn) if w.pid in pids]
        jobs = [w.get_current_job() for w in mine if w.get_current_job_id()]
    except redis.RedisError:
        return False
    finally:
        conn.close()
    return bool(jobs) and all(
        job is not None and job.origin == keys.background_queue(queue_name) for job in jobs
    )


def _tree_pids(proc: subprocess.Popen) -> set[int]:
    try:
        top = psutil.Process(proc.pid)
        return {top.pid, *(child.pid for child in top.children(recursive=True))}
    except psutil.NoSuchProcess:
        return set()


def stop_workers(
    procs: list[subprocess.Popen], redis_url: str, queue_name: str, grace: float = 15, group: bool = False
) -> None:
    """Stop `python worker.py` processes: a warm shutdown (SIGTERM: RQ finishes the job it
    runs), SIGKILL for those still running after `grace` seconds, and at once for one whose
    workers are busy only with background phases' jobs (busy_in_background): the wait would
    have ended in the same SIGKILL. With `group`, signals go to each process group (a worker
    started in a session of its own, with its work horse's children)."""

    def send(proc: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig) if group else proc.send_signal(sig)
        except (ProcessLookupError, PermissionError):
            pass

    running = [p for p in procs if p.poll() is None]
    for proc in running:
        send(proc, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while running and time.monotonic() < deadline:
        for proc in list(running):
            if proc.poll() is not None:
                running.remove(proc)
            elif busy_in_background(_tree_pids(proc), redis_url, queue_name):
                send(proc, signal.SIGKILL)
        if running:
            time.sleep(0.2)
    for proc in procs:
        if proc.poll() is None:
            send(proc, signal.SIGKILL)
        proc.wait(timeout=10)
    if group:  # stray members of the groups (a killed work horse's extraction child)
        for proc in procs:
            send(proc, signal.SIGKILL)


def poll_status(client, auth, sid: str, until, timeout: float = 60.0) -> dict:
    """GET /api/status/{sid} until `until(status)` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    status: dict = {}
    while time.monotonic() < deadline:
        status = client.get(f"/api/status/{sid}", headers=auth).get_json()
        if until(status):
            return status
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s; last status {status}")


def finished(status: dict) -> bool:
    """The source is idle and its latest run ended."""
    run = status.get("last_run") or {}
    return status["state"] == "idle" and run.get("state") in {"finished", "failed", "cancelled"}


def records(app, sid: str) -> dict[str, tuple[str, str | None]]:
    """{path: (status, error_message)} of the source's records."""
    from webapp.extensions import db
    from webapp.models import IndexedFile

    with app.app_context():
        rows = (
            db.session.query(IndexedFile.path, IndexedFile.status, IndexedFile.error_message)
            .filter_by(source_id=sid)
            .all()
        )
        db.session.remove()
    return {p: (s, e) for p, s, e in rows}


def verify(app, sid: str, repair: bool = False) -> dict:
    """`trawl verify` of the source, as a person runs it (`--repair` when asked): its report."""
    import json

    out = app.test_cli_runner().invoke(args=["trawl", "verify", sid, *(["--repair"] if repair else [])])
    assert out.exit_code in (0, 2), out.output
    return json.loads(out.stdout)
