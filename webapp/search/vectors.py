"""The passage vectors of the documents (meaning): one usearch HNSW index file per source.

`DATA_DIR/vectors/<source>.usearch` holds every embedded passage of the source's documents
under one key per document (a "multi" index: a key has up to MAX_PASSAGES vectors), the key
being the 12 hex digits of the document id (`{source}--{hex}`, indexing/scanner.doc_id), so
no table maps keys to ids. Why usearch, and what the others measured: docs/performance.md
"Meaning".

Processes: writers (the embedding job, the scan's deletions, source deletion, verify) take
the source's file lock (`<source>.lock`, fcntl), load the index, change it and save it whole
to a temporary file renamed over the old one, so a reader never sees half a file. Readers (web
processes) memory-map the file (`view`) and map it again when its size or mtime changed; an
old mapping stays valid until dropped (its inode lives on).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from webapp.search.embedder import DIMENSIONS

SUFFIX = ".usearch"
EXPANSION_SEARCH = 200  # HNSW breadth when searching (usearch's 64 found 0.74 of the true top 10)
THREADS = 1  # per call: usearch's default (every core) was 20x slower on a loaded 2-core machine


def _usearch():
    try:  # onnxruntime (the model's engine) crashes on import once usearch is loaded: first
        import onnxruntime  # noqa: F401
    except ImportError:
        pass
    from usearch.index import Index  # heavy, and optional: only where vectors are used

    return Index


def doc_key(doc_id: str) -> int:
    """The index key of a document id (`{source}--{12 hex}`)."""
    return int(doc_id.rsplit("--", 1)[1], 16)


def key_doc(source_id: str, key: int) -> str:
    return f"{source_id}--{int(key):012x}"


class VectorStore:
    """Per-source passage vectors under `root`; safe across processes (see the module doc)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self._views: dict[str, tuple[tuple[int, int], object]] = {}
        self._lock = threading.Lock()

    def _file(self, source_id: str) -> Path:
        return self.root / f"{source_id}{SUFFIX}"

    @contextmanager
    def _writing(self, source_id: str) -> Iterator[object]:
        """The source's index loaded for a change, saved (atomically) when the block ends."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{source_id}.lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            path = self._file(source_id)
            index = _usearch()(ndim=DIMENSIONS, metric="cos", dtype="f16", multi=True)
            if path.exists():
                index.load(str(path))
            yield index
            tmp = path.with_name(f".{path.name}.{os.getpid()}")
            index.save(str(tmp))
            os.replace(tmp, path)

    def add(self, source_id: str, vectors: dict[str, np.ndarray]) -> None:
        """Replace the passages of these documents ({doc id: (n, DIMENSIONS) array})."""
        if not vectors:
            return
        with self._writing(source_id) as index:
            keys, rows = [], []
            for doc_id, matrix in vectors.items():
                key = doc_key(doc_id)
                index.remove(key)
                keys += [key] * len(matrix)
                rows.append(np.asarray(matrix, dtype=np.float32).reshape(-1, DIMENSIONS))
            if keys:
                index.add(np.array(keys, dtype=np.uint64), np.vstack(rows), threads=THREADS)

    def delete_ids(self, doc_ids: Iterable[str]) -> None:
        """Remove the passages of these documents (of any source); unknown ids are ignored."""
        by_source: dict[str, list[int]] = {}
        for doc_id in doc_ids:
            source_id = doc_id.rsplit("--", 1)[0]
            if self._file(source_id).exists():
                by_source.setdefault(source_id, []).append(doc_key(doc_id))
        for source_id, keys in by_source.items():
            with self._writing(source_id) as index:
                for key in keys:
                    index.remove(key)

    def delete_source(self, source_id: str) -> None:
        """Remove a source's vectors (its file)."""
        for name in (f"{source_id}{SUFFIX}", f"{source_id}.lock"):
            (self.root / name).unlink(missing_ok=True)

    def clear(self) -> None:
        """Remove every vector (the index is being rebuilt)."""
        shutil.rmtree(self.root, ignore_errors=True)

    def _view(self, source_id: str):
        """The source's index mapped read-only (mapped again after a write), or None."""
        path = self._file(source_id)
        try:
            stat = path.stat()
        except FileNotFoundError:
            return None
        stamp = (stat.st_size, stat.st_mtime_ns)
        with self._lock:
            cached = self._views.get(source_id)
            if cached is None or cached[0] != stamp:
                cached = (stamp, _usearch().restore(str(path), view=True))
                self._views[source_id] = cached
            return cached[1]

    def nearest(
        self, vector: np.ndarray, source_ids: Iterable[str], k: int, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """The k documents whose best passage is closest to `vector` among these sources:
        (doc id, cosine similarity), best first."""
        best: dict[str, float] = {}
        for source_id in source_ids:
            index = self._view(source_id)
            if index is None or not len(index):
                continue
            index.expansion_search = EXPANSION_SEARCH
            found = index.search(np.asarray(vector, dtype=np.float32), k * 3, threads=THREADS)
            for key, distance in zip(found.keys, found.distances, strict=True):
                doc_id = key_doc(source_id, key)
                best[doc_id] = max(best.get(doc_id, -1.0), 1.0 - float(distance))
        best.pop(exclude, None)
        return sorted(best.items(), key=lambda item: -item[1])[:k]

    def vectors_of(self, doc_id: str) -> np.ndarray | None:
        """The passages of one document ((n, DIMENSIONS) float32), or None when it has none."""
        index = self._view(doc_id.rsplit("--", 1)[0])
        if index is None or not index.contains(doc_key(doc_id)):
            return None
        return np.asarray(index.get(doc_key(doc_id)), dtype=np.float32).reshape(-1, DIMENSIONS)

    def passages(self, source_id: str) -> int:
        """Passages stored for a source (0 when none)."""
        index = self._view(source_id)
        return len(index) if index is not None else 0

    def disk_bytes(self) -> int:
        """Size of every vector file."""
        if not self.root.exists():
            return 0
        return sum(p.stat().st_size for p in self.root.glob(f"*{SUFFIX}"))
