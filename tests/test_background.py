"""Background phases cannot starve indexing: with real workers and real Tesseract reading long
scanned PDFs, a new source's scan completes while the OCR phases are still reading, and deleting
a source ends its OCR in the middle of its document."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path

import psutil
import pytest

from tests.ocr_samples import long_scanned_pdf, page_image, page_words, tesseract_installed
from tests.workers import Worker, finished, poll_status
from webapp import keys
from webapp.runtime import get_ocr_queue, get_redis

pytestmark = pytest.mark.skipif(
    not tesseract_installed(), reason="tesseract-ocr is not installed (apt-get install tesseract-ocr)"
)
PAGES = 100  # OCR_MAX_PAGES: every page of these documents is read, one at a time


@pytest.fixture(autouse=True)
def _ocr_on(app_config):
    app_config["OCR_ENABLED"] = "auto"


@pytest.fixture(scope="module")
def long_scan() -> bytes:
    """A scan of PAGES text pages (minutes of Tesseract: a page takes about a second)."""
    return long_scanned_pdf([page_image(page_words(seed, lines=12)) for seed in range(4)], PAGES)


def _ocr_source(client, auth, make_tree, make_source, name: str, pdf: bytes) -> dict:
    src = make_source(make_tree(name, {"scan.pdf": pdf}), name=name)
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    return src


def _both_taken(app) -> bool:
    """Both OCR jobs were taken by the workers."""
    queue = get_ocr_queue(app)
    return queue.count == 0 and queue.started_job_registry.count == 2


def _tesseracts(worker: Worker) -> int:
    """Tesseract processes under the workers."""
    children = psutil.Process(worker.proc.pid).children(recursive=True)
    return sum(1 for p in children if p.name() == "tesseract")


def _until(check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def _read_whole(app, root: Path) -> bool:
    """Whether the OCR cache holds the whole text of the document (all its pages were read)."""
    digest = hashlib.sha256((root / "scan.pdf").read_bytes()).hexdigest()
    return (Path(app.config["DATA_DIR"]) / "ocr" / digest[:2] / f"{digest}.eng.json.z").exists()


def test_a_scan_and_a_delete_do_not_wait_behind_long_ocr(
    app, client, auth, make_tree, make_source, roots, long_scan
):
    first = _ocr_source(client, auth, make_tree, make_source, "scans-a", long_scan)
    second = _ocr_source(
        client, auth, make_tree, make_source, "scans-b", long_scan + b"\n%another copy\n"
    )  # other bytes: read on its own
    with Worker(app, "--workers", "2") as worker:
        for src in (first, second):
            poll_status(client, auth, src["id"], lambda s: finished(s) and s["ocr_pending"] == 1, timeout=120)
        _until(lambda: _both_taken(app) and _tesseracts(worker), timeout=60)

        # a new source's scan runs at once, while both OCR phases still have their pages to read
        fresh = make_source(
            make_tree("notes", {"a.txt": "fresh heron notes", "b.md": "# more heron"}), name="notes"
        )
        assert client.post(f"/api/sources/{fresh['id']}/reindex", headers=auth).status_code == 200
        status = poll_status(client, auth, fresh["id"], finished, timeout=120)
        assert status["last_run"]["state"] == "finished" and status["total_files"] == 2
        for src in (first, second):
            assert client.get(f"/api/status/{src['id']}", headers=auth).get_json()["ocr_pending"] == 1, (
                "an OCR phase finished its document before the scan ran"
            )
        hits = client.post("/api/search", headers=auth, json={"q": "heron"}).get_json()
        assert hits["total"] == 2

        # deleting the sources ends their OCR in the middle of their documents
        for src in (first, second):
            assert client.delete(f"/api/sources/{src['id']}", headers=auth).status_code == 204
        _until(
            lambda: not any(get_redis(app).exists(keys.ocr_running(src["id"])) for src in (first, second)),
            timeout=30,
        )
        assert not _read_whole(app, roots / "scans-a") and not _read_whole(app, roots / "scans-b")
        _until(lambda: not _tesseracts(worker), timeout=10)
