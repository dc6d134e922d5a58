"""Load test: many concurrent searchers against `make run` (gunicorn) while a scan runs.

Usage: python -m bench.load [--searchers 50] [--duration 60] [--seed-files 3000]
                            [--scan-files 40000] [--no-doc] [--json FILE]

Starts `python -m webapp.launcher` on a fresh data folder and a free port on 127.0.0.1 (its own
Redis, gunicorn, RQ workers), indexes a seed tree, then starts a scan of a bigger tree and lets
the searchers hammer POST /api/search for the duration. Prints errors and latency percentiles and
writes them to the "Load" section of docs/performance.md (between the load:start/end markers).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import date
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "performance.md"
START, END = "<!-- load:start -->", "<!-- load:end -->"
WORDS = (
    "invoice budget meeting report contract project schedule server backup network "
    "customer quarterly revenue summary analysis design release policy manual archive "
    "holiday travel receipt payment migration database cluster incident review"
).split()
PASSWORD = "load-test-password"


def log(message: str) -> None:
    """Progress on stderr."""
    print(f"[load {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_tree(root: Path, n: int, seed: int) -> None:
    """n small text files of random words, 500 per folder."""
    rng = random.Random(seed)
    for i in range(n):
        folder = root / f"part{i // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 200)))
        (folder / f"doc{i:06d}.txt").write_text(f"document {i} {words}\n")


class Service:
    """The whole Trawl of `make run` on a temp data folder; stopped with SIGTERM like Ctrl-C."""

    def __init__(self, data_dir: Path, workers: int = 2, log_file: Path | None = None):
        self.port = free_port()
        self.log_file = log_file  # the launcher's output (its lines and its children's), or none
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
        env.update(
            DATA_DIR=str(data_dir),
            HOST="127.0.0.1",
            PORT=str(self.port),
            WORKERS=str(workers),
            LOG_LEVEL="WARNING",
            ALLOWED_ROOTS=str(data_dir / "sources"),
        )
        self.env = env
        self.session = requests.Session()

    def __enter__(self) -> Service:
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webapp.launcher"],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        if self.log_file:
            out.close()  # the launcher holds its own copy
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if self.session.get(self.url + "/api/health", timeout=5).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if self.proc.poll() is not None:
                raise SystemExit("the launcher exited; run `make run` by hand to see why")
            time.sleep(0.3)
        else:
            raise SystemExit("Trawl did not become healthy within 60 s")
        resp = self.session.post(
            self.url + "/api/auth/setup", json={"username": "load", "password": PASSWORD}, timeout=30
        )
        resp.raise_for_status()
        self.token = resp.json()["access_token"]
        self.session.headers["Authorization"] = f"Bearer {self.token}"
        return self

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the launcher stops its children
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything left in the group
        except ProcessLookupError:
            pass

    def add_source(self, sid: str, root: Path) -> None:
        """Create a source over root."""
        resp = self.session.post(
            self.url + "/api/sources", timeout=30, json={"id": sid, "name": sid, "root_path": str(root)}
        )
        resp.raise_for_status()

    def scan(self, sid: str, wait: int = 0) -> dict:
        """Queue a scan; with wait, block until it ends (at most wait seconds per call)."""
        resp = self.session.post(f"{self.url}/api/sources/{sid}/reindex?wait={wait}", timeout=wait + 30)
        resp.raise_for_status()
        return resp.json()["stats"]

    def state(self, sid: str) -> dict:
        """The source's status."""
        return self.session.get(f"{self.url}/api/status/{sid}", timeout=30).json()


class Searchers:
    """N threads, each with its own keep-alive connection, searching until stopped."""

    def __init__(self, url: str, token: str, n: int, seed: int = 1):
        self.url, self.token, self.n, self.seed = url, token, n, seed
        self.latencies: list[float] = []
        self.errors: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def _run(self, k: int) -> None:
        rng = random.Random(self.seed * 1000 + k)
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.token}"
        while not self._stop.is_set():
            q = " ".join(rng.sample(WORDS, rng.randint(1, 3)))
            if rng.random() < 0.2:
                q = q[:-1]  # a typo or a prefix
            started = time.perf_counter()
            try:
                resp = session.post(self.url + "/api/search", json={"q": q, "limit": 20}, timeout=30)
                ok = resp.status_code == 200 and "results" in resp.json()
                kind = None if ok else f"HTTP {resp.status_code}"
            except (requests.RequestException, ValueError) as exc:
                kind = type(exc).__name__
            elapsed = time.perf_counter() - started
            with self._lock:
                if kind:
                    self.errors[kind] = self.errors.get(kind, 0) + 1
                else:
                    self.latencies.append(elapsed)

    def run(self, seconds: float) -> None:
        """Search with all threads for this long."""
        threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(self.n)]
        for thread in threads:
            thread.start()
        time.sleep(seconds)
        self._stop.set()
        for thread in threads:
            thread.join(timeout=60)


def percentile(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values, in milliseconds."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered)) - 1))
    return ordered[rank] * 1000


def run(args: argparse.Namespace) -> dict:
    """Set up, load, measure; returns the figures."""
    with tempfile.TemporaryDirectory(prefix="trawl-load-") as tmp:
        data = Path(tmp) / "data"
        sources = data / "sources"
        log(f"writing {args.seed_files} seed files and {args.scan_files} files to scan")
        make_tree(sources / "seed", args.seed_files, seed=1)
        make_tree(sources / "incoming", args.scan_files, seed=2)
        with Service(data, workers=args.workers) as service:
            service.add_source("seed", sources / "seed")
            service.add_source("incoming", sources / "incoming")
            seeded = service.scan("seed", wait=300)
            log(f"seed index: {seeded['state']}, {seeded['successful']} files")
            service.scan("incoming")
            log(f"{args.searchers} searchers for {args.duration} s while 'incoming' is scanned")
            load = Searchers(service.url, service.token, args.searchers)
            started = time.monotonic()
            load.run(args.duration)
            wall = time.monotonic() - started
            scan = service.state("incoming")
            healthy = service.session.get(service.url + "/api/health", timeout=30).status_code
        lat = load.latencies
        return {
            "date": date.today().isoformat(),
            "searchers": args.searchers,
            "duration_s": round(wall, 1),
            "requests": len(lat) + sum(load.errors.values()),
            "errors": sum(load.errors.values()),
            "error_kinds": load.errors,
            "throughput_rps": round(len(lat) / wall, 1) if wall else 0,
            "p50_ms": round(percentile(lat, 50), 1),
            "p95_ms": round(percentile(lat, 95), 1),
            "p99_ms": round(percentile(lat, 99), 1),
            "mean_ms": round(statistics.fmean(lat) * 1000, 1) if lat else None,
            "seed_documents": seeded["successful"],
            "scan_state_at_end": scan["state"],
            "scan_progress_at_end": (scan.get("last_run") or {}).get("progress"),
            "health_after": healthy,
            "workers": args.workers,
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
            f"{platform.platform()}, Python {platform.python_version()}",
        }


def markdown(r: dict) -> str:
    """The Load section of docs/performance.md."""
    progress = r["scan_progress_at_end"] or {}
    return f"""{START}
## Load

`python -m bench.load` ({r["date"]}): {r["searchers"]} concurrent searchers (threads with
keep-alive connections, client on the same machine) sent `POST /api/search` (1-3 random words,
20% with a cut last word) for {r["duration_s"]} s against `python -m webapp.launcher`
(gunicorn + {r["workers"]} RQ workers), while a scan of a second source was running
(state at the end: {r["scan_state_at_end"]}, {progress.get("done", 0)} of
{progress.get("total", 0)} files extracted). The index held {r["seed_documents"]} seed
documents plus what the scan had added. Machine: {r["machine"]}.

| figure | value |
|---|---:|
| requests | {r["requests"]} |
| errors (non-200 or connection) | {r["errors"]} |
| throughput (req/s) | {r["throughput_rps"]} |
| p50 (ms) | {r["p50_ms"]} |
| p95 (ms) | {r["p95_ms"]} |
| p99 (ms) | {r["p99_ms"]} |
| /api/health after the run | {r["health_after"]} |

Latency is measured by the client, so it includes queueing in gunicorn's threads; with 50
searchers on 2 cores most of it is waiting for a free thread, not search time.
{END}"""


def write_doc(section: str, doc: Path = DOC) -> None:
    """Replace the Load section of the document (or append it), leaving the rest alone."""
    text = doc.read_text() if doc.exists() else "# Performance\n"
    if START in text and END in text:
        head, rest = text.split(START, 1)
        text = head + section + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)


def main(argv: list[str] | None = None) -> int:
    """Command line entry; exit status 1 when any request failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--searchers", type=int, default=50)
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--seed-files", type=int, default=3000)
    parser.add_argument("--scan-files", type=int, default=40000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-doc", action="store_true", help="do not touch docs/performance.md")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if not args.no_doc:
        write_doc(markdown(result))
        log(f"wrote the Load section of {DOC}")
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
