"""SIGTERM to the web server's master under load: `python -m bench.web_sigterm [--rounds 3]`.

Runs a whole Trawl (`python -m webapp.launcher`) over a small folder, keeps `--clients`
threads searching through keep-alive sessions, sends SIGTERM to gunicorn's master and times
(from the signal) until the service answers /api/health with 200 again, and how the searches
in flight at that moment ended. Prints one line per round and the median; the figures go to
docs/operations.md ("Web server restarts").
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import psutil
import requests

from bench.trawl_runner import TrawlService


def _masters(service: TrawlService) -> list[psutil.Process]:
    """gunicorn masters of the launcher (two while a stopping one drains beside its successor)."""
    return [
        proc for proc in psutil.Process(service.proc.pid).children() if "gunicorn" in " ".join(proc.cmdline())
    ]


def _load(service: TrawlService, stop: threading.Event, outcomes: list[str]) -> None:
    session = requests.Session()
    session.headers.update(service.http.headers)
    while not stop.is_set():
        try:
            status = session.post(f"{service.base}/api/search", json={"q": "report"}, timeout=60).status_code
            outcomes.append(str(status))
        except requests.RequestException as exc:
            outcomes.append(type(exc).__name__)
            time.sleep(0.05)


def _round(service: TrawlService, clients: int) -> tuple[float, dict]:
    stop = threading.Event()
    outcomes: list[str] = []
    threads = [
        threading.Thread(target=_load, args=(service, stop, outcomes), daemon=True) for _ in range(clients)
    ]
    for thread in threads:
        thread.start()
    time.sleep(3)  # the load runs
    [master] = _masters(service)
    before = len(outcomes)
    exited: list[float] = []
    sent = time.monotonic()
    master.terminate()
    threading.Thread(
        target=lambda: (master.wait(120), exited.append(time.monotonic() - sent)), daemon=True
    ).start()
    took = None
    while time.monotonic() - sent < 120:
        try:
            fresh = [m for m in _masters(service) if m.pid != master.pid]
            if fresh and requests.get(f"{service.base}/api/health", timeout=2).status_code == 200:
                took = time.monotonic() - sent
                break
        except (RuntimeError, requests.RequestException, psutil.Error):
            pass
        time.sleep(0.05)
    time.sleep(1)
    stop.set()
    for thread in threads:
        thread.join(timeout=70)
    after: dict = {}
    for outcome in outcomes[before:]:
        after[outcome] = after.get(outcome, 0) + 1
    after["master exited after s"] = round(exited[0], 2) if exited else None
    return (took if took is not None else float("inf")), after


def _files(root: Path) -> Path:
    """200 small text files to search."""
    root.mkdir()
    for i in range(200):
        (root / f"r{i:03d}.txt").write_text(f"report number {i} " + "words " * 200)
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="trawl-sigterm-") as tmp,
        TrawlService(Path(tmp) / "data", _files(Path(tmp) / "files"), workers=1) as service,
    ):
        service.http.post(f"{service.base}/api/sources/bench/reindex", timeout=60)
        times = []
        for n in range(args.rounds):
            took, outcomes = _round(service, args.clients)
            times.append(took)
            print(
                f"round {n + 1}: answering again {took:.2f} s after SIGTERM; requests "
                f"from the signal on: {outcomes}"
            )
            time.sleep(2)
        print(
            f"median {statistics.median(times):.2f} s over {len(times)} rounds "
            f"({args.clients} searching clients, WEB_CONCURRENCY from the environment)"
        )
        service.log.flush()
        for line in Path(service.log.name).read_text().splitlines():
            if (
                "[launcher]" in line
                or "Booting worker" in line
                or "Shutting down" in line
                or "Listening at" in line
                or "Worker exiting" in line
            ):
                print("  log:", line[:160])


if __name__ == "__main__":
    main()
