"""A scan shared by real worker processes: 1 worker, then 4, over trees that take time to extract.

The workers are `python worker.py` subprocesses configured like the test app (same Redis
database, database, data folder, allowed roots and queue). Timings are printed, not asserted:
the benchmarks measure speed; this test checks that the work is spread and done exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rq import Worker
from rq.job import Job
from rq.registry import FinishedJobRegistry

from tests.samples import workbook
from tests.workers import stop_workers

REPO = Path(__file__).resolve().parent.parent
FILES = 80  # spreadsheets per tree; each takes tens of milliseconds to extract
BATCH = 8  # files per batch: enough batches for every worker to take several

pytestmark = pytest.mark.slow


def _workbook(seed: int) -> bytes:
    return workbook(seed, ["walrus", "ledger"])


@pytest.fixture(scope="module")
def workbooks() -> list[bytes]:
    return [_workbook(seed) for seed in range(4)]


@pytest.fixture
def app_config(app_config):
    return {**app_config, "SCAN_BATCH_SIZE": BATCH}


@pytest.fixture
def start_workers(app, tmp_path):
    """Start n `python worker.py` processes on the app's queue; all are stopped at the end."""
    from webapp.runtime import get_queue, get_redis

    procs: list[subprocess.Popen] = []
    env = {
        **os.environ,
        "DATA_DIR": app.config["DATA_DIR"],
        "REDIS_URL": app.config["REDIS_URL"],
        "DATABASE_URL": app.config["DATABASE_URL"],
        "QUEUE_NAME": app.config["QUEUE_NAME"],
        "ALLOWED_ROOTS": ",".join(app.config["ALLOWED_ROOTS"]),
        "SEARCH_BACKEND": "tantivy",
        "SEARCH_INDEX_DIR": app.config["SEARCH_INDEX_DIR"],
        "SCAN_BATCH_SIZE": str(BATCH),
        "LOG_LEVEL": "WARNING",
    }

    def start(n: int) -> list[subprocess.Popen]:
        queue = get_queue(app)
        before = Worker.count(queue=queue)
        new = []
        for _ in range(n):
            log = open(tmp_path / f"worker-{len(procs)}.log", "wb")  # noqa: SIM115
            proc = subprocess.Popen(
                [sys.executable, "worker.py"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT
            )
            log.close()
            procs.append(proc)
            new.append(proc)
        deadline = time.monotonic() + 60
        while Worker.count(connection=get_redis(app), queue=queue) < before + n:
            assert time.monotonic() < deadline, "workers did not register within 60 s"
            assert all(p.poll() is None for p in new), _logs(tmp_path)
            time.sleep(0.1)
        return new

    yield start
    stop_workers(procs, app.config["REDIS_URL"], app.config["QUEUE_NAME"])


def _logs(tmp_path: Path) -> str:
    return "\n".join(
        f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}"
        for p in sorted(tmp_path.glob("worker-*.log"))
    )


def _tree(roots: Path, name: str, workbooks: list[bytes]) -> Path:
    top = roots / name
    for i in range(FILES):
        path = top / f"part{i % 6}" / f"ledger-{i:03d}.xlsx"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(workbooks[i % len(workbooks)])
    return top


def _scan(client, auth, source_id: str) -> tuple[dict, float]:
    """Queue a scan, wait for its end; the final stats and the wall time."""
    started = time.monotonic()
    resp = client.post(f"/api/sources/{source_id}/reindex?wait=240", headers=auth)
    elapsed = time.monotonic() - started
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json(), elapsed


def _extracting_workers(app, scan_job_id: str) -> dict[str, int]:
    """Worker name -> batches it extracted, from RQ's finished jobs of this run."""
    from webapp.runtime import get_extract_queue, get_redis

    registry = FinishedJobRegistry(queue=get_extract_queue(app))  # helpers have their queue
    jobs = [j for j in Job.fetch_many(registry.get_job_ids(), connection=get_redis(app)) if j]
    helpers = [j for j in jobs if j.func_name.endswith("extract_batches")]
    done: dict[str, int] = {}
    for job in helpers:
        if job.return_value():
            done[job.worker_name] = done.get(job.worker_name, 0) + job.return_value()
    scan = Job.fetch(scan_job_id, connection=get_redis(app))
    total = FILES // BATCH
    coordinator = total - sum(done.values())
    if coordinator > 0:
        done[scan.worker_name] = done.get(scan.worker_name, 0) + coordinator
    return done


def _clear_finished(app) -> None:
    from webapp.runtime import get_extract_queue, get_queue

    for queue in (get_queue(app), get_extract_queue(app)):
        registry = FinishedJobRegistry(queue=queue)
        for job_id in registry.get_job_ids():
            registry.remove(job_id, delete_job=True)


def _assert_indexed_once(client, auth, app, source_id: str) -> None:
    from sqlalchemy import func, select

    from webapp.extensions import db
    from webapp.models import IndexedFile

    with app.app_context():
        rows = db.session.execute(
            select(IndexedFile.status, func.count())
            .where(IndexedFile.source_id == source_id)
            .group_by(IndexedFile.status)
        ).all()
        distinct = db.session.scalar(
            select(func.count(func.distinct(IndexedFile.path))).where(IndexedFile.source_id == source_id)
        )
    assert dict(rows) == {"success": FILES}
    assert distinct == FILES
    found = client.post(
        "/api/search", headers=auth, json={"q": "walrus ledger", "source_id": source_id, "limit": 100}
    ).get_json()
    # the trees repeat a few workbooks: each text is listed once, naming its copies
    assert found["total"] == len(found["results"])
    here = [c for r in found["results"] for c in r["copies"] if c["id"].startswith(f"{source_id}--")]
    assert len(found["results"]) + len(here) == FILES  # (copies in the other source are named too)


def test_scan_spreads_over_four_workers_and_indexes_each_file_once(
    app, client, auth, roots, make_source, start_workers, workbooks, tmp_path
):
    one = make_source(_tree(roots, "one", workbooks), name="One worker")
    four = make_source(_tree(roots, "four", workbooks), name="Four workers")

    start_workers(1)
    body, wall_1 = _scan(client, auth, one["id"])
    assert body["stats"]["state"] == "finished", (body, _logs(tmp_path))
    assert body["stats"]["successful"] == FILES
    _assert_indexed_once(client, auth, app, one["id"])
    alone = _extracting_workers(app, body["job_id"])
    assert len(alone) == 1, alone

    _clear_finished(app)
    start_workers(3)  # 4 in all
    body, wall_4 = _scan(client, auth, four["id"])
    assert body["stats"]["state"] == "finished", (body, _logs(tmp_path))
    assert body["stats"]["successful"] == FILES
    _assert_indexed_once(client, auth, app, four["id"])
    shared = _extracting_workers(app, body["job_id"])
    print(
        f"\nscan of {FILES} files: 1 worker {wall_1:.1f} s, 4 workers {wall_4:.1f} s; "
        f"batches per worker with 4: {sorted(shared.values(), reverse=True)}"
    )
    assert sum(shared.values()) == FILES // BATCH
    assert len(shared) >= 3, f"extraction ran on only {len(shared)} worker(s): {shared}"


def test_a_pool_runs_its_workers_without_rq_schedulers(app, tmp_path):
    """`worker.py --workers 2`: two worker processes under the pool and nothing more (RQ's
    pool would start a scheduler beside each worker; rq-scheduler does that job here)."""
    import psutil

    from webapp.runtime import get_queue, get_redis

    env = {
        **os.environ,
        "DATA_DIR": app.config["DATA_DIR"],
        "REDIS_URL": app.config["REDIS_URL"],
        "DATABASE_URL": app.config["DATABASE_URL"],
        "QUEUE_NAME": app.config["QUEUE_NAME"],
        "ALLOWED_ROOTS": ",".join(app.config["ALLOWED_ROOTS"]),
        "LOG_LEVEL": "WARNING",
    }
    pool = subprocess.Popen([sys.executable, "worker.py", "--workers", "2"], cwd=REPO, env=env)
    try:
        deadline = time.monotonic() + 60
        while Worker.count(connection=get_redis(app), queue=get_queue(app)) < 2:
            assert time.monotonic() < deadline and pool.poll() is None
            time.sleep(0.1)
        # each worker starts RQ's scheduler (when asked to) before it first waits for a job,
        # idle: once both are idle, a scheduler would be up
        while {w.get_state() for w in Worker.all(connection=get_redis(app), queue=get_queue(app))} != {
            "idle"
        }:
            assert time.monotonic() < deadline and pool.poll() is None
            time.sleep(0.1)
        tree = psutil.Process(pool.pid).children(recursive=True)
        assert len(tree) == 2, [p.cmdline() for p in tree]
        assert all(p.ppid() == pool.pid for p in tree)
    finally:
        stop_workers([pool], app.config["REDIS_URL"], app.config["QUEUE_NAME"])


def test_a_helper_marks_the_batch_it_takes_before_its_first_file_is_read(
    app, make_tree, make_source, redis_url
):
    """A helper says at once that it holds a batch: the coordinator hands out again, as lost,
    every batch without a mark after a second (RESULT_WAIT), so a first file slower than that
    (a big PDF, a slow share) had its batch extracted twice. The first file here is a FIFO that
    gives its bytes only when the test writes them."""
    import json
    import threading

    import redis

    from webapp import keys
    from webapp.indexing.batch import Batch
    from webapp.indexing.pipeline import help_extract

    root = make_tree("slow", {"after.txt": "read after the slow one"})
    slow = root / "slow.txt"
    os.mkfifo(slow)
    source = make_source(root, "Slow")
    run_id = "mark-at-once"
    lists = keys.run_lists(run_id)
    r = redis.Redis.from_url(redis_url)
    batch = Batch(0, [(str(slow), 0, 0), (str(root / "after.txt"), 23, 0)])
    r.rpush(lists["todo"], batch.to_json())
    done: list[int] = []

    def helper() -> None:
        with app.app_context():
            done.append(help_extract(app, run_id, source["id"]))

    thread = threading.Thread(target=helper, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 5  # well past RESULT_WAIT, well before the slow file's end
        while r.hget(lists["inflight"], 0) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.hget(lists["inflight"], 0) is not None, (
            "the batch was not marked while its first file was read"
        )
    finally:
        _feed(slow, b"the slow first file")  # the first file's bytes: the extraction goes on
        thread.join(60)
    assert done == [1]
    result = json.loads(r.lpop(lists["results"]))
    assert result["n"] == 0


def _feed(fifo: Path, data: bytes, timeout: float = 20) -> None:
    """Write `data` into a FIFO once its reader has opened it (never blocks: no reader, no write)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: nobody reads it yet
            time.sleep(0.05)
            continue
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        return
