"""What one embedding write costs as a source grows: `python -m bench.vector_writes`.

The embedding phase writes the vectors of DOCS_PER_WRITE documents at a time (two passages
each, as the 2,000-character articles of the meaning benchmark). For each source size:

- before: the store of one file per source (load it whole, replace the documents' keys, save
  it whole to a temporary file renamed over it), as search/vectors.py did before segments;
- after: VectorStore's segments (one new segment per write, merges as they fall due), its
  first segment being the same one file (adopted as a store from before segments is).

Per write: CPU seconds of this process (time.process_time: the machine is shared, wall time
is noisy), wall seconds, and bytes written to disk (/proc/self/io `write_bytes`, or the new
files' sizes where that is not counted). Results: bench/results/vector-writes-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from webapp.search.embedder import DIMENSIONS
from webapp.search.vectors import VectorStore

RESULTS = Path(__file__).resolve().parent / "results"
DOCS_PER_WRITE = 8  # embed_phase.DOCS_PER_READ when measured (128 since, docs/performance.md)
PASSAGES = 2
QUERIES = 100  # nearest() calls timed on each store


def _index():
    from usearch.index import Index

    return Index(ndim=DIMENSIONS, metric="cos", dtype="f16", multi=True)


def _batch(rng: np.random.Generator, first: int, docs: int) -> tuple[np.ndarray, np.ndarray]:
    keys = np.repeat(np.arange(first, first + docs, dtype=np.uint64), PASSAGES)
    rows = rng.standard_normal((len(keys), DIMENSIONS)).astype(np.float32)
    return keys, rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _written() -> int:
    with open("/proc/self/io") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("write_bytes"))


def build(path: Path, docs: int, rng: np.random.Generator) -> float:
    """A source of `docs` documents stored as one file; the CPU seconds it took."""
    started = time.process_time()
    index = _index()
    for first in range(0, docs, 5000):
        index.add(*_batch(rng, first, min(5000, docs - first)), threads=1)
    index.save(str(path))
    return time.process_time() - started


def write_before(path: Path, keys: np.ndarray, rows: np.ndarray) -> None:
    """One write as the one-file store made it: load whole, replace, save whole, rename."""
    index = _index()
    index.load(str(path))
    for key in np.unique(keys):
        index.remove(int(key))
    index.add(keys, rows, threads=1)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    index.save(str(tmp))
    os.replace(tmp, path)


def _timed(action, writes: int) -> dict:
    cpu, wall, disk = [], [], []
    for n in range(writes):
        before = (time.process_time(), time.monotonic(), _written())
        action(n)
        cpu.append(time.process_time() - before[0])
        wall.append(time.monotonic() - before[1])
        disk.append(_written() - before[2])
    cpu_sorted = sorted(cpu)
    return {
        "writes": writes,
        "cpu_mean_s": round(statistics.mean(cpu), 4),
        "cpu_p95_s": round(cpu_sorted[int(0.95 * (writes - 1))], 4),
        "cpu_max_s": round(max(cpu), 4),
        "wall_mean_s": round(statistics.mean(wall), 4),
        "bytes_written_mean": int(statistics.mean(disk)),
    }


def measure(docs: int, writes_before: int, writes_after: int, work: Path) -> dict:
    """Before and after at one source size."""
    rng = np.random.default_rng(docs)
    one = work / "one.usearch"
    built = build(one, docs, rng)
    size = one.stat().st_size
    shutil.copy(one, work / "copy.usearch")
    (work / "single").mkdir()
    shutil.copy(one, work / "single" / "s.usearch")  # read as one segment, never written
    new = [_batch(rng, docs + 1_000_000 + n * DOCS_PER_WRITE, DOCS_PER_WRITE) for n in range(writes_after)]
    before = _timed(lambda n: write_before(one, *new[n % len(new)]), writes_before)
    store_root = work / "store"
    store_root.mkdir()
    os.replace(work / "copy.usearch", store_root / "s.usearch")  # adopted as the first segment
    store = VectorStore(store_root)

    def write_after(n: int) -> None:
        keys, rows = new[n]
        store.add("s", {f"s--{int(k):012x}": rows[keys == k] for k in np.unique(keys)})
        store.merge("s")

    after = _timed(write_after, writes_after)
    segments = len(list((store_root / "s").glob("seg-*")))
    queries = [row for _, rows in new[:QUERIES] for row in rows[:1]]
    return {"documents": docs, "file_bytes": size, "build_cpu_s": round(built, 1), "before": before,
            "after": after, "segments_after": segments,
            "query_ms_one_file": _query_ms(VectorStore(work / "single"), queries),
            "query_ms_segments": _query_ms(store, queries)}  # fmt: skip


def _query_ms(store: VectorStore, queries: list[np.ndarray]) -> dict:
    """p50 / p95 of `nearest` (50 documents, as hybrid search asks), CPU milliseconds."""
    store.nearest(queries[0], ["s"], 50)  # mapped
    times = []
    for vector in queries:
        started = time.process_time()
        store.nearest(vector, ["s"], 50)
        times.append((time.process_time() - started) * 1000)
    times.sort()
    return {"p50": round(times[len(times) // 2], 2), "p95": round(times[int(0.95 * (len(times) - 1))], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,50000")
    parser.add_argument("--writes-before", type=int, default=20)
    parser.add_argument("--writes-after", type=int, default=300)
    args = parser.parse_args()
    out = []
    for docs in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as work:
            row = measure(docs, args.writes_before, args.writes_after, Path(work))
        print(json.dumps(row), flush=True)
        out.append(row)
    RESULTS.mkdir(exist_ok=True)
    target = RESULTS / f"vector-writes-{date.today()}.json"
    target.write_text(json.dumps(out, indent=1))
    print(f"written {target}")


if __name__ == "__main__":
    main()
