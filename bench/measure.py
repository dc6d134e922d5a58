"""Measuring helpers of the benchmark: peak memory of a process tree, latency percentiles, sizes."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil

SAMPLE_SECONDS = 0.5  # often enough for peaks that build up over seconds; reading every
# process's memory map costs CPU that the measured processes would miss


def tree(roots: Iterable[psutil.Process]) -> list[psutil.Process]:
    """The roots and all their descendants (processes that vanish meanwhile are left out)."""
    out: dict[int, psutil.Process] = {}
    for root in roots:
        try:
            out[root.pid] = root
            for child in root.children(recursive=True):
                out[child.pid] = child
        except psutil.Error:
            continue
    return list(out.values())


def memory(procs: Iterable[psutil.Process]) -> tuple[int, int, list[dict]]:
    """(sum of RSS, sum of PSS) in bytes and each process's share; PSS counts shared pages once."""
    rss = pss = 0
    each = []
    for proc in procs:
        try:
            info = proc.memory_full_info()
            title, ppid = " ".join(proc.cmdline())[:60], proc.ppid()
        except psutil.Error:
            continue
        rss += info.rss
        pss += getattr(info, "pss", info.rss)
        each.append(
            {
                "pid": proc.pid,
                "ppid": ppid,
                "title": title,
                "rss_mb": round(info.rss / 2**20, 1),
                "pss_mb": round(getattr(info, "pss", info.rss) / 2**20, 1),
                "uss_mb": round(getattr(info, "uss", info.rss) / 2**20, 1),
            }
        )
    return rss, pss, each


class PeakSampler:
    """Sample the memory of the processes `find()` returns every SAMPLE_SECONDS and keep the peaks."""

    def __init__(self, find: Callable[[], list[psutil.Process]]) -> None:
        self.find = find
        self.peak_rss = self.peak_pss = 0
        self.peak_procs = 0
        self.at_peak: list[dict] = []  # the processes at the PSS peak
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="bench-sampler")

    def _loop(self) -> None:
        while not self._stop.is_set():
            procs = tree(self.find())
            rss, pss, each = memory(procs)
            if pss > self.peak_pss:
                self.at_peak = each
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self.peak_procs = max(self.peak_procs, len(procs))
            self._stop.wait(SAMPLE_SECONDS)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def result(self) -> dict:
        """Peaks in MB."""
        return {
            "peak_rss_mb": round(self.peak_rss / 2**20, 1),
            "peak_pss_mb": round(self.peak_pss / 2**20, 1),
            "max_processes": self.peak_procs,
            "processes_at_peak": self.at_peak,
        }


def percentiles(samples_ms: list[float]) -> dict:
    """p50/p95/p99/mean of latencies in milliseconds (nearest-rank)."""
    if not samples_ms:
        return {"n": 0}
    ordered = sorted(samples_ms)

    def rank(p: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))], 2)

    return {
        "n": len(ordered),
        "p50": rank(50),
        "p95": rank(95),
        "p99": rank(99),
        "mean": round(sum(ordered) / len(ordered), 2),
    }


def disk_usage(*paths: Path) -> int:
    """Bytes used by these files and folders (missing ones count 0)."""
    total = 0
    for path in paths:
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return total


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    """(seconds, result) of one call."""
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def machine(work: Path) -> dict:
    """CPU model, cores, RAM, disk and software versions of this machine."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    disk = shutil.disk_usage(work)
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "disk": _disk_description(work),
        "disk_free_gb": round(disk.free / 2**30, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": _versions("tantivy", "pymupdf", "rq", "redis", "gunicorn", "flask"),
    }


def _disk_description(path: Path) -> str:
    try:
        out = (
            subprocess.run(
                ["df", "--output=source,fstype", str(path)], capture_output=True, text=True, timeout=5
            )
            .stdout.splitlines()[-1]
            .split()
        )
        device = os.path.basename(out[0])
        rotational = Path(f"/sys/block/{device}/queue/rotational")
        kind = (
            ("HDD" if rotational.read_text().strip() == "1" else "SSD/virtual")
            if rotational.exists()
            else "unknown"
        )
        return f"{out[0]} ({out[1]}, {kind})"
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def _versions(*names: str) -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found
