"""Hostile input: the hostile corpus and generated traps scan to the end in a real worker process.

Every file ends as success, failed or skipped with a clear message, the run stays within its time
and memory bounds, and the service is healthy afterwards. As root, the worker runs without the
capabilities that bypass file permissions, so unreadable files really are unreadable to it.
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import CORPUS
from tests.workers import (
    WORKER_RSS_LIMIT_MB,
    Worker,
    finished,
    permissions_bind_worker,
    poll_status,
    records,
    verify,
)

# -- the hostile tree ------------------------------------------------------------------------------


@pytest.fixture
def app_config(app_config):
    """Short timeouts and small batches so the traps show up in several batches."""
    app_config.update(
        SECRET_KEY="hostile-tests-" + os.urandom(16).hex(),
        SCAN_BATCH_SIZE=20,
        EXTRACT_TIMEOUT_PDF=10.0,
        EXTRACT_TIMEOUT_DEFAULT=10.0,
        EXTRACT_TIMEOUT_TEXT=5.0,
        EXTRACT_MEMORY_MB=512,
    )
    return app_config


@pytest.fixture
def hostile_root(app):
    """The hostile corpus (when present) plus generated traps, below the allowed root."""
    root = Path(app.config["ALLOWED_ROOTS"][0]) / "hostile"
    if (CORPUS / "hostile").is_dir():
        shutil.copytree(CORPUS / "hostile", root / "corpus")
    root.mkdir(exist_ok=True)
    _generated(root)
    for path in [root, *root.rglob("*")]:
        if path.is_dir() and not path.is_symlink() and path.name != "locked-dir":
            path.chmod(0o755)
    yield root
    (root / "generated" / "locked-dir").chmod(0o755)  # so the tmp folder can be removed


def _generated(root: Path) -> None:
    gen = root / "generated"
    gen.mkdir()
    with open(gen / "sparse-2gb.txt", "wb") as fh:  # 2 GB apparent size, no blocks
        fh.truncate(2 * 1024**3)
    with open(gen / "sparse-100mb-minus.log", "wb") as fh:  # just under the limit: read it
        fh.truncate(99 * 1024**2)
    (gen / "loop").mkdir()
    (gen / "loop" / "inside.txt").write_text("loop member")
    (gen / "loop" / "again").symlink_to("..")
    (gen / "loop" / "self").symlink_to(".")
    (gen / "escape-link.txt").symlink_to("/etc/passwd")
    (gen / "dangling.txt").symlink_to(gen / "nowhere")
    os.mkfifo(gen / "pipe.txt")
    (gen / "line\nbreak name.txt").write_text("newline in the name")
    os.makedirs(os.fsencode(gen) + b"/bad-\xff-dir")
    with open(os.fsencode(gen) + b"/bad-\xfe\xfd.txt", "wb") as fh:
        fh.write(b"latin bytes in the name")
    deep = gen
    for i in range(200):
        deep = deep / f"d{i % 10}"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("two hundred levels down")
    (gen / "secret.txt").write_text("unreadable file")
    (gen / "secret.txt").chmod(0o000)
    (gen / "locked-dir").mkdir()
    (gen / "locked-dir" / "inner.txt").write_text("in an unreadable folder")
    (gen / "locked-dir").chmod(0o000)
    (gen / "binary.txt").write_bytes(os.urandom(64 * 1024))
    (gen / "nul-heavy.md").write_bytes(b"---\ntitle: \x00\x00\n---\n" + b"\x00" * 100_000)


def _expected_files(root: Path, locked_readable: bool) -> set[str]:
    """Regular files with UTF-8 names reachable without following symlinked dirs."""
    found = set()
    for dirpath, _dirnames, filenames in os.walk(root):
        if dirpath.endswith("locked-dir") and not locked_readable:
            continue
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                name.encode("utf-8")
            except UnicodeEncodeError:
                continue
            if not os.path.islink(path) and stat.S_ISREG(os.lstat(path).st_mode):
                found.add(path)
    return found


@pytest.mark.slow
def test_hostile_tree_scans_to_the_end(app, client, auth, make_source, hostile_root):
    binding = permissions_bind_worker()
    sid = make_source(hostile_root, id="hostile")["id"]
    assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    started = time.monotonic()
    with Worker(app) as worker:
        status = poll_status(client, auth, sid, finished, timeout=150)
    elapsed = time.monotonic() - started
    run = status["last_run"]
    assert run["state"] == "finished", run
    assert worker.peak_rss < WORKER_RSS_LIMIT_MB * 1024**2, worker.peak_rss / 1024**2

    everything = records(app, sid)
    members = {p: v for p, v in everything.items() if "!/" in p}  # of archives (their own test)
    recs = {p: v for p, v in everything.items() if p not in members}
    expected = _expected_files(hostile_root, locked_readable=not binding)
    assert set(recs) == expected, expected ^ set(recs)
    if any(os.path.basename(p) == "droste.zip" for p in recs):  # from the hostile corpus
        # a zip holding itself is opened 3 levels deep, no further
        assert max(p.count("!/") for p in members) == 3
    for path, (state, error) in recs.items():
        assert state in {"success", "failed", "skipped"}, path
        if state != "success":
            assert error and len(error) < 300 and "Traceback" not in error, (path, error)
    gen = hostile_root / "generated"
    assert recs[str(gen / "sparse-2gb.txt")] == ("skipped", "File is larger than 100 MB")
    assert recs[str(gen / "line\nbreak name.txt")][0] == "success"
    assert any(p.endswith("bottom.txt") and s == "success" for p, (s, _) in recs.items())
    assert not any("/loop/again/" in p or "/loop/self/" in p for p in recs)
    errors = {e["path"]: e["error"] for e in run["errors"]}
    assert any("bad-" in p and e == "File name is not valid UTF-8" for p, e in errors.items())
    if binding:
        assert recs[str(gen / "secret.txt")][0] == "failed"
        assert errors[str(gen / "locked-dir")].startswith("Permission denied")
    # each file within its timeout: the whole run fits in the budget of a few slow files
    assert elapsed < 150
    assert client.get("/api/health").status_code == 200
    hits = client.post(
        "/api/search", headers=auth, json={"q": "hundred levels", "matching_strategy": "all"}
    ).get_json()
    assert hits["total"] == 1
    report = verify(app, sid)
    assert report["orphan_documents"] == 0 and report["records_without_document"] == 0, report
    if not binding:
        pytest.skip("root without setpriv: mode-000 files were readable to the worker")


def _many(root: Path, n: int) -> list[Path]:
    paths = []
    for i in range(n):
        path = root / f"f{i:04d}.txt"
        path.write_text(f"mid scan file {i} " + "filler words " * 2000)
        paths.append(path)
    return paths


@pytest.mark.slow
def test_files_deleted_or_truncated_mid_scan(app, client, auth, make_source):
    app.config["SCAN_BATCH_SIZE"] = 10
    root = Path(app.config["ALLOWED_ROOTS"][0]) / "churn"
    root.mkdir()
    paths = _many(root, 400)
    sid = make_source(root, id="churn")["id"]
    victims = paths[-60:]  # the last batches: still waiting when extraction starts

    def vandal() -> None:
        poll_status(
            client.application.test_client(),
            auth,
            sid,
            lambda s: (s.get("last_run") or {}).get("progress", {}).get("total", 0) > 0,
            timeout=60,
        )  # the walk is done (sizes taken); extraction is starting
        for i, path in enumerate(victims):
            if i % 2:
                path.unlink()
            else:
                with open(path, "r+b") as fh:
                    fh.truncate(10)

    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    thread = threading.Thread(target=vandal)
    with Worker(app, SCAN_BATCH_SIZE="10"):
        thread.start()
        status = poll_status(client, auth, sid, finished, timeout=120)
        thread.join(timeout=60)
        assert status["last_run"]["state"] == "finished"
        recs = records(app, sid)
        assert len(recs) == 400 and all(s in {"success", "failed"} for s, _ in recs.values())
        gone = [str(p) for i, p in enumerate(victims) if i % 2]
        vanished = [p for p in gone if recs[p][0] == "failed"]
        assert vanished and all(recs[p][1] == "File no longer exists" for p in vanished)
        # the next scan settles everything: deleted files leave, truncated ones are re-read
        assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
        first = status["last_run"]
        status = poll_status(client, auth, sid, lambda s: finished(s) and s["last_run"] != first, timeout=60)
    assert status["total_files"] == 370
    assert verify(app, sid)["problems"] == 0
    hit = client.post(
        "/api/search", headers=auth, json={"q": "mid scan file 340", "matching_strategy": "all"}
    ).get_json()
    assert hit["total"] == 0  # a truncated file's old text is gone from the index
    assert client.get("/api/health").status_code == 200


def _thumbs(app, sid: str) -> list[str]:
    top = Path(app.config["DATA_DIR"]) / "thumbs" / sid
    return [str(p) for p in top.rglob("*.jpg")] if top.exists() else []


@pytest.mark.slow
def test_deleting_a_source_during_its_scan_leaves_no_thumbnails(app, client, auth, make_source, run_jobs):
    """The worker still extracting when the source is deleted wrote the thumbnails of its
    batch after the source's thumbnail folder was removed: orphans no one would ever delete."""
    from tests import samples

    root = Path(app.config["ALLOWED_ROOTS"][0]) / "pictures"
    root.mkdir()
    picture = samples.picture((2400, 1800), samples.BLUE, "PNG")
    for i in range(60):
        (root / f"p{i:04d}.png").write_bytes(picture)
    sid = make_source(root, id="pictures")["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    with Worker(app, "--workers", "2", SCAN_BATCH_SIZE="30"):
        deadline = time.monotonic() + 120
        while not _thumbs(app, sid):
            assert time.monotonic() < deadline, "no thumbnail was made"
            time.sleep(0.05)
        assert client.delete(f"/api/sources/{sid}", headers=auth).status_code == 204
        deadline = time.monotonic() + 120
        while client.get("/api/status", headers=auth).get_json()["queue"]["started"]:
            assert time.monotonic() < deadline, "the cancelled scan did not end"
            time.sleep(0.2)
        time.sleep(2)  # a batch still in the extraction child has written by now
    assert _thumbs(app, sid) == []
    again = make_source(root, id="pictures")["id"]  # the id made again keeps its thumbnails
    client.post(f"/api/sources/{again}/reindex", headers=auth)
    run_jobs()
    assert len(_thumbs(app, again)) == 60
