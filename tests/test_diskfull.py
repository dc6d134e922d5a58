"""A full disk under the search index, the database or the thumbnails: the write fails, and
that is a state (status, health), not a silence; nothing is left half written, nothing
crashes, and the next scan works once space returns. Each disk is a small tmpfs mounted for
the test (the tests run as root; skipped with the reason when mounting is refused)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests import samples
from webapp.indexing import background, diskfull

FILLER = ".filler"


def _mount(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if done.returncode:
        why = done.stderr.strip()
        pytest.skip(f"a full disk is made with a small tmpfs, and mounting one was refused: {why}")


def _unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


@contextlib.contextmanager
def small_disk(path: Path, size: str = "8m"):
    """A tmpfs of `size` at `path` for the block, unmounted after (lazily: the app may hold it)."""
    _mount(path, size)
    try:
        yield path
    finally:
        _unmount(path)


def fill(disk: Path) -> None:
    """Take every free byte of the disk (what a growing folder beside Trawl does)."""
    with open(disk / FILLER, "ab") as out:
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 65536)
                out.flush()
    with contextlib.suppress(OSError), open(disk / (FILLER + "2"), "ab") as out:
        while True:  # the last few bytes too
            out.write(b"\0")
            out.flush()


def free(disk: Path) -> None:
    for name in (FILLER, FILLER + "2"):
        (disk / name).unlink(missing_ok=True)


def words(i: int) -> str:
    return f"petrel{i} " + " ".join(f"word{(i * 7 + k) % 5000}" for k in range(3000))


def _scan(client, auth, run_jobs, source_id: str) -> dict:
    assert client.post(f"/api/sources/{source_id}/reindex", headers=auth).status_code == 200
    with contextlib.suppress(Exception):  # a scan that fails is a failed RQ job, on purpose
        run_jobs()
    return client.get(f"/api/status/{source_id}", headers=auth).get_json()


def _health(client) -> tuple[int, dict]:
    resp = client.get("/api/health")
    return resp.status_code, resp.get_json()


def _temporaries(top: Path) -> list[str]:
    return [str(p) for p in top.rglob("*") if p.is_file() and ".tmp" in p.suffixes]


def _segment_files_outside_meta(index: Path) -> list[str]:
    """Files of segments the index's meta.json does not name (a failed commit's leftovers)."""
    meta = json.loads((index / "meta.json").read_text())
    kept = {s["segment_id"].replace("-", "") for s in meta["segments"]}
    return sorted(
        p.name
        for p in index.iterdir()
        if len(p.stem) == 32 and all(c in "0123456789abcdef" for c in p.stem) and p.stem not in kept
    )


@pytest.fixture
def index_disk(data_dir):
    with small_disk(data_dir / "index") as disk:
        yield disk


def test_a_full_index_disk_is_reported_leaves_nothing_and_the_next_scan_works(
    index_disk, app, client, auth, make_tree, make_source, run_jobs
):
    tree = make_tree("birds", {f"note{i:02d}.txt": words(i) for i in range(40)})
    make_source(tree, name="Birds", id="birds")
    assert client.post("/api/search", headers=auth, json={"q": "petrel7"}).status_code == 200  # index made
    fill(index_disk)

    status = _scan(client, auth, run_jobs, "birds")
    assert status["last_run"]["state"] == "failed"
    assert "no space left on the disk of the search index" in status["last_run"]["message"]
    code, health = _health(client)
    assert code == 503 and health["status"] == "degraded"
    assert health["components"]["disk"].startswith("degraded: no space left on device (search index")
    assert "index" in client.get("/api/status", headers=auth).get_json()["disk_full"]
    assert _segment_files_outside_meta(index_disk) == [] and _temporaries(index_disk) == []
    found = client.post("/api/search", headers=auth, json={"q": "petrel7"})
    assert found.status_code == 200 and found.get_json()["total"] == 0  # searches still answer

    free(index_disk)  # space returns
    status = _scan(client, auth, run_jobs, "birds")
    assert status["last_run"]["state"] == "finished", status["last_run"]
    assert client.post("/api/search", headers=auth, json={"q": "petrel7"}).get_json()["total"] == 1
    code, health = _health(client)
    assert code == 200 and health["components"]["disk"] == "ok"
    assert client.get("/api/status", headers=auth).get_json()["disk_full"] == {}


def test_a_scan_that_failed_for_space_is_tried_again_by_itself_once_space_returns(
    index_disk, app, client, auth, make_tree, make_source, run_jobs, monkeypatch
):
    """Nobody asks for a scan again: the scheduler's sweep queues it after a pause (doubled at
    each failure), and the first try after space returns indexes everything."""
    from webapp.jobs import retry_scans_for_space

    monkeypatch.setattr(background, "RETRY_FIRST", 4.0)  # 30 s in service: the test waits less
    tree = make_tree("terns", {f"note{i:02d}.txt": words(i) for i in range(40)})
    make_source(tree, name="Terns", id="terns")
    assert client.post("/api/search", headers=auth, json={"q": "petrel7"}).status_code == 200  # index made
    fill(index_disk)
    assert _scan(client, auth, run_jobs, "terns")["last_run"]["state"] == "failed"
    assert retry_scans_for_space(app) == []  # its pause is not over

    def tried_again() -> dict:
        deadline = time.monotonic() + 30
        while not retry_scans_for_space(app):
            assert time.monotonic() < deadline, "the failed scan was never queued again"
            time.sleep(0.2)
        with contextlib.suppress(Exception):
            run_jobs()
        return client.get("/api/status/terns", headers=auth).get_json()

    assert tried_again()["last_run"]["state"] == "failed"  # still full: tried, and waits longer
    free(index_disk)  # space returns
    status = tried_again()
    assert status["last_run"]["state"] == "finished", status["last_run"]
    assert client.post("/api/search", headers=auth, json={"q": "petrel7"}).get_json()["total"] == 1
    assert _health(client)[1]["components"]["disk"] == "ok"
    assert retry_scans_for_space(app) == []  # done: nothing is tried again


@pytest.fixture
def thumbs_disk(data_dir):
    with small_disk(data_dir / "thumbs", "1m") as disk:
        yield disk


def test_full_thumbnail_disk_indexes_the_pictures_without_them_and_says_so(
    thumbs_disk, app, client, auth, make_tree, make_source, run_jobs
):
    pictures = {
        f"gull{i:02d}.png": samples.picture((400, 300), (i * 5, 90, 200 - i * 4), "PNG") for i in range(20)
    }
    tree = make_tree("pictures", pictures)
    make_source(tree, name="Pictures", id="pictures")
    fill(thumbs_disk)

    status = _scan(client, auth, run_jobs, "pictures")
    assert status["last_run"]["state"] == "finished" and status["successful"] == 20  # still indexed
    code, health = _health(client)
    assert code == 503 and "thumbnails" in health["components"]["disk"]
    assert _temporaries(thumbs_disk) == []
    listed = client.post("/api/search", headers=auth, json={"q": "gull", "limit": 50}).get_json()
    assert listed["total"] == 20 and all(r["thumbnail_url"] is None for r in listed["results"])

    free(thumbs_disk)
    (tree / "gull99.png").write_bytes(samples.picture((400, 300), (10, 10, 10), "PNG"))
    status = _scan(client, auth, run_jobs, "pictures")
    assert status["last_run"]["state"] == "finished"
    assert _health(client)[1]["components"]["disk"] == "ok"
    listed = client.post("/api/search", headers=auth, json={"q": "gull99"}).get_json()["results"]
    assert listed[0]["thumbnail_url"]


@pytest.fixture
def db_disk(tmp_path, app_config, sqlite_template):
    """The database's own disk (a SQLite file on a small tmpfs)."""
    with small_disk(tmp_path / "dbdisk", "4m") as disk:
        shutil.copyfile(sqlite_template, disk / "trawl.db")
        app_config["DATABASE_URL"] = f"sqlite:///{disk / 'trawl.db'}"
        yield disk


def test_a_full_database_disk_is_reported_and_nothing_crashes(
    db_disk, app, client, auth, make_tree, make_source, run_jobs
):
    tree = make_tree("logs", {f"log{i:03d}.txt": f"fulmar {i} logged" for i in range(200)})
    make_source(tree, name="Logs", id="logs")
    fill(db_disk)

    _scan(client, auth, run_jobs, "logs")
    code, health = _health(client)
    assert code == 503 and "database" in health["components"]["disk"]
    saved = client.post("/api/saved-searches", headers=auth, json={"name": "fulmars", "q": "fulmar"})
    assert saved.status_code == 503 and "disk is full" in saved.get_json()["detail"]
    assert client.post("/api/search", headers=auth, json={"q": "fulmar"}).status_code == 200
    assert [p for p in os.listdir(db_disk) if p.endswith("-journal")] == []

    free(db_disk)
    status = _scan(client, auth, run_jobs, "logs")
    assert status["last_run"]["state"] == "finished", status["last_run"]
    assert status["total_files"] == 200
    assert _health(client)[1]["components"]["disk"] == "ok"
    saved = client.post("/api/saved-searches", headers=auth, json={"name": "fulmars", "q": "fulmar"})
    assert saved.status_code == 201


def test_stale_thumbnail_temporaries_are_swept_at_start(data_dir):
    folder = data_dir / "thumbs" / "docs" / "ab"
    folder.mkdir(parents=True)
    old, fresh = folder / "x1.tmp", folder / "x2.tmp"
    old.write_bytes(b"half")
    fresh.write_bytes(b"being written")
    past = time.time() - diskfull.TEMP_STALE_SECONDS - 60
    os.utime(old, (past, past))
    assert diskfull.sweep(str(data_dir)) == 1
    assert not old.exists() and fresh.exists()  # another process may be writing this one
