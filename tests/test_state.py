"""Scan and writer locks (redis-py's Lock, one renewal thread): a holder killed with SIGKILL is
taken over once its lock expires; reading a source's status writes nothing; a dead run is
recorded as interrupted by the lock's next acquisition or the scheduler's sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO

# a process that takes a lock the way Trawl's workers do, says so, and keeps renewing it until
# it is killed: `writer` is the writer lock, `scan` a scan's lock (queued, then indexing)
HOLDER = """
import sys, time
from webapp import create_app
from webapp.indexing.runstats import RunState, RunStats
from webapp.indexing.state import Heartbeat, scan_lock, stamp, writer_lock

app = create_app({"DATA_DIR": sys.argv[2], "REDIS_URL": sys.argv[3], "DATABASE_URL": sys.argv[4],
                  "SCAN_LOCK_SECONDS": int(sys.argv[5])})
with app.app_context():
    if sys.argv[1] == "writer":
        with writer_lock("docs"):
            print("held", flush=True)
            time.sleep(600)
    lock = scan_lock("docs")
    run_id = lock.acquire_queued("job", False)
    assert lock.start(run_id)
    lock.write_stats(RunStats(RunState.INDEXING, started_at=stamp(), total_scanned=5))
    with Heartbeat(lock, run_id):
        print("held", flush=True)
        time.sleep(600)
"""
TTL = 3  # SCAN_LOCK_SECONDS of these tests: renewed every second while the holder lives


@pytest.fixture
def holder(app, app_config):
    """Start a process holding a lock of source `docs`; returns (start, kill)."""
    procs = []

    def start(kind: str) -> subprocess.Popen:
        url = app.config["DATABASE_URL"]
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                HOLDER,
                kind,
                app_config["DATA_DIR"],
                app.config["REDIS_URL"],
                url,
                str(TTL),
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc

    yield start
    for proc in procs:
        proc.kill()
        proc.wait(10)


@pytest.fixture
def docs(app, make_tree, make_source):
    return make_source(make_tree("docs", {"a.txt": "alpha"}), name="docs")["id"]


def _kill(proc: subprocess.Popen) -> float:
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return time.monotonic()


def test_a_writer_lock_held_by_a_killed_process_is_taken_over_after_its_expiry(app, docs, holder):
    from webapp.indexing.state import writer_lock

    app.config["SCAN_LOCK_SECONDS"] = TTL
    proc = holder("writer")
    time.sleep(TTL + 1)  # renewed past its expiry while the holder lives
    with app.app_context():
        from webapp.runtime import get_redis

        assert get_redis().exists("trawl:writer:docs")
        killed = _kill(proc)
        with writer_lock("docs"):
            waited = time.monotonic() - killed
    assert 0.5 < waited < TTL + 2, waited


def test_a_scan_lock_held_by_a_killed_worker_is_taken_over_and_its_run_interrupted(
    app, client, auth, docs, holder
):
    app.config["SCAN_LOCK_SECONDS"] = TTL
    proc = holder("scan")
    time.sleep(TTL + 1)
    busy = client.post(f"/api/sources/{docs}/reindex", headers=auth)
    assert busy.status_code == 409  # still renewed: the run is alive
    killed = _kill(proc)
    while client.get(f"/api/status/{docs}", headers=auth).get_json()["state"] != "idle":
        assert time.monotonic() - killed < TTL + 5, "the dead run's lock never expired"
        time.sleep(0.1)
    taken = client.post(f"/api/sources/{docs}/reindex", headers=auth)
    assert taken.status_code == 200, taken.get_json()
    runs = client.get("/api/status", headers=auth).get_json()["recent_runs"]
    assert [(r["state"], r["total_scanned"]) for r in runs] == [("interrupted", 5)]


def _everything(app) -> tuple[dict, dict]:
    """Every key of the test's Redis database with its value, and every row of the database."""
    from sqlalchemy import text

    from webapp.extensions import db
    from webapp.runtime import get_redis

    conn = get_redis(app)
    redis_state = {key: conn.dump(key) for key in conn.scan_iter()}
    with app.app_context():
        tables = ("sources", "run_records", "indexed_files")
        rows = {t: db.session.execute(text(f"SELECT * FROM {t}")).all() for t in tables}
        db.session.remove()
    return redis_state, rows


def test_a_status_read_writes_nothing_and_shows_a_dead_run_interrupted(app, client, auth, docs):
    """The run's lock expired while its stats said indexing: the status shows it interrupted
    (the time it last published progress as its end) and Redis and the database are byte for
    byte what they were; the scheduler's sweep then records it, once."""
    from webapp.indexing.runstats import RunState, RunStats
    from webapp.indexing.state import scan_lock, settle_dead_runs, stamp
    from webapp.runtime import get_redis
    from webapp.services import scans, status

    with app.app_context():
        lock = scan_lock(docs)
        assert lock.start(lock.acquire_queued("job", False))
        lock.write_stats(RunStats(RunState.INDEXING, started_at=stamp(), total_scanned=7))
        get_redis().delete(lock.key)  # its renewal stopped: the lock expired
    before = _everything(app)
    time.sleep(1.1)
    with app.app_context():
        from webapp.models import get_source

        shown = status.source_status(get_source(docs))
        again = scans.live_stats(docs)
        assert scans.scan_state(docs) == "idle"
    assert _everything(app) == before
    assert shown["last_run"].state == RunState.INTERRUPTED and shown["last_run"] == again
    assert shown["last_run"].finished_at and "Interrupted" in shown["last_run"].message
    assert client.get("/api/status", headers=auth).get_json()["recent_runs"] == []
    with app.app_context():
        assert settle_dead_runs(app) == 1
        assert settle_dead_runs(app) == 0
        assert scans.live_stats(docs) == again  # what was shown is what was recorded
    runs = client.get("/api/status", headers=auth).get_json()["recent_runs"]
    assert [(r["state"], r["total_scanned"]) for r in runs] == [("interrupted", 7)]


def test_a_queued_lock_whose_job_is_gone_reads_idle_and_is_freed_by_the_next_request(app, client, auth, docs):
    import json

    from webapp.runtime import get_redis

    with app.app_context():
        from webapp.indexing.state import scan_lock

        lock = scan_lock(docs)
        assert lock.acquire_queued("scan-lost", False)
        value = json.loads(get_redis().get(lock.key))
        value["since"] -= 3600  # queued an hour ago; RQ has no such job
        get_redis().set(lock.key, json.dumps(value), keepttl=True)
        raw = get_redis().get(lock.key)
        assert scans_state(docs) == "idle"
        assert get_redis().get(lock.key) == raw  # reading freed nothing
    assert client.post(f"/api/sources/{docs}/reindex", headers=auth).status_code == 200


def scans_state(source_id: str) -> str:
    from webapp.services import scans

    return scans.scan_state(source_id)
