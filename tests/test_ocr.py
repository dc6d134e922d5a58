"""OCR on real Tesseract output: scanned PDFs and images become searchable after a first index
that does not wait for them, each unchanged file is read once, and a missing Tesseract is told."""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageFont
from rq import SimpleWorker
from rq.registry import FinishedJobRegistry

from tests.conftest import require_corpus
from tests.ocr_samples import (
    FONT,
    LINE_PX,
    image_bytes,
    page_image,
    page_words,
    scanned_pdf,
    tesseract_installed,
)
from tests.ui_helpers import login
from tests.workers import Worker, poll_status
from webapp import jobs
from webapp.indexing.ocr import looks_like_text
from webapp.runtime import get_ocr_queue, get_queue, get_redis

pytestmark = pytest.mark.skipif(
    not tesseract_installed(), reason="tesseract-ocr is not installed (apt-get install tesseract-ocr)"
)
MIN_FOUND = 0.9  # of the words of a clean 300-dpi page, found by search
TEXT_PAGE = "Quarterly minutes typed on a computer"


@pytest.fixture(autouse=True)
def _ocr_on(app_config):
    app_config["OCR_ENABLED"] = "auto"


@pytest.fixture
def run_ocr(app):
    """Run the queued OCR jobs (the queue workers serve after the main one) until none is left."""

    def run() -> None:
        with app.app_context():
            SimpleWorker([get_queue(app), get_ocr_queue(app)], connection=get_redis(app)).work(
                burst=True, logging_level="WARNING"
            )

    return run


@pytest.fixture
def ocr_reads(app):
    """What Tesseract has read: the OCR cache's files, each written once per new bytes read,
    by name with the time it was written (a file read again would be written again)."""
    cache = Path(app.config["DATA_DIR"]) / "ocr"
    return lambda: {p.name: p.stat().st_mtime_ns for p in cache.rglob("*.json.z")}


def _ocr_jobs(app) -> int:
    """OCR jobs waiting on the low-priority queue (the embedding jobs of meaning share it)."""
    return sum(job.func_name == "webapp.jobs.ocr_job" for job in get_ocr_queue(app).jobs)


def _words(*seeds: int) -> list[str]:
    return sorted({w for seed in seeds for line in page_words(seed) for w in line})


SCANS = {  # file -> seeds of its scanned pages
    "scans/letter.pdf": (1, 2),
    "scans/mixed.pdf": (3,),
    "photos/board.png": (4,),
    "photos/receipt.jpg": (5,),
    "photos/fax.tiff": (6, 9),  # a multi-page TIFF
    "photos/note.webp": (7,),
}
FORMATS = {"png": "PNG", "jpg": "JPEG", "tiff": "TIFF", "webp": "WEBP"}


def _scanned_tree(make_tree, names=tuple(SCANS)) -> Path:
    files: dict[str, bytes | str] = {"notes.txt": "plain text notes"}
    for name in names:
        seeds = SCANS[name]
        images = [page_image(page_words(seed)) for seed in seeds]
        ext = name.rsplit(".", 1)[1]
        if ext == "pdf":
            files[name] = scanned_pdf(images, (TEXT_PAGE,) if "mixed" in name else ())
        else:
            files[name] = image_bytes(images[0], FORMATS[ext], more=images[1:])
    return make_tree("office", files)


def _scan(client, auth, run_jobs, source_id: str, **params) -> None:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    resp = client.post(f"/api/sources/{source_id}/reindex?{query}", headers=auth)
    assert resp.status_code in (200, 202), resp.get_json()
    run_jobs()  # the main queue only: scans, not OCR


def _found(client, auth, word: str) -> set[str]:
    resp = client.post("/api/search", headers=auth, json={"q": word, "limit": 50})
    assert resp.status_code == 200, resp.get_json()
    return {r["path"].split("/office/", 1)[1] for r in resp.get_json()["results"]}


def _share_found(client, auth, name: str, seen: dict | None = None) -> float:
    """Share of the words of a file's scanned pages whose search finds it (`seen`: results by
    word, kept between calls of one state of the index)."""
    seen = {} if seen is None else seen
    words = _words(*SCANS[name])
    for word in words:
        if word not in seen:
            seen[word] = _found(client, auth, word)
    return sum(name in seen[w] for w in words) / len(words)


def _status(client, auth, source_id: str) -> dict:
    resp = client.get(f"/api/status/{source_id}", headers=auth)
    assert resp.status_code == 200
    return resp.get_json()


def test_scanned_pages_are_found_after_a_first_index_that_does_not_wait(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr
):
    src = make_source(_scanned_tree(make_tree))
    _scan(client, auth, run_jobs, src["id"])
    status = _status(client, auth, src["id"])
    assert status["state"] == "idle" and status["total_files"] == 7
    assert status["ocr_pending"] == len(SCANS)
    assert status["ocr"]["pending"] == len(SCANS) and status["ocr"]["state"] in ("idle", "reading")
    if status["semantic"]["state"] == "idle":  # meaning waits for the OCR text, and says so
        assert status["semantic"]["waiting"] == f"OCR first: {len(SCANS)} documents wait for their OCR text"
    assert "scans/letter.pdf" in _found(client, auth, "letter")  # by name at once
    assert "scans/mixed.pdf" in _found(client, auth, "quarterly")  # its text layer too
    assert _share_found(client, auth, "scans/letter.pdf") == 0  # the scanned text: not yet
    ui = app.test_client()
    login(ui)
    assert f"{len(SCANS)} waiting for OCR" in ui.get("/sources").get_data(as_text=True)

    run_ocr()
    assert _status(client, auth, src["id"])["ocr_pending"] == 0
    assert "waiting for OCR" not in ui.get("/sources").get_data(as_text=True)
    seen: dict[str, set[str]] = {}
    for name in SCANS:
        assert _share_found(client, auth, name, seen) >= MIN_FOUND, name
    assert "scans/mixed.pdf" in _found(client, auth, "quarterly")
    hits = client.post("/api/search", headers=auth, json={"q": "letter"}).get_json()["results"]
    doc = client.get(f"/api/documents/{hits[0]['id']}", headers=auth).get_json()
    assert doc["metadata"]["ocr"] == {"pages": 2, "languages": "eng"}
    assert doc["type"] == "pdf"

    page = ui.get(f"/documents/{hits[0]['id']}").get_data(as_text=True)
    assert "Read by OCR from 2 pages (eng)" in page


def test_unchanged_bytes_are_never_read_twice(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr, ocr_reads
):
    names = ("scans/letter.pdf", "photos/board.png")
    root = _scanned_tree(make_tree, names)
    src = make_source(root)
    _scan(client, auth, run_jobs, src["id"])
    run_ocr()
    first = ocr_reads()
    assert len(first) == len(names)

    for path in root.rglob("*.*"):  # touched: rescanned, same bytes
        os.utime(path, (1_700_000_000, 1_700_000_000))
    _scan(client, auth, run_jobs, src["id"])
    assert _status(client, auth, src["id"])["ocr_pending"] == len(names)
    run_ocr()
    _scan(client, auth, run_jobs, src["id"], full="true")
    run_ocr()
    resp = client.put(f"/api/sources/{src['id']}", headers=auth, json={"name": "Renamed"})
    assert resp.status_code == 200, resp.get_json()
    run_ocr()
    assert ocr_reads() == first  # nothing read again, nothing written again
    assert _status(client, auth, src["id"])["ocr_pending"] == 0
    assert _share_found(client, auth, "photos/board.png") >= MIN_FOUND

    (root / "photos/board.png").write_bytes(image_bytes(page_image(page_words(40)), "PNG"))
    _scan(client, auth, run_jobs, src["id"])
    run_ocr()
    after = ocr_reads()
    assert len(after) == len(names) + 1 and first.items() <= after.items()  # new bytes are read
    new_words = _words(40)
    found = sum("photos/board.png" in _found(client, auth, w) for w in new_words)
    assert found / len(new_words) >= MIN_FOUND


def test_without_tesseract_health_says_so_and_scans_still_work(
    app, client, auth, make_tree, make_source, run_jobs, tmp_path, monkeypatch
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on it
    health = client.get("/api/health")
    assert health.status_code == 200
    assert health.get_json()["status"] == "ok"
    assert health.get_json()["components"]["ocr"] == "unavailable"

    src = make_source(_scanned_tree(make_tree))
    _scan(client, auth, run_jobs, src["id"])
    status = _status(client, auth, src["id"])
    assert status["successful"] == 7 and status["ocr_pending"] == 0
    assert "scans/letter.pdf" in _found(client, auth, "letter")
    assert _ocr_jobs(app) == 0

    app.config["OCR_ENABLED"] = "false"
    assert client.get("/api/health").get_json()["components"]["ocr"] == "off"


def test_missing_language_is_unavailable(app, client):
    app.config["OCR_LANGUAGES"] = "eng+xxx"
    assert client.get("/api/health").get_json()["components"]["ocr"] == "unavailable"
    app.config["OCR_LANGUAGES"] = "eng"
    assert client.get("/api/health").get_json()["components"]["ocr"] == "ok"


def test_pages_past_the_timeout_or_the_cap_are_left_out(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr
):
    app.config.update(OCR_TIMEOUT_PAGE=0.001, OCR_MAX_PAGES=2)  # no page can be read that fast
    images = [page_image(page_words(seed)) for seed in (1, 2, 3)]
    src = make_source(make_tree("office", {"long-scan.pdf": scanned_pdf(images)}))
    _scan(client, auth, run_jobs, src["id"])
    run_ocr()
    assert _status(client, auth, src["id"])["ocr_pending"] == 0
    hits = client.post("/api/search", headers=auth, json={"q": "long-scan"}).get_json()["results"]
    doc = client.get(f"/api/documents/{hits[0]['id']}", headers=auth).get_json()
    assert doc["metadata"]["ocr"] == {"pages": 2, "languages": "eng", "timed_out": 2}
    assert doc["metadata"]["page_count"] == 3


def _raw_with_preview(jpeg: bytes) -> bytes:
    """A minimal TIFF-based RAW (as DNG is) whose IFD0 points at an embedded JPEG preview."""
    entries = [(0x100, 4, 1, 4000), (0x101, 4, 1, 3000), (0x201, 4, 1, 0), (0x202, 4, 1, len(jpeg))]
    offset = 8 + 2 + 12 * len(entries) + 4
    entries[2] = (0x201, 4, 1, offset)
    ifd = struct.pack("<H", len(entries)) + b"".join(
        struct.pack("<HHII", tag, kind, count, value) for tag, kind, count, value in entries
    )
    return b"II*\x00" + struct.pack("<I", 8) + ifd + struct.pack("<I", 0) + jpeg


def test_the_preview_of_a_raw_file_is_read(client, auth, make_tree, make_source, run_jobs, run_ocr):
    jpeg = image_bytes(page_image(page_words(8)), "JPEG")
    src = make_source(make_tree("office", {"camera/whiteboard.dng": _raw_with_preview(jpeg)}))
    _scan(client, auth, run_jobs, src["id"])
    assert _status(client, auth, src["id"])["ocr_pending"] == 1
    run_ocr()
    words = _words(8)
    found = sum("camera/whiteboard.dng" in _found(client, auth, w) for w in words)
    assert found / len(words) >= MIN_FOUND


def test_the_workers_of_make_run_serve_the_ocr_queue(app, client, auth, make_tree, make_source):
    """worker.py: after the scan, the same worker reads the scanned page from the OCR queue."""
    src = make_source(make_tree("office", {"board.png": image_bytes(page_image(page_words(4)), "PNG")}))
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code in (200, 202)
    with Worker(app):
        poll_status(
            client,
            auth,
            src["id"],
            lambda s: s["state"] == "idle" and s["total_files"] == 1 and s["ocr_pending"] == 0,
            timeout=120,
        )
    words = _words(4)
    assert sum("board.png" in _found(client, auth, w) for w in words) / len(words) >= MIN_FOUND


def test_a_lost_ocr_job_is_queued_again_when_the_scheduler_starts(
    app, client, auth, make_tree, make_source, run_jobs
):
    src = make_source(make_tree("office", {"board.png": image_bytes(page_image(page_words(4)), "PNG")}))
    _scan(client, auth, run_jobs, src["id"])
    assert _ocr_jobs(app) == 1
    get_ocr_queue(app).empty()  # the job is lost (Redis without persistence restarted)
    assert _ocr_jobs(app) == 0
    assert jobs.resume_ocr(app) == 1
    assert _ocr_jobs(app) == 1
    assert _status(client, auth, src["id"])["ocr_pending"] == 1


def test_a_job_out_of_time_yields_between_pages_and_the_next_goes_on_where_it_stopped(
    app, client, auth, make_tree, make_source, run_jobs, monkeypatch, tmp_path
):
    """Every job ends after one page (its time is up); the document is read by several jobs,
    each page by Tesseract once (a `tesseract` on PATH that logs each call, then runs the real
    one), and the whole text is found."""
    from webapp.indexing import background

    log = tmp_path / "calls.log"
    wrapper = tmp_path / "bin" / "tesseract"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\n[ "$1" = stdin ] && echo page >> {log}\nexec {shutil.which("tesseract")} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(background, "JOB_SECONDS", 0.0)
    seeds = (11, 12, 13)
    src = make_source(
        make_tree("office", {"long.pdf": scanned_pdf([page_image(page_words(seed)) for seed in seeds])})
    )
    _scan(client, auth, run_jobs, src["id"])
    with app.app_context():  # a bounded number of jobs: one starting over each time never ends
        SimpleWorker([get_queue(app), get_ocr_queue(app)], connection=get_redis(app)).work(
            burst=True, max_jobs=12, logging_level="WARNING"
        )
    assert _status(client, auth, src["id"])["ocr_pending"] == 0
    assert log.read_text().count("page") == 3  # each page read once, by three jobs
    assert len(FinishedJobRegistry(queue=get_ocr_queue(app)).get_job_ids()) >= 3
    words = _words(*seeds)
    assert sum("long.pdf" in _found(client, auth, w) for w in words) / len(words) >= MIN_FOUND


def test_the_text_read_from_an_image_is_on_its_page_with_the_hits_marked(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr
):
    src = make_source(make_tree("office", {"whiteboard.png": image_bytes(page_image(page_words(4)), "PNG")}))
    _scan(client, auth, run_jobs, src["id"])
    run_ocr()
    word = page_words(4)[1][2]
    hit = client.post("/api/search", headers=auth, json={"q": word}).get_json()["results"][0]
    ui = app.test_client()
    login(ui)
    page = ui.get(f"/documents/{hit['id']}?q={word}").get_data(as_text=True)
    assert "data-image-preview" in page  # the picture, and under it its text
    text = page.split('id="ocr-text-heading">Text</h3>', 1)[1]
    shown = text.split('id="preview-text"', 1)[1].split("</pre>", 1)[0]
    assert f'<mark class="match">{word}</mark>' in shown or f"<em>{word}</em>" in shown, shown[:500]
    assert "match-nav" in text.split('id="preview-text"', 1)[0]  # previous / next hit
    bare = ui.get(f"/documents/{hit['id']}?q={word}&view=text").get_data(as_text=True)
    assert "data-image-preview" not in bare and 'id="preview-text"' in bare
    # the word is boxed on the picture where it is written (the second line, third word)
    marks = re.findall(r'data-scan-hit style="left: ([\d.]+)%; top: ([\d.]+)%', page)
    assert marks, "no box on the scan"
    image = page_image(page_words(4))
    line = page_words(4)[1]
    font = ImageFont.truetype(FONT, 40)
    left = (180 + font.getlength(" ".join(line[:2]) + " ")) / image.width * 100
    top = (100 + LINE_PX) / image.height * 100
    assert any(abs(float(x) - left) < 2 and abs(float(y) - top) < 4 for x, y in marks), (marks, left, top)
    assert "data-scan-hit" not in ui.get(f"/documents/{hit['id']}").get_data(as_text=True)  # no q


def test_scans_inside_archives_and_e_mails_are_read_and_the_same_bytes_once(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr, monkeypatch, tmp_path
):
    """A page scanned to a PNG lies in the folder and, the same bytes, in a zip; another scan
    is in the zip, a scanned PDF is attached to a message inside it, another to a message on
    disk. Every one is found by its words; Tesseract reads each distinct page once."""
    import io
    import zipfile
    from email.message import EmailMessage

    log = tmp_path / "calls.log"
    wrapper = tmp_path / "bin" / "tesseract"
    wrapper.parent.mkdir()
    wrapper.write_text(
        f'#!/bin/sh\n[ "$1" = stdin ] && echo page >> {log}\nexec {shutil.which("tesseract")} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")

    def eml(attachment: str, data: bytes) -> bytes:
        msg = EmailMessage()
        msg["Subject"], msg["From"], msg["Date"] = (
            "Scan",
            "scanner@example.org",
            "Tue, 03 Oct 2023 10:00:00 +0000",
        )
        msg.set_content("The scan is attached.")
        msg.add_attachment(data, maintype="application", subtype="pdf", filename=attachment)
        return bytes(msg)

    board = image_bytes(page_image(page_words(4)), "PNG")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("scans/board-copy.png", board)
        archive.writestr("scans/receipt.jpg", image_bytes(page_image(page_words(5)), "JPEG"))
        archive.writestr("inbox/fax.eml", eml("fax.pdf", scanned_pdf([page_image(page_words(7))])))
    tree = {
        "board.png": board,
        "box.zip": buf.getvalue(),
        "letter.eml": eml("letter.pdf", scanned_pdf([page_image(page_words(6))])),
    }
    src = make_source(make_tree("office", tree))
    _scan(client, auth, run_jobs, src["id"])
    assert _status(client, auth, src["id"])["ocr_pending"] == 5
    run_ocr()
    assert _status(client, auth, src["id"])["ocr_pending"] == 0
    assert log.read_text().count("page") == 4  # board.png's bytes were read once for both
    for name, seed in (
        ("board.png", 4),
        ("box.zip!/scans/board-copy.png", 4),
        ("box.zip!/scans/receipt.jpg", 5),
        ("letter.eml!/letter.pdf", 6),
        ("box.zip!/inbox/fax.eml!/fax.pdf", 7),
    ):
        words = _words(seed)
        assert sum(name in _found(client, auth, w) for w in words) / len(words) >= MIN_FOUND, name
    hits = client.post("/api/search", headers=auth, json={"q": "receipt"}).get_json()["results"]
    receipt = next(h for h in hits if h["path"].endswith("receipt.jpg"))
    doc = client.get(f"/api/documents/{receipt['id']}", headers=auth).get_json()
    assert doc["metadata"]["ocr"] == {"pages": 1, "languages": "eng"}
    spool = Path(app.config["DATA_DIR"]) / "tmp" / "unpack"
    leftover = [p for p in spool.rglob("*") if p.is_file()] if spool.exists() else []
    assert leftover == []  # the members' copies are gone once read


def test_pages_read_so_far_survive_a_round_trip_and_a_damaged_record_starts_over(tmp_path):
    """A job that yields keeps its pages (TextCache.keep); the next reads them back whole, and
    a kept record that is damaged or of another shape makes the document start over instead of
    failing every job after it."""
    from webapp.indexing.ocr_phase import PagesRead, TextCache

    cache = TextCache(str(tmp_path), "eng")
    kept = PagesRead(count=3)
    kept.add("read", "first page")
    cache.keep("ab" * 32, kept)
    assert cache.progress("ab" * 32) == kept
    assert cache.progress("cd" * 32) == PagesRead()
    kept.add("read", "second page", [[0.1, 0.2, 0.3, 0.25, "second"]])  # its words' boxes too
    cache.keep("ab" * 32, kept)
    assert cache.progress("ab" * 32).words == {"1": [[0.1, 0.2, 0.3, 0.25, "second"]]}
    for damaged in ([1, 2], {"next": "x", "texts": []}, {"count": "3"}, {"texts": "abc"}, {"words": []}):
        cache.put("ef" * 32, damaged, partial=True)
        assert cache.progress("ef" * 32) == PagesRead(), damaged


PHOTOS = ("pillow-flower.webp", "pillow-xmp_test.jpg", "tika-testJPEG_GEO.jpg", "pillow-iptc.jpg")


def test_only_pictures_that_hold_text_wait_for_ocr(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr, app_config
):
    """Photos of the corpus (flowers, birds, a building's sign, a landscape) are not sent to
    OCR; scanned pages (PNG, JPEG, a RAW file's preview) still are, and are read."""
    corpus = require_corpus() / "real" / "image"
    files: dict[str, bytes | str] = {f"photos/{name}": (corpus / name).read_bytes() for name in PHOTOS}
    files["scans/board.png"] = image_bytes(page_image(page_words(4)), "PNG")
    files["scans/receipt.jpg"] = image_bytes(page_image(page_words(5)), "JPEG")
    files["camera/whiteboard.dng"] = _raw_with_preview(image_bytes(page_image(page_words(8)), "JPEG"))
    src = make_source(make_tree("office", files))
    _scan(client, auth, run_jobs, src["id"])
    assert _status(client, auth, src["id"])["ocr_pending"] == 3  # before: 7, every picture
    run_ocr()
    for name, seed in (("scans/board.png", 4), ("scans/receipt.jpg", 5), ("camera/whiteboard.dng", 8)):
        found = [w for w in _words(seed) if name in _found(client, auth, w)]
        assert len(found) / len(_words(seed)) >= MIN_FOUND, name


def test_every_picture_waits_for_ocr_when_the_text_test_is_off(
    app, client, auth, make_tree, make_source, run_jobs, app_config
):
    app.config["OCR_TEXT_TEST"] = False
    corpus = require_corpus() / "real" / "image"
    files = {f"photos/{name}": (corpus / name).read_bytes() for name in PHOTOS}
    src = make_source(make_tree("office", files))
    _scan(client, auth, run_jobs, src["id"])
    assert _status(client, auth, src["id"])["ocr_pending"] == len(PHOTOS)


def test_the_text_test_tells_pages_from_photos():
    """Pure: a typed page, the same page light on dark (a dark screen) and a blank page."""
    grey = np.asarray(page_image(page_words(3)).convert("L"))
    assert looks_like_text(grey)
    assert looks_like_text(255 - grey)
    assert not looks_like_text(np.full((600, 400), 250, dtype=np.uint8))
    photo = Image.open(require_corpus() / "real" / "image" / "pillow-flower.webp").convert("L")
    assert not looks_like_text(np.asarray(photo))
