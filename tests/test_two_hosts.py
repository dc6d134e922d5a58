"""Two hosts with a network between them, and that network cut for 30 s in the middle of a scan.

Host a (a network namespace) runs PostgreSQL and Redis (TCP, passwords), the web server, the
scheduler, the watcher and one worker, which coordinates scans and writes the Tantivy index;
host b (another namespace, one veth pair away) runs extraction-only workers
(`worker.py --extract-only`). Both hosts read the same folder at the same path (here: the same
file system; in production a read-only mount). Mid-scan, every packet between the hosts is
dropped for 30 s (TRAWL_TEST_CUT=down takes host b's end of the link down instead), then the
link comes back: the scan must finish with every file indexed once, the status must tell the
truth all along, and host b's workers must take part again without being restarted. No
password may show in a log or in what the API answers. TRAWL_TEST_KEEP_LOGS=<folder> keeps the
processes' logs.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import ADMIN, REPO, redis_once
from tests.hosts import Network, Postgres, Processes, Redis, unavailable
from tests.samples import workbook
from webapp import keys
from webapp.indexing.scanner import doc_id

pytestmark = pytest.mark.slow

FILES = 160  # spreadsheets; each takes tens of milliseconds to extract
BATCH = 4  # files per batch
CUT_SECONDS = 30
B_WORKERS = 2
WEB_PORT = 8000
TEARDOWN_GRACE = 3  # seconds Trawl's processes get to stop at the end (SIGTERM, then SIGKILL)


def _workbook(seed: int) -> bytes:
    return workbook(seed, ["walrus", "partition"], rows=1500)


class Api:
    """The web server on host a, reached from a thread of this process that lives in host a's
    namespace."""

    def __init__(self, net: Network, base: str):
        self.net, self.base = net, base
        self.headers: dict[str, str] = {}

    def call(self, method: str, path: str, **kwargs):
        import requests

        def go():
            resp = requests.request(method, self.base + path, headers=self.headers, timeout=30, **kwargs)
            return resp.status_code, resp.text

        code, text = self.net.on_a(go)
        try:
            return code, json.loads(text)
        except ValueError:
            return code, text


class Deployment:
    """Everything the test made, for the test to use and for the fixture to remove."""

    def __init__(
        self, net: Network, procs: Processes, pg: Postgres, redis: Redis, api: Api, folder: Path, roots: Path
    ):
        self.net, self.procs, self.pg, self.redis, self.api = net, procs, pg, redis, api
        self.folder, self.roots = folder, roots

    def redis_client(self):
        import redis

        return redis.Redis.from_url(self.redis.url, socket_timeout=10)

    def on_redis(self, fn):
        """fn(client) with a Redis client made and used inside host a."""
        return self.net.on_a(lambda: fn(self.redis_client()))

    def secrets(self) -> list[str]:
        return [self.pg.password, self.redis.password, self.secret_key]


def _wait(what: str, check, timeout: float, procs: Processes):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except Exception as exc:  # noqa: BLE001 (not up yet)
            last = exc
        else:
            last = None
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s ({last})\n{procs.all_logs()}")
        time.sleep(0.2)


@pytest.fixture
def deployment():
    why = unavailable()
    if why:
        pytest.skip(f"two-host test: {why}")
    folder = Path(tempfile.mkdtemp(prefix="trawl-2hosts-"))
    with ExitStack() as stack:
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        if os.environ.get("TRAWL_TEST_KEEP_LOGS"):  # a folder to copy the processes' logs to
            stack.callback(
                shutil.copytree, folder / "logs", os.environ["TRAWL_TEST_KEEP_LOGS"], dirs_exist_ok=True
            )
        net = stack.enter_context(Network())
        for name in ("a", "b", "logs", "roots", "redis"):
            (folder / name).mkdir()
        roots = folder / "roots"
        base = {
            k: v
            for k, v in os.environ.items()
            if k
            not in (
                "REDIS_URL",
                "DATABASE_URL",
                "DATA_DIR",
                "SEARCH_INDEX_DIR",
                "QUEUE_NAME",
                "SECRET_KEY",
                "ALLOWED_ROOTS",
            )
        }
        env = {"a": dict(base), "b": dict(base)}
        procs = Processes(net, folder / "logs", env)
        pg = Postgres(procs, "a", net.addr["a"])
        stack.callback(pg.stop)
        # first (last in, first out): Trawl, then its servers. Nothing is checked after the
        # test and their stop is not what it tests: 3 s after SIGTERM, not 8, before SIGKILL
        # (host a's worker would finish the meaning phase the scans queued, and an idle RQ pool
        # worker on host b often misses the signal: 8 s each time)
        stack.callback(procs.stop, TEARDOWN_GRACE)
        pg.start()
        redis = Redis(procs, "a", net.addr["a"], folder / "redis")
        redis.start()
        secret_key = os.urandom(24).hex()
        shared = {
            "DATABASE_URL": pg.url,
            "REDIS_URL": redis.url,
            "SECRET_KEY": secret_key,
            "ALLOWED_ROOTS": str(roots),
            "QUEUE_NAME": "trawl",
            "SEARCH_BACKEND": "tantivy",
            "SCAN_BATCH_SIZE": str(BATCH),
            "LOG_LEVEL": "INFO",
            "OCR_ENABLED": "false",
        }
        env["a"].update(
            shared, DATA_DIR=str(folder / "a"), HOST=net.addr["a"], PORT=str(WEB_PORT), WEB_CONCURRENCY="2"
        )
        env["b"].update(shared, DATA_DIR=str(folder / "b"))
        dep = Deployment(net, procs, pg, redis, Api(net, f"http://{net.addr['a']}:{WEB_PORT}"), folder, roots)
        dep.secret_key = secret_key
        _wait("redis answers", lambda: dep.on_redis(lambda r: r.ping()), 20, procs)
        _assert_password_required(dep)
        py = sys.executable
        for side in ("a", "b"):  # each host's data folder; the schema once, in the shared database
            procs.run(side, py, "-m", "flask", "--app", "wsgi", "trawl", "init", cwd=REPO, timeout=120)
        procs.start(
            "web", "a", py, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "wsgi:app", cwd=REPO
        )
        procs.start("scheduler", "a", py, "worker.py", "scheduler", cwd=REPO)
        procs.start("watcher", "a", py, "worker.py", "watcher", cwd=REPO)
        procs.start("worker-a", "a", py, "worker.py", cwd=REPO)
        procs.start(
            "workers-b", "b", py, "worker.py", "--workers", str(B_WORKERS), "--extract-only", cwd=REPO
        )
        dep.trees = _trees(roots)  # while they start
        _wait("web answers", lambda: dep.api.call("GET", "/api/health")[0] == 200, 60, procs)
        code, body = dep.api.call("POST", "/api/auth/setup", json=ADMIN)
        assert code == 201, body
        dep.api.headers = {"Authorization": f"Bearer {body['access_token']}"}
        _wait(
            "1 + 2 workers registered",
            lambda: dep.api.call("GET", "/api/status")[1]["queue"]["workers"] == 1 + B_WORKERS,
            60,
            procs,
        )
        yield dep


def _assert_password_required(dep: Deployment) -> None:
    """Redis and PostgreSQL refuse a client that does not give the password."""
    import psycopg
    import redis

    def redis_without():
        with pytest.raises(redis.AuthenticationError):
            redis_once(dep.redis.host, dep.redis.port, socket_timeout=5).set("k", 1)

    def pg_without():
        url = f"postgresql://trawl@{dep.pg.host}:{dep.pg.port}/trawl"
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(url, connect_timeout=5)
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(url, password="not-it", connect_timeout=5)

    dep.net.on_a(redis_without)
    dep.net.on_a(pg_without)


def _trees(roots: Path) -> tuple[Path, Path]:
    """The folder scanned during the cut: FILES files, every fourth a picture (its thumbnail is
    made where it is extracted); and a folder of 10 batches scanned after it."""
    from tests.samples import picture

    books = [_workbook(seed) for seed in range(4)]
    top = roots / "ledgers"
    for i in range(FILES):
        path = top / f"part{i % 5}" / f"ledger-{i:03d}.xlsx"
        path.parent.mkdir(parents=True, exist_ok=True)
        if i % 4 == 3:
            path.with_suffix(".png").write_bytes(picture((64, 48), (i, 90, 200), "PNG"))
        else:
            path.write_bytes(books[i % len(books)])
    later = roots / "later"
    later.mkdir()
    for i in range(10 * BATCH):
        (later / f"book-{i:02d}.xlsx").write_bytes(books[i % len(books)])
    return top, later


def _b_workers(dep: Deployment) -> dict[str, int]:
    """Host b's RQ workers: name -> pid (registered in Redis)."""
    from rq import Worker

    def read(r):
        return {
            w.name: w.pid
            for w in Worker.all(connection=r)
            if w.hostname and w.queue_names() == [keys.extract_queue("trawl")]
        }

    return dep.on_redis(read)


def test_workers_cut_off_mid_scan_come_back_and_nothing_is_lost(deployment):
    dep = deployment
    api = dep.api
    top = dep.trees[0]
    code, source = api.call("POST", "/api/sources", json={"name": "Ledgers", "root_path": str(top)})
    assert code == 201, source
    sid = source["id"]
    b_before = _b_workers(dep)
    assert len(b_before) == B_WORKERS, b_before
    code, body = api.call("POST", f"/api/sources/{sid}/reindex")
    assert code == 200, body
    started = time.monotonic()

    timeline: list[dict] = []

    def poll(phase: str) -> dict:
        code, status = api.call("GET", f"/api/status/{sid}")
        assert code == 200, status
        _, overall = api.call("GET", "/api/status")
        run = status.get("last_run") or {}
        entry = {
            "t": round(time.monotonic() - started, 1),
            "phase": phase,
            "state": status["state"],
            "run": run.get("state"),
            "done": (run.get("progress") or {}).get("done"),
            "total": (run.get("progress") or {}).get("total"),
            "records": status["total_files"],
            "workers": overall["queue"]["workers"],
        }
        timeline.append(entry)
        print(entry)
        return entry

    def inflight_on_b(r) -> int:
        lock = r.get(f"trawl:scan:{sid}")
        if not lock:
            return 0
        return r.hlen(f"trawl:run:{json.loads(lock)['run_id']}:inflight")

    # cut when host b is in the middle of batches (its helpers mark the batches they hold)
    _wait("host b extracting", lambda: poll("before")["done"] and dep.on_redis(inflight_on_b), 60, dep.procs)
    cut_at = time.monotonic()
    dep.net.cut(os.environ.get("TRAWL_TEST_CUT", "drop"))
    try:
        while time.monotonic() - cut_at < CUT_SECONDS:
            poll("cut")
            time.sleep(0.5)
    finally:
        dep.net.restore()
    restored_at, restored_wall = time.monotonic(), datetime.now(UTC)
    last = _wait(
        "scan finished", lambda: (lambda e: e if e["state"] == "idle" else None)(poll("after")), 60, dep.procs
    )
    finished_at = time.monotonic()

    print("\ntimeline (t from the scan request, s):")
    for entry in timeline:
        print("  ", entry)
    print(
        f"cut at {cut_at - started:.1f} s, restored at {restored_at - started:.1f} s, "
        f"finished at {finished_at - started:.1f} s"
    )

    # the status told the truth: running until every file was written, then finished
    during = [e for e in timeline if e["phase"] == "cut"]
    assert during and all(e["state"] == "indexing" and e["run"] == "indexing" for e in during), during
    assert all(e["done"] < FILES for e in during), during
    assert all(e["state"] != "idle" for e in timeline[:-1]), timeline
    assert last["run"] == "finished" and last["done"] == FILES, last
    # the workers: never more than exist; all of them, the same processes, once it is over
    assert all(e["workers"] <= 1 + B_WORKERS for e in timeline), timeline
    assert timeline[-1]["workers"] == 1 + B_WORKERS
    assert _b_workers(dep) == b_before, "host b's workers were replaced"

    # host b took part again after the link came back (its helpers delivered batches)
    after = _b_batches(dep, sid, restored_wall)
    print(f"host b's helpers delivered after the restore: {after}")
    assert after, f"no batch came from host b after the restore\n{dep.procs.all_logs()}"

    # nothing lost, nothing twice: records, index and disk agree
    _assert_index_matches_folder(dep, sid, top)
    _scan_again_with_host_b(dep)
    _assert_no_secret_shown(dep, sid)


def _b_batches(dep: Deployment, source_id: str, since: datetime) -> dict[str, int]:
    """Host b's workers -> batches of the source that their helper jobs delivered, for jobs
    that ended after `since`."""
    from rq.job import Job
    from rq.registry import FinishedJobRegistry

    def read(r):
        registry = FinishedJobRegistry(keys.extract_queue("trawl"), connection=r)
        jobs = [j for j in Job.fetch_many(registry.get_job_ids(), connection=r) if j]
        return [(j.args[1], j.worker_name, j.return_value(), j.ended_at) for j in jobs]

    names = set(_b_workers(dep))
    out: dict[str, int] = {}
    for source, worker, batches, ended in dep.on_redis(read):
        ended = ended.replace(tzinfo=UTC) if ended.tzinfo is None else ended
        if source == source_id and worker in names and batches and ended > since:
            out[worker] = out.get(worker, 0) + batches
    return out


def _scan_again_with_host_b(dep: Deployment) -> None:
    """A new source scanned after the cut: host b's workers take its helper jobs by themselves
    (the index host's worker coordinates, so batches done by b came through b's own
    connections to Redis and PostgreSQL)."""
    top = dep.trees[1]
    code, source = dep.api.call("POST", "/api/sources", json={"name": "Later", "root_path": str(top)})
    assert code == 201, source
    since = datetime.now(UTC)
    code, body = dep.api.call("POST", f"/api/sources/{source['id']}/reindex?wait=60")
    assert code == 200 and body["stats"]["state"] == "finished", body
    assert body["stats"]["successful"] == 10 * BATCH, body
    by_b = _b_batches(dep, source["id"], since)
    print(f"after the cut, a new scan: host b delivered {by_b} of 10 batches")
    assert by_b, f"host b took no part in a scan after the cut\n{dep.procs.all_logs()}"


def _assert_index_matches_folder(dep: Deployment, sid: str, top: Path) -> None:
    on_disk = {str(p) for p in top.rglob("*") if p.is_file()}
    assert len(on_disk) == FILES

    def rows():
        import psycopg

        url = dep.pg.url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url) as conn:
            return conn.execute(
                "SELECT path, status FROM indexed_files WHERE source_id = %s", (sid,)
            ).fetchall()

    records = dep.net.on_a(rows)
    assert len(records) == FILES, len(records)
    assert {p for p, _ in records} == on_disk
    assert {s for _, s in records} == {"success"}
    report = dep.procs.run(
        "a", sys.executable, "-m", "flask", "--app", "wsgi", "trawl", "verify", sid, cwd=REPO, check=False
    )
    assert report.returncode == 0, report.stdout + report.stderr
    verified = json.loads(report.stdout)
    assert verified["problems"] == 0, verified
    assert verified["records"] == verified["documents"] == verified["files_on_disk"] == FILES
    code, hits = dep.api.call(
        "POST", "/api/search", json={"q": "walrus partition", "source_id": sid, "limit": 100}
    )
    books = FILES - FILES // 4
    # four workbooks repeated: each text listed once with its copies; a document twice would
    # count twice
    assert code == 200 and hits["total"] == len(hits["results"]), hits
    here = [c for r in hits["results"] for c in r["copies"] if c["id"].startswith(f"{sid}--")]
    assert len(hits["results"]) + len(here) == books, hits  # other sources' copies are named too
    # thumbnails, wherever the picture was extracted, are on host a, where the web server is
    pictures = sorted(p for p in on_disk if p.endswith(".png"))
    served = [dep.api.call("GET", f"/api/documents/{doc_id(sid, p)}/thumbnail")[0] for p in pictures]
    assert served == [200] * len(pictures), dict(zip(pictures, served, strict=True))
    assert not (dep.folder / "b" / "thumbs").exists(), "host b kept thumbnails of its own"


def _assert_no_secret_shown(dep: Deployment, sid: str) -> None:
    shown = [dep.api.call("GET", path)[1] for path in ("/api/health", "/api/status", f"/api/status/{sid}")]
    shown.append(dep.procs.all_logs())
    for path in [*dep.folder.rglob("*.log"), *dep.pg.folder.rglob("*.log")]:
        shown.append(path.read_text(errors="replace"))
    text = json.dumps(shown)
    for secret in dep.secrets():
        assert secret not in text
