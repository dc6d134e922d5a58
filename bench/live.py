"""Live index benchmark: `python -m bench.live [--edits 200] [--burst 5000] [--tree 50000]`.

Runs a whole Trawl (`python -m webapp.launcher`, its watcher and WORKERS workers) and measures
over its HTTP API:
- write -> searchable: `--edits` changes of mixed kinds (create, modify, rename, move into a
  folder), one at a time, each timed from the write until search shows it;
- delete -> gone: half as many deletions, one at a time;
- a burst of `--burst` files written into a watched source and, file for file at the same
  time, into an unwatched twin whose manual incremental scan starts the moment the writing
  ends: the time until each source has them all, and search latency meanwhile against at rest;
- the watcher process's RSS and idle CPU while it watches a `--tree`-file tree.
Writes bench/results/live-<date>.json and prints the table of docs/performance.md "Live index".
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import string
import sys
import threading
import time
from datetime import date
from pathlib import Path

import requests

from bench.corpus import WORK
from bench.measure import machine, percentiles
from bench.trawl_runner import TrawlService, tree_of

HERE = Path(__file__).resolve().parent
POLL = 0.05  # seconds between two searches while waiting for a change to show
TIMEOUT = 120.0  # a change not reflected after this is reported as a failure
IDLE_SECONDS = 30.0  # how long the watcher's CPU is measured while nothing changes
FILES_PER_DIR = 20  # the watched tree: this many files per folder


def log(message: str) -> None:
    """Progress on stderr with a timestamp."""
    print(f"[live {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def word(rng: random.Random) -> str:
    """A random 12-letter word: no two of them are within the search's typo distance."""
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(12))


class Bench:
    """The service, its sources and the timed waits."""

    def __init__(self, svc: TrawlService, top: Path):
        self.svc = svc
        self.top = top
        self.rng = random.Random(16)

    def api(self, method: str, path: str, **kwargs):
        resp = self.svc.http.request(method, f"{self.svc.base}{path}", timeout=300, **kwargs)
        resp.raise_for_status()
        return resp.json()

    def source(self, sid: str, root: Path, watch: bool = True) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.api(
            "POST", "/api/sources", json={"id": sid, "name": sid, "root_path": str(root), "watch": watch}
        )

    def scan(self, sid: str) -> dict:
        return self.api("POST", f"/api/sources/{sid}/reindex", params={"wait": "300"})["stats"]

    def paths(self, q: str, sid: str) -> set[str]:
        body = self.api("POST", "/api/search", json={"q": q, "source_id": sid, "limit": 50})
        return {r["path"] for r in body["results"]}

    def until(self, check) -> float:
        """Seconds until `check()` holds (polled over HTTP)."""
        started = time.perf_counter()
        while not check():
            if time.perf_counter() - started > TIMEOUT:
                raise RuntimeError("a change was not reflected in time")
            time.sleep(POLL)
        return time.perf_counter() - started

    def watched(self, sid: str) -> None:
        self.until(lambda: self.api("GET", f"/api/status/{sid}")["watch_state"] == "watching")

    # -- one change at a time ------------------------------------------------------------------
    def edits(self, count: int) -> dict:
        root = self.top / "edits"
        self.source("edits", root)
        files: dict[Path, str] = {}
        for n in range(50):
            files[root / f"seed{n}.txt"] = word(self.rng)
            (root / f"seed{n}.txt").write_text(f"seed {files[root / f'seed{n}.txt']}\n")
        self.scan("edits")
        self.watched("edits")
        kinds = ["create", "modify", "rename", "move"]
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for n in range(count):
            kind = kinds[n % len(kinds)]
            times[kind].append(self._edit(kind, root, files, n) * 1000)
        deletes = []
        for path in list(files)[: count // 2]:
            token = files.pop(path)
            started = time.perf_counter()
            path.unlink()
            self.until(lambda p=str(path), t=token: p not in self.paths(t, "edits"))
            deletes.append((time.perf_counter() - started) * 1000)
        every = [t for ts in times.values() for t in ts]
        return {
            "write_to_searchable_ms": percentiles(every),
            "by_kind_ms": {k: percentiles(v) for k, v in times.items()},
            "delete_to_gone_ms": percentiles(deletes),
        }

    def _edit(self, kind: str, root: Path, files: dict[Path, str], n: int) -> float:
        token = word(self.rng)
        started = time.perf_counter()
        if kind == "create" or not files:
            path = root / f"new{n}.txt"
            path.write_text(f"note {token}\n")
        else:
            old = self.rng.choice(list(files))
            token = files.pop(old)
            if kind == "modify":
                token = word(self.rng)
                path = old
                path.write_text(f"changed {token}\n")
            elif kind == "rename":
                path = old.with_name(f"renamed{n}.txt")
                old.rename(path)
            else:
                folder = root / f"folder{n % 7}"
                folder.mkdir(exist_ok=True)
                path = folder / f"moved{n}.txt"
                old.rename(path)
        files[path] = token
        self.until(lambda: str(path) in self.paths(token, "edits"))
        return time.perf_counter() - started

    # -- a burst against a manual scan ----------------------------------------------------------
    def burst(self, count: int) -> dict:
        live_root, scan_root = self.top / "burst-live", self.top / "burst-scan"
        self.source("burst-live", live_root)
        self.source("burst-scan", scan_root, watch=False)
        for sid in ("burst-live", "burst-scan"):
            self.scan(sid)
        self.watched("burst-live")
        at_rest = self.search_times(lambda n: n >= 50)
        busy = threading.Event()
        during: list[float] = []
        sampler = threading.Thread(
            target=lambda: during.extend(self.search_times(lambda n: busy.is_set() and n > 0)), daemon=True
        )
        sampler.start()
        for n in range(count):  # the same files into both, at the same time
            folder = f"d{n // 100}"
            for root in (live_root, scan_root):
                (root / folder).mkdir(exist_ok=True)
                (root / folder / f"f{n}.txt").write_text(f"burst file {n} {word(self.rng)}\n")
        started = time.perf_counter()
        self.api("POST", "/api/sources/burst-scan/reindex")  # the manual scan, at this moment
        done: dict[str, float] = {}
        while len(done) < 2 and time.perf_counter() - started < 1800:
            for sid in ("burst-live", "burst-scan"):
                if sid not in done and self.api("GET", f"/api/status/{sid}")["total_files"] >= count:
                    done[sid] = time.perf_counter() - started
            time.sleep(0.1)
        busy.set()
        sampler.join()
        live_stats = self.api("GET", "/api/status/burst-live")["last_live_update"]
        return {
            "files": count,
            "live_seconds": round(done["burst-live"], 2),
            "manual_scan_seconds": round(done["burst-scan"], 2),
            "search_ms_at_rest": percentiles(at_rest),
            "search_ms_during_burst": percentiles(during),
            "live_update": {
                k: live_stats.get(k) for k in ("new_files", "total_scanned", "started_at", "finished_at")
            },
        }

    def search_times(self, stop) -> list[float]:
        """Milliseconds of searches (over the edits source) until `stop(count)` holds."""
        http = requests.Session()
        http.headers.update(self.svc.http.headers)
        times: list[float] = []
        while not stop(len(times)):
            started = time.perf_counter()
            resp = http.post(
                f"{self.svc.base}/api/search", timeout=60, json={"q": "note changed seed", "limit": 20}
            )
            resp.raise_for_status()
            times.append((time.perf_counter() - started) * 1000)
        return times

    # -- the watcher at rest -------------------------------------------------------------------
    def idle(self, files: int) -> dict:
        root = self.top / f"tree-{files}"
        if not root.exists():
            log(f"writing a tree of {files} files ...")
            for n in range(files):
                folder = root / f"part{n // 1000}" / f"dir{n // FILES_PER_DIR}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / f"file{n}.txt").write_text(f"tree file {n}\n")
        self.source("tree", root)
        self.watched("tree")
        watcher = next(p for p in tree_of(self.svc.proc.pid) if "watcher" in " ".join(p.cmdline()))
        time.sleep(2.0)
        before = watcher.cpu_times()
        time.sleep(IDLE_SECONDS)
        after = watcher.cpu_times()
        used = (after.user - before.user) + (after.system - before.system)
        folders = sum(1 for _ in root.rglob("*") if _.is_dir()) + 1
        mem = watcher.memory_full_info()
        return {
            "files": files,
            "folders_watched": folders,
            "watcher_rss_mb": round(mem.rss / 2**20, 1),
            "watcher_uss_mb": round(mem.uss / 2**20, 1),
            "watcher_idle_cpu_percent": round(100 * used / IDLE_SECONDS, 2),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edits", type=int, default=200)
    parser.add_argument("--burst", type=int, default=5000)
    parser.add_argument("--tree", type=int, default=50_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    top = WORK / "live"
    for name in ("edits", "burst-live", "burst-scan"):
        shutil.rmtree(top / name, ignore_errors=True)
    (top / "unused").mkdir(parents=True, exist_ok=True)
    env = {"ALLOWED_ROOTS": str(top)}
    result = {
        "date": date.today().isoformat(),
        "machine": machine(WORK),
        "load_average_before": os.getloadavg(),
    }
    with TrawlService(WORK / "live-data", top / "unused", workers=args.workers, env=env, watch=False) as svc:
        bench = Bench(svc, top)
        log(f"{args.edits} edits one at a time ...")
        result["edits"] = bench.edits(args.edits)
        log(json.dumps(result["edits"]))
        log(f"a burst of {args.burst} files against a manual scan ...")
        result["burst"] = bench.burst(args.burst)
        log(json.dumps(result["burst"]))
        log(f"the watcher at rest over {args.tree} files ...")
        result["idle"] = bench.idle(args.tree)
        log(json.dumps(result["idle"]))
    result["load_average_after"] = os.getloadavg()
    out = HERE / "results" / f"live-{result['date']}.json"
    out.write_text(json.dumps(result, indent=2))
    log(f"written {out}")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
