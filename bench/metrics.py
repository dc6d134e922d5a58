"""What the metrics cost: the instrumentation per extracted file (beside the same loop without
it), and one scrape after many RQ jobs, each run by a forked work horse: with files named
after the horse (prometheus_client's default) beside files named after its worker (ours).

    METRICS_DIR=$(mktemp -d) .venv/bin/python -m bench.metrics
"""

from __future__ import annotations

import glob
import os
import sys
import time

from webapp import metrics_dir

metrics_dir.prepare()  # an entry point: the folder is named before prometheus_client is imported

from prometheus_client.multiprocess import MultiProcessCollector  # noqa: E402

from webapp.metrics import extraction_seconds, scan_files, search_duration, work_horse_of  # noqa: E402

FILES = 100_000
PILES = (10, 100, 500)  # ended processes whose files a scrape reads
TYPES = ("text", "pdf", "markdown", "docx", "image")


def per_file() -> tuple[float, float]:
    """Microseconds per file of the extraction loop without and with the instrumentation."""
    timer = time.perf_counter
    started = timer()
    for i in range(FILES):
        t0 = timer()
        _ = (timer() - t0, TYPES[i % 5])
    bare = timer() - started
    success = scan_files.labels("bench", "success")
    started = timer()
    for i in range(FILES):
        t0 = timer()
        extraction_seconds.labels(TYPES[i % 5]).observe(timer() - t0)
        success.inc()
    return bare / FILES * 1e6, (timer() - started) / FILES * 1e6


def pile_up(count: int, ours: bool) -> None:
    """`count` forked processes that each record a little, as work horses do, and exit."""
    worker = os.getpid()
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            if ours:
                work_horse_of(worker)
            extraction_seconds.labels("text").observe(0.002)
            scan_files.labels("bench", "success").inc()
            search_duration.labels("tantivy").observe(0.01)
            os._exit(0)
        os.waitpid(pid, 0)


def scrape(folder: str, repeat: int = 5) -> tuple[float, float]:
    """Median milliseconds to merge every process file of the folder (what /metrics does),
    and the files counted in trawl_scan_files_total (one per job: none may be lost)."""
    files = glob.glob(os.path.join(folder, "*.db"))
    times, counted = [], 0.0
    for _ in range(repeat):
        started = time.perf_counter()
        merged = MultiProcessCollector.merge(files, accumulate=True)
        times.append(time.perf_counter() - started)
        counted = sum(s.value for m in merged for s in m.samples if s.name == "trawl_scan_files_total")
    return sorted(times)[len(times) // 2] * 1000, counted


def main() -> int:
    folder = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    bare, instrumented = per_file()
    print(
        f"per file, {FILES} files: loop alone {bare:.1f} us, with the metrics "
        f"{instrumented:.1f} us (+{instrumented - bare:.1f} us)"
    )
    for ours in (False, True):
        for path in glob.glob(os.path.join(folder, "*.db")):
            os.unlink(path)
        done = 0
        for count in PILES:
            pile_up(count - done, ours)
            done = count
            files = len(glob.glob(os.path.join(folder, "*.db")))
            ms, counted = scrape(folder)
            print(
                f"{'worker-named' if ours else 'pid-named'} files, after {count} jobs: "
                f"{files} files, scrape {ms:.1f} ms, {counted:.0f} files counted"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
