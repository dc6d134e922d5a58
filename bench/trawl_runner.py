"""Trawl through its real service path: `python -m webapp.launcher`, the HTTP API, RQ workers."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import requests

from bench.measure import PeakSampler, disk_usage, percentiles

ROOT = Path(__file__).resolve().parent.parent
SOURCE_ID = "bench"
# after ?wait= ran out (runs over 300 s): a source's status at a million files cost a web
# worker ~70 ms of CPU, so a poll every 0.2 s took a third of a core from the run it timed
POLL_SECONDS = 2.0
START_TIMEOUT = 90
RUN_TIMEOUT = 4 * 3600
WAIT_SECONDS = 300  # the longest ?wait= the API accepts
FINAL_STATES = ("finished", "failed", "cancelled")
# Settings a developer's shell may carry that would point the run at other services.
CLEARED = (
    "REDIS_URL",
    "DATABASE_URL",
    "SEARCH_BACKEND",
    "SEARCH_INDEX_DIR",
    "MEILI_URL",
    "SECRET_KEY",
    "WEB_CONCURRENCY",
)


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TrawlService:
    """A whole Trawl (redis, gunicorn, WORKERS RQ workers, scheduler, watcher) on a fresh data
    folder, with one source over `corpus_root`."""

    def __init__(
        self,
        data_dir: Path,
        corpus_root: Path,
        workers: int = 2,
        log_level: str = "WARNING",
        env: dict[str, str] | None = None,
        watch: bool = False,
    ) -> None:
        self.extra_env = env or {}
        self.watch = watch  # the scan benchmarks measure scans: no live update in between
        self.data_dir = data_dir
        self.corpus_root = corpus_root
        self.workers = workers
        self.log_level = log_level
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.http = requests.Session()
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> TrawlService:
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self.data_dir.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if k not in CLEARED}
        env.update(
            DATA_DIR=str(self.data_dir),
            PORT=str(self.port),
            HOST="127.0.0.1",
            WORKERS=str(self.workers),
            ALLOWED_ROOTS=str(self.corpus_root),
            LOG_LEVEL=self.log_level,
        )
        env.update(self.extra_env)
        self.log = open(self.data_dir.parent / "trawl-service.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "webapp.launcher"],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        try:
            self._wait_healthy()
            self._login()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Trawl exited with {self.proc.returncode}; see {self.log.name}")
            try:
                if self.http.get(f"{self.base}/api/health", timeout=10).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"Trawl did not become healthy in {START_TIMEOUT} s")

    def _login(self) -> None:
        body = {"username": "bench", "password": "bench-password-1"}
        resp = self.http.post(f"{self.base}/api/auth/setup", json=body, timeout=30)
        resp.raise_for_status()
        self.http.headers["Authorization"] = f"Bearer {resp.json()['access_token']}"
        resp = self.http.post(
            f"{self.base}/api/sources",
            timeout=30,
            json={
                "id": SOURCE_ID,
                "name": "Benchmark corpus",
                "root_path": str(self.corpus_root),
                "watch": self.watch,
            },
        )
        resp.raise_for_status()

    def add_sources(self, source_ids: list[str] | tuple[str, ...]) -> None:
        """Sources of these ids, each over an empty folder of its own under the corpus root and
        not watched, for an index that was written beforehand (`SEARCH_INDEX_DIR`) holding
        their documents: a search names only sources that exist."""
        for sid in source_ids:
            folder = self.corpus_root / sid
            folder.mkdir(parents=True, exist_ok=True)
            body = {"id": sid, "name": sid, "root_path": str(folder), "watch": False, "allow_overlap": True}
            self.http.post(f"{self.base}/api/sources", json=body, timeout=30).raise_for_status()

    def stop(self) -> None:
        """SIGTERM the launcher (it stops its children), then make sure nothing is left."""
        if self.proc is None:
            return
        try:
            family = tree_of(self.proc.pid)
        except psutil.Error:
            family = []
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        for proc in family:
            try:
                proc.kill()
            except psutil.Error:
                pass
        self.proc = None
        self.log.close()

    # -- measurements ----------------------------------------------------------------------
    def worker_processes(self) -> list[psutil.Process]:
        """The RQ worker processes (their horses and extraction children are their descendants)."""
        out = []
        for child in tree_of(self.proc.pid):
            try:
                cmd = child.cmdline()
            except psutil.Error:
                continue
            if any(part.endswith("worker.py") for part in cmd) and "scheduler" not in cmd:
                out.append(child)
        return out

    def web_processes(self) -> list[psutil.Process]:
        """gunicorn's master and its web workers."""
        out = []
        for child in tree_of(self.proc.pid):
            try:
                cmd = " ".join(child.cmdline())
            except psutil.Error:
                continue
            if "gunicorn" in cmd:
                out.append(child)
        return out

    def ui_session(self) -> requests.Session:
        """A browser-like session logged in through the web page's own login form."""
        web = requests.Session()
        page = web.get(f"{self.base}/login", timeout=30).text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
        resp = web.post(
            f"{self.base}/login",
            timeout=30,
            allow_redirects=False,
            data={"csrf_token": token, "username": "bench", "password": "bench-password-1"},
        )
        if resp.status_code != 302:
            raise RuntimeError(f"UI login answered {resp.status_code}")
        return web

    def page_latency(self, rounds: int = 20) -> dict:
        """Time of the pages an admin opens most (server and transfer), p50/p95 over rounds."""
        web = self.ui_session()
        pages = {
            "sources page": "/sources",
            "status page": "/status",
            "source status fragment": f"/sources/{SOURCE_ID}/status",
            "failed files page": f"/sources/{SOURCE_ID}/failed",
            "search page": "/?q=error",
            "API status": "/api/status",
        }
        out = {}
        for name, path in pages.items():
            client = self.http if path.startswith("/api/") else web
            client.get(f"{self.base}{path}", timeout=60).raise_for_status()  # warm up
            times = []
            for _ in range(rounds):
                started = time.perf_counter()
                client.get(f"{self.base}{path}", timeout=60).raise_for_status()
                times.append((time.perf_counter() - started) * 1000)
            out[name] = percentiles(times)
        return out

    def listing(self, rounds: int = 10) -> dict:
        """A filter-only query that lists every document (its `total` must be exact) and the
        same list read at offset 100,000 (deep pagination), timed over HTTP."""
        out = {}
        for name, extra in (("list all", {}), ("offset 100000", {"offset": 100_000})):
            times, totals, hits = [], set(), 0
            for _ in range(rounds):
                started = time.perf_counter()
                resp = self.http.post(
                    f"{self.base}/api/search",
                    timeout=120,
                    json={"q": "modified:>=1990", "limit": 20, **extra},
                )
                times.append((time.perf_counter() - started) * 1000)
                resp.raise_for_status()
                body = resp.json()
                totals.add(body["total"])
                hits = len(body["results"])
            out[name] = {**percentiles(times), "total": sorted(totals), "hits": hits}
        return out

    def reindex(self, full: bool = False) -> dict:
        """POST reindex, poll /api/status/<id> until idle; wall time, stats and peak memory."""
        with PeakSampler(self.worker_processes) as sampler:
            started = time.perf_counter()
            # ?wait blocks server side (stats checked every 0.2 s): the run's end is one answer,
            # not a loop of status reads (which once raced the worker's move of a queued lock).
            params = {"wait": str(WAIT_SECONDS), **({"full": "true"} if full else {})}
            resp = self.http.post(
                f"{self.base}/api/sources/{SOURCE_ID}/reindex", params=params, timeout=WAIT_SECONDS + 30
            )
            resp.raise_for_status()
            run = resp.json()["stats"]
            if run["state"] not in FINAL_STATES:
                run = self._wait_idle(started)["last_run"] or {}
            wall = time.perf_counter() - started
        if run.get("state") != "finished":
            raise RuntimeError(f"Trawl run ended as {run.get('state')}: {run.get('message')}")
        return {"seconds": round(wall, 3), "stats": _brief(run), **sampler.result()}

    def _wait_idle(self, started: float) -> dict:
        """Poll the source's status until no run holds it (for runs longer than ?wait)."""
        while time.perf_counter() - started < RUN_TIMEOUT:
            status = self.http.get(f"{self.base}/api/status/{SOURCE_ID}", timeout=30).json()
            if status["state"] == "idle":
                return status
            time.sleep(POLL_SECONDS)
        raise RuntimeError("Trawl run did not finish in time")

    def index_size(self) -> int:
        """Bytes of the search index plus the database."""
        return disk_usage(self.data_dir / "index", self.data_dir / "trawl.db")

    def search_latency(self, queries: dict[str, list], limit: int = 20) -> dict:
        """Latency over HTTP (client side, keep-alive) per query kind, plus hit counts."""
        for q in [q for qs in queries.values() for q in qs][:20]:
            self._search(q, limit)  # warm up caches and connections
        out = {}
        for kind, qs in queries.items():
            times, hits, server = [], 0, []
            for q in qs:
                started = time.perf_counter()
                body = self._search(q, limit)
                times.append((time.perf_counter() - started) * 1000)
                hits += body["total"] > 0
                server.append(body.get("processing_time_ms", 0))
            out[kind] = {
                **percentiles(times),
                "queries_with_hits": hits,
                "server_p50": percentiles(server).get("p50"),
            }
        return out

    def search_memory(self, queries: dict[str, list], limit: int = 20) -> dict:
        """Peak memory of the web processes while every query runs once."""
        with PeakSampler(self.web_processes) as sampler:
            for qs in queries.values():
                for q in qs:
                    self._search(q, limit)
        return sampler.result()

    def _search(self, q: str | dict, limit: int) -> dict:
        """One search by words: the source has meaning on (the service's default), so its
        embedding phase runs meanwhile, but these classes time keyword search (hybrid search
        has its own benchmark, bench/hybrid_http.py)."""
        body = {"q": q} if isinstance(q, str) else dict(q)
        body.setdefault("hybrid", {"semantic_ratio": 0})
        resp = self.http.post(f"{self.base}/api/search", json={**body, "limit": limit}, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def document_count(self) -> int:
        """Documents the service reports in its index."""
        return int(self.http.get(f"{self.base}/api/status", timeout=30).json()["documents"])


def tree_of(pid: int) -> list[psutil.Process]:
    """A process and all its descendants."""
    root = psutil.Process(pid)
    return [root, *root.children(recursive=True)]


def _brief(run: dict) -> dict:
    keys = (
        "total_scanned",
        "new_files",
        "modified_files",
        "unchanged_files",
        "deleted_files",
        "successful",
        "failed",
        "skipped",
        "error_count",
    )
    out = {k: run.get(k) for k in keys}
    out["first_errors"] = run.get("errors", [])[:5]
    return out
