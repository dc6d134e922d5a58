"""Recoll on the same corpus: recollindex with its own config dir, recollq, the Python module."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from bench.measure import PeakSampler, disk_usage, percentiles

PACKAGES = ("recollcmd", "poppler-utils", "python3-lxml")
HERE = Path(__file__).resolve().parent
SYSTEM_PYTHON = "/usr/bin/python3"


def ensure_installed(log: Callable[[str], None]) -> str | None:
    """Recoll's version, installing the Debian packages when missing; None when unavailable."""
    if shutil.which("recollindex") is None:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            log(
                "Recoll is NOT installed and cannot be installed here (not root or no apt-get): "
                "the Recoll side is skipped."
            )
            return None
        log(f"recollindex missing: installing {' '.join(PACKAGES)} with apt-get ...")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        ok = (
            subprocess.run(["apt-get", "update", "-qq"], env=env).returncode == 0
            and subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], env=env).returncode == 0
        )
        if not ok or shutil.which("recollindex") is None:
            log("Recoll could NOT be installed (apt-get failed): the Recoll side is skipped.")
            return None
    return _version()


def _version() -> str:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", "recollcmd"], capture_output=True, text=True
    )
    return out.stdout.strip() or "unknown"


def python_module_available(log: Callable[[str], None]) -> bool:
    """Whether the system python3 can import recoll, installing python3-recoll if possible."""
    probe = [SYSTEM_PYTHON, "-c", "from recoll import recoll"]
    if not os.path.exists(SYSTEM_PYTHON):
        return False
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return True
    if os.geteuid() == 0 and shutil.which("apt-get"):
        log("Installing python3-recoll for the in-process query timing ...")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "install", "-y", "-qq", "python3-recoll"], env=env, capture_output=True)
    return subprocess.run(probe, capture_output=True).returncode == 0


class Recoll:
    """One Recoll configuration (RECOLL_CONFDIR) indexing the corpus."""

    def __init__(self, confdir: Path, corpus_root: Path) -> None:
        self.confdir = confdir
        if confdir.exists():
            shutil.rmtree(confdir)
        confdir.mkdir(parents=True)
        # idxniceprio: recollindex lowers its own priority to 19 by default; Trawl's processes
        # run at 0, so Recoll does too (anything else running would slow Recoll alone)
        (confdir / "recoll.conf").write_text(
            f"topdirs = {corpus_root}\nloglevel = 2\n"
            f"logfilename = {confdir / 'recoll.log'}\n"
            "idxniceprio = 0\n"
        )
        self.env = {**os.environ, "RECOLL_CONFDIR": str(confdir)}

    def index(self) -> dict:
        """Run recollindex (incremental: the first run indexes everything); time and memory."""
        started = time.perf_counter()
        proc = subprocess.Popen(
            ["recollindex", "-c", str(self.confdir)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        root = psutil.Process(proc.pid)
        with PeakSampler(lambda: [root] if proc.poll() is None else []) as sampler:
            code = proc.wait()
            wall = time.perf_counter() - started
        if code != 0:
            raise RuntimeError(f"recollindex exited with {code}; see {self.confdir}/recoll.log")
        return {"seconds": round(wall, 3), **sampler.result()}

    def index_size(self) -> int:
        """Bytes of the Xapian database (plus Recoll's other state files)."""
        return disk_usage(self.confdir / "xapiandb", self.confdir / "idxstatus.txt")

    def document_count(self) -> int:
        """Documents in the index, as recollq counts a match-all query."""
        out = subprocess.run(
            ["recollq", "-c", str(self.confdir), "-Q", "-E", "mime:*"],
            capture_output=True,
            text=True,
            env=self.env,
        ).stdout
        for line in out.splitlines():
            if "results" in line:
                return int("".join(c for c in line.split("results")[0] if c.isdigit()) or 0)
        return 0

    def recollq_latency(self, queries: dict[str, list[str]], limit: int = 20) -> dict:
        """Per-query `recollq` process (start-up included, as a user's script would pay)."""
        out = {}
        for kind, qs in queries.items():
            times, hits = [], 0
            for q in qs:
                started = time.perf_counter()
                res = subprocess.run(
                    ["recollq", "-c", str(self.confdir), "-b", "-n", str(limit), q],
                    capture_output=True,
                    text=True,
                    env=self.env,
                )
                times.append((time.perf_counter() - started) * 1000)
                hits += bool(res.stdout.strip())
            out[kind] = {**percentiles(times), "queries_with_hits": hits}
        return out

    def python_latency(self, queries: dict[str, list[str]], limit: int = 20) -> dict:
        """In-process latency through the `recoll` Python module (system python3)."""
        job = json.dumps({"confdir": str(self.confdir), "limit": limit, "queries": queries})
        res = subprocess.run(
            [SYSTEM_PYTHON, str(HERE / "recoll_query.py")],
            input=job,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=3600,
        )
        if res.returncode != 0:
            raise RuntimeError(f"recoll Python module failed: {res.stderr[-500:]}")
        raw = json.loads(res.stdout)
        return {kind: {**percentiles(v["ms"]), "queries_with_hits": v["hits"]} for kind, v in raw.items()}
