"""The passage vectors of the documents (meaning): per source, a folder of immutable segments.

`DATA_DIR/vectors/<source>/` holds usearch HNSW index files (segments) and key lists of
deletions (tombstones), each named by the write that made it (a sequence number):

- `seg-<lo>-<hi>-<crc32>.usearch`: the passages of some documents, under one key per document
  (a "multi" index: a key has up to MAX_PASSAGES vectors), the key being the 12 hex digits of
  the document id (`{source}--{hex}`, indexing/scanner.doc_id), so no table maps keys to ids.
  A written segment covers one write (lo = hi); a merged one the writes lo..hi it replaces.
- `del-<seq>-<crc32>.keys`: the keys (uint64) of documents deleted by write `seq`.

A key's passages are those of the newest segment (highest hi) holding it, unless a tombstone
newer than that segment names it. So a write costs what it writes, whatever the source's size
(it used to load and rewrite the source's one file: 0.35 s a write at 50k documents):
docs/performance.md "Meaning". Segments are merged in the background of the embedding phase
(`merge`): the newest run of MERGE_FANOUT segments of the same size class becomes one, so a
source has a few segments per size class and each vector is rewritten about log(n) times; no
merge makes a segment over MERGE_MAX_BYTES (a merge rebuilds its HNSW graph: it must fit in
one job); such a large segment mostly superseded is rewritten alone (`_compact`).

Every file is written to a temporary name, flushed to disk (fsync), renamed and its folder
flushed, so a crash or kill mid-write leaves the old state whole; a temporary file left by a
killed process is swept (`sweep`). A segment or tombstone that cannot be read (garbage, empty,
cut short) leaves its source out of meaning (`problem` says why; every other source answers),
until `verify --repair` drops the source's vectors for embedding again.

Processes: writers take the source's file lock (`<source>.lock`, fcntl); a merge reads
segments without it (they never change) and takes it only to swap files. Readers (web
processes) memory-map the segments (`view`) and look at the folder again at each search (a
listing and a stat per file); an old mapping stays valid after its file is removed.

A source stored before segments (`<source>.usearch`, one file) is read as its first segment
and moved into its folder by its next write.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from webapp.search import segments
from webapp.search.embedder import DIMENSIONS
from webapp.search.segments import (
    MERGE_FANOUT,
    SEGMENT_NAME,
    TOMBSTONE_NAME,
    SegmentFile,
    Unreadable,
    crc_of,
    fsync_dir,
    merge_run,
    read_keys,
    save_segment,
    save_tombstone,
    stale,
)

log = logging.getLogger(__name__)
SUFFIX = ".usearch"
EXPANSION_SEARCH = 200  # HNSW breadth when searching (usearch's 64 found 0.74 of the true top 10)
THREADS = 1  # per call: usearch's default (every core) was 20x slower on a loaded 2-core machine
COMPACT_EVERY = 256  # writes between two looks for large segments mostly superseded ...
COMPACT_SHARE = 0.5  # ... by newer passages or deletions: such a one is rewritten alone


def _usearch():
    try:  # onnxruntime (the model's engine) crashes on import once usearch is loaded: first
        import onnxruntime  # noqa: F401
    except ImportError:
        pass
    from usearch.index import Index  # heavy, and optional: only where vectors are used

    return Index


def _new_index():
    return _usearch()(ndim=DIMENSIONS, metric="cos", dtype="f16", multi=True)


def doc_key(doc_id: str) -> int:
    """The index key of a document id (`{source}--{12 hex}`)."""
    return int(doc_id.rsplit("--", 1)[1], 16)


def key_doc(source_id: str, key: int) -> str:
    return f"{source_id}--{int(key):012x}"


@dataclass
class _Snapshot:
    """What a reader sees of a source: its segments (oldest first) and tombstones."""

    stamp: tuple
    segments: list[tuple[SegmentFile, object]] = field(default_factory=list)  # (file, mapped index)
    deleted: dict[int, int] = field(default_factory=dict)  # key -> newest tombstone seq
    problem: str | None = None


class VectorStore:
    """Per-source passage vectors under `root`; safe across processes (see the module doc)."""

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self._snapshots: dict[str, _Snapshot] = {}
        self._views: dict[Path, tuple[tuple[int, int, int], object]] = {}
        self._lock = threading.Lock()

    def _folder(self, source_id: str) -> Path:
        return self.root / source_id

    def _legacy(self, source_id: str) -> Path:
        return self.root / f"{source_id}{SUFFIX}"

    # -- listing and reading -------------------------------------------------------------------
    def _listing(self, source_id: str) -> tuple[list[SegmentFile], list[SegmentFile]]:
        """The source's segments (oldest first: by hi, the wider of two equal) and tombstones."""
        segments, tombstones = [], []
        legacy = self._legacy(source_id)
        entries = [(legacy.name, legacy)] if legacy.exists() else []
        folder = self._folder(source_id)
        if folder.is_dir():
            entries += [(e.name, Path(e.path)) for e in os.scandir(folder)]
        for name, path in entries:
            try:
                st = path.stat()
            except FileNotFoundError:
                continue  # merged away meanwhile
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            if path == legacy:
                segments.append(SegmentFile(path, 0, 0, None, stamp))
            elif match := SEGMENT_NAME.match(name):
                lo, hi, crc = int(match[1]), int(match[2]), int(match[3], 16)
                segments.append(SegmentFile(path, lo, hi, crc, stamp))
            elif match := TOMBSTONE_NAME.match(name):
                seq = int(match[1])
                tombstones.append(SegmentFile(path, seq, seq, int(match[2], 16), stamp))
        segments.sort(key=lambda f: (f.hi, -f.lo))
        return segments, tombstones

    def _view(self, file: SegmentFile):
        """A segment mapped read-only (kept while its file is unchanged); Unreadable."""
        cached = self._views.get(file.path)
        if cached is not None and cached[0] == file.stamp:
            return cached[1]
        try:
            index = _usearch().restore(str(file.path), view=True)
        except (ValueError, RuntimeError, OSError) as exc:
            raise Unreadable(f"{file.path.name}: {exc}") from exc
        if index is None or index.ndim != DIMENSIONS:
            raise Unreadable(f"{file.path.name}: not an index of {DIMENSIONS}-dimension vectors")
        self._views[file.path] = (file.stamp, index)
        return index

    def _snapshot(self, source_id: str) -> _Snapshot:
        """The source as it is on disk now (made again when a file came, went or changed)."""
        segments, tombstones = self._listing(source_id)
        stamp = tuple((f.path.name, f.stamp) for f in segments + tombstones)
        with self._lock:
            cached = self._snapshots.get(source_id)
            if cached is not None and cached.stamp == stamp:
                return cached
            snap = _Snapshot(stamp)
            try:
                snap.segments = [(f, self._view(f)) for f in segments]
                for tomb in sorted(tombstones, key=lambda f: f.hi):
                    for key in read_keys(tomb).tolist():
                        snap.deleted[key] = tomb.hi
            except FileNotFoundError:
                snap = None  # merged away between listing and reading: list again
            except Unreadable as exc:
                snap.segments, snap.deleted, snap.problem = [], {}, str(exc)
                log.warning("vectors of %s cannot be read, left out of meaning: %s", source_id, exc)
            if snap is not None:
                self._snapshots[source_id] = snap
                self._forget_others(source_id, {f.path for f in segments})
        return snap if snap is not None else self._snapshot(source_id)

    def _forget_others(self, source_id: str, kept: set[Path]) -> None:
        """Drop the mappings of the source's files merged away (a mapping would keep a
        removed file's disk space until the process ends)."""
        folder, legacy = self._folder(source_id), self._legacy(source_id)
        for path in [p for p in self._views if p.parent == folder or p == legacy]:
            if path not in kept:
                del self._views[path]

    def problem(self, source_id: str) -> str | None:
        """Why the source's vectors cannot be read, or None when they can (or there are none)."""
        return self._snapshot(source_id).problem

    def check(self, source_id: str) -> str | None:
        """`problem`, and every byte of every file against the checksum in its name (verify)."""
        segments, tombstones = self._listing(source_id)
        for file in segments + tombstones:
            try:
                if file.crc is not None and crc_of(file.path) != file.crc:
                    return f"{file.path.name}: its bytes do not match their checksum"
            except FileNotFoundError:
                continue
            except OSError as exc:
                return f"{file.path.name}: {exc}"
        return self.problem(source_id)

    # -- searching -----------------------------------------------------------------------------
    def nearest(
        self, vector: np.ndarray, source_ids: Iterable[str], k: int, exclude: str | None = None
    ) -> list[tuple[str, float]]:
        """The k documents whose best passage is closest to `vector` among these sources:
        (doc id, cosine similarity), best first. A source whose vectors cannot be read is
        left out (`problem` says why)."""
        best: dict[str, float] = {}
        query = np.asarray(vector, dtype=np.float32)
        for source_id in source_ids:
            snap = self._snapshot(source_id)
            for position, (file, index) in enumerate(snap.segments):
                newer = [i for _, i in snap.segments[position + 1 :]]
                for key, similarity in _search_live(index, query, k * 3, file.hi, newer, snap.deleted):
                    doc_id = key_doc(source_id, key)
                    best[doc_id] = max(best.get(doc_id, -1.0), similarity)
        best.pop(exclude, None)
        return sorted(best.items(), key=lambda item: -item[1])[:k]

    def vectors_of(self, doc_id: str) -> np.ndarray | None:
        """The passages of one document ((n, DIMENSIONS) float32), or None when it has none."""
        index = _holder(self._snapshot(doc_id.rsplit("--", 1)[0]), doc_key(doc_id))
        if index is None:
            return None
        return np.asarray(index.get(doc_key(doc_id)), dtype=np.float32).reshape(-1, DIMENSIONS)

    def passages(self, source_id: str) -> int:
        """Passages stored for a source (0 when none, or when they cannot be read)."""
        snap = self._snapshot(source_id)
        total = 0
        for position, (file, index) in enumerate(snap.segments):
            keys = np.asarray(index.keys, dtype=np.uint64)
            live = _live(keys, file.hi, [i for _, i in snap.segments[position + 1 :]], snap.deleted)
            total += int(live.sum())
        return total

    def disk_bytes(self) -> int:
        """Size of every vector file."""
        if not self.root.exists():
            return 0
        return sum(p.stat().st_size for p in self.root.rglob(f"*{SUFFIX}") if p.is_file())

    # -- writing -------------------------------------------------------------------------------
    @contextmanager
    def _locked(self, source_id: str, name: str = "lock", wait: bool = True) -> Iterator[bool]:
        """Hold one of the source's file locks (the writers', or the merger's) while the
        block runs; yields False when `wait` is off and another process holds it."""
        self._folder(source_id).mkdir(parents=True, exist_ok=True)
        with open(self.root / f"{source_id}.{name}", "a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True

    @contextmanager
    def _writing(self, source_id: str) -> Iterator[int]:
        """The source's writer lock held, its old single file adopted; yields the number of
        this write (one more than any file's)."""
        with self._locked(source_id):
            self._adopt_legacy(source_id)
            segments, tombstones = self._listing(source_id)
            yield max((f.hi for f in segments + tombstones), default=0) + 1

    def _adopt_legacy(self, source_id: str) -> None:
        """Move a file stored before segments into the folder as its first segment."""
        legacy = self._legacy(source_id)
        if legacy.exists():
            crc = crc_of(legacy)
            os.replace(legacy, self._folder(source_id) / f"seg-{0:010d}-{0:010d}-{crc:08x}.usearch")
            fsync_dir(self._folder(source_id))
            fsync_dir(self.root)

    def add(self, source_id: str, vectors: dict[str, np.ndarray]) -> None:
        """Replace the passages of these documents ({doc id: (n, DIMENSIONS) array}; an empty
        array removes a document's). One new segment: the cost does not grow with the source.
        Raises NoSpace when the disk is full (the old state is left whole)."""
        if not vectors:
            return
        keys, rows, emptied = [], [], []
        for doc_id, matrix in vectors.items():
            matrix = np.asarray(matrix, dtype=np.float32).reshape(-1, DIMENSIONS)
            if len(matrix):
                keys += [doc_key(doc_id)] * len(matrix)
                rows.append(matrix)
            elif _holder(self._snapshot(source_id), doc_key(doc_id)) is not None:
                emptied.append(doc_key(doc_id))  # (a tombstone only for what is there)
        if not keys and not emptied:
            return
        with self._writing(source_id) as seq:
            if keys:
                index = _new_index()
                index.add(np.array(keys, dtype=np.uint64), np.vstack(rows), threads=THREADS)
                save_segment(index, self._folder(source_id), seq, seq)
            if emptied:
                save_tombstone(self._folder(source_id), seq, emptied)

    def delete_ids(self, doc_ids: Iterable[str]) -> None:
        """Remove the passages of these documents (of any source); unknown ids are ignored.
        A tombstone per source: the cost does not grow with the source."""
        by_source: dict[str, list[int]] = {}
        snapshots: dict[str, _Snapshot] = {}
        for doc_id in doc_ids:
            source_id = doc_id.rsplit("--", 1)[0]
            if source_id not in snapshots:
                snapshots[source_id] = self._snapshot(source_id)
            if _holder(snapshots[source_id], doc_key(doc_id)) is not None:  # only what is there
                by_source.setdefault(source_id, []).append(doc_key(doc_id))
        for source_id, keys in by_source.items():
            with self._writing(source_id) as seq:
                save_tombstone(self._folder(source_id), seq, keys)

    def delete_source(self, source_id: str) -> None:
        """Remove a source's vectors (its folder and files)."""
        shutil.rmtree(self._folder(source_id), ignore_errors=True)
        for name in (f"{source_id}{SUFFIX}", f"{source_id}.lock", f"{source_id}.merge"):
            (self.root / name).unlink(missing_ok=True)
        with self._lock:
            self._snapshots.pop(source_id, None)
            self._forget_others(source_id, set())

    def clear(self) -> None:
        """Remove every vector (the index is being rebuilt)."""
        shutil.rmtree(self.root, ignore_errors=True)
        with self._lock:
            self._snapshots.clear()
            self._views.clear()

    # -- merging -------------------------------------------------------------------------------
    def merge(self, source_id: str) -> int:
        """Merge the source's newest segments while MERGE_FANOUT of a size class are there
        (outside the writers' lock: segments never change); returns the segments merged.
        Nothing when another process merges this source. Raises NoSpace."""
        merged = 0
        with self._locked(source_id, "merge", wait=False) as mine:
            while mine:
                run = merge_run(self._listing(source_id)[0])
                if not run or not self._merge(source_id, run):
                    break
                merged += len(run)
            if mine:
                merged += self._compact(source_id)
        return merged

    def _compact(self, source_id: str) -> int:
        """Every COMPACT_EVERY writes: rewrite alone (same writes, fewer passages) each segment
        too large to merge whose passages are mostly superseded (a full rebuild embeds every
        document again); returns how many."""
        snap = self._snapshot(source_id)
        if snap.problem or not snap.segments or snap.segments[-1][0].hi % COMPACT_EVERY:
            return 0
        done = 0
        for position, (file, view) in enumerate(snap.segments):
            if file.stamp[1] * MERGE_FANOUT < segments.MERGE_MAX_BYTES or not len(view):
                continue
            newer = [i for _, i in snap.segments[position + 1 :]]
            keys = np.unique(np.asarray(view.keys, dtype=np.uint64))
            if _live(keys, file.hi, newer, snap.deleted).mean() < 1 - COMPACT_SHARE:
                done += self._merge(source_id, [file], whole=snap)
        return done

    def _merge(self, source_id: str, run: list[SegmentFile], whole: _Snapshot | None = None) -> bool:
        """Write the live passages of `run` (a suffix of the segments, or one segment) as one
        segment, then swap it in under the writers' lock; False when the source changed."""
        snap = whole or self._snapshot(source_id)
        paths = [f.path for f, _ in snap.segments]
        if snap.problem or any(f.path not in paths for f in run):
            return False
        start = paths.index(run[0].path)
        index = _new_index()
        for position in range(start, start + len(run)):
            file, view = snap.segments[position]
            newer = [i for _, i in snap.segments[position + 1 :]]
            _copy_live(view, index, file.hi, newer, snap.deleted)
        folder, lo, hi = self._folder(source_id), run[0].lo, run[-1].hi
        tmp = save_segment(index, folder, lo, hi, publish=False) if len(index) else None
        with self._locked(source_id):
            if any(not f.path.exists() for f in run):
                if tmp is not None:
                    tmp.unlink(missing_ok=True)
                return False
            if tmp is not None:
                os.replace(tmp, folder / f"seg-{lo:010d}-{hi:010d}-{crc_of(tmp):08x}.usearch")
            for f in run:
                f.path.unlink(missing_ok=True)
            if start == 0:
                self._drop_applied(source_id, {name for name, _ in snap.stamp}, hi)
            fsync_dir(folder)
        return True

    def _drop_applied(self, source_id: str, seen: set[str], merged: int) -> None:
        """After a merge from the oldest segment: remove the tombstones the merge applied
        (seen by it) that have no other segment older than them left to hide."""
        segments, tombstones = self._listing(source_id)
        for tomb in tombstones:
            if tomb.path.name in seen and not any(f.hi < tomb.hi and f.hi != merged for f in segments):
                tomb.path.unlink(missing_ok=True)

    # -- housekeeping --------------------------------------------------------------------------
    def sweep(self) -> int:
        """Remove temporary files left by killed writers (of this host whose process is gone,
        of another host after TEMP_MAX_AGE); returns how many. Called as processes start."""
        if not self.root.is_dir():
            return 0
        swept = 0
        for folder in [self.root, *(p for p in self.root.iterdir() if p.is_dir())]:
            for path in folder.iterdir():
                if path.name.startswith(".") and stale(path):
                    path.unlink(missing_ok=True)
                    swept += 1
        return swept

    def sources(self) -> list[str]:
        """The sources that have vectors on disk."""
        if not self.root.is_dir():
            return []
        names = {p.name for p in self.root.iterdir() if p.is_dir()}
        return sorted(names | {p.name[: -len(SUFFIX)] for p in self.root.glob(f"*{SUFFIX}")})


def _holder(snap: _Snapshot, key: int):
    """The segment (mapped) holding a key's current passages, or None."""
    for file, index in reversed(snap.segments):  # the newest segment holding it
        if snap.deleted.get(key, -1) > file.hi:
            return None
        if index.contains(key):
            return index
    return None


def _live(keys: np.ndarray, hi: int, newer: list, deleted: dict[int, int]) -> np.ndarray:
    """Which of these keys of the segment made by write `hi` are its document's current
    passages: held by no newer segment, named by no newer tombstone."""
    alive = np.ones(len(keys), dtype=bool)
    if not len(keys):
        return alive
    for index in newer:
        if len(index):
            alive &= ~np.asarray(index.contains(keys), dtype=bool)
    if deleted:
        alive &= np.fromiter((deleted.get(k, -1) <= hi for k in keys.tolist()), dtype=bool, count=len(keys))
    return alive


def _search_live(index, query: np.ndarray, count: int, hi: int, newer: list, deleted: dict[int, int]):
    """(key, similarity) of the `count` passages of one segment nearest to `query` that are
    still current (searching wider while superseded ones fill the answer)."""
    size = len(index)
    if not size:
        return []
    index.expansion_search = EXPANSION_SEARCH
    wanted = n = min(count, size)
    while True:
        found = index.search(query, n, threads=THREADS)
        keys = np.asarray(found.keys, dtype=np.uint64)
        alive = _live(keys, hi, newer, deleted)
        if int(alive.sum()) >= wanted or n >= size:
            break
        n = min(n * 4, size)
    return [(int(k), 1.0 - float(d)) for k, d, a in zip(keys, found.distances, alive, strict=True) if a]


def _copy_live(view, index, hi: int, newer: list, deleted: dict[int, int]) -> None:
    """Add a segment's current passages to `index` (a merge)."""
    keys = np.unique(np.asarray(view.keys, dtype=np.uint64))
    keys = keys[_live(keys, hi, newer, deleted)]
    for start in range(0, len(keys), 1024):
        chunk = keys[start : start + 1024]
        matrices = [np.asarray(m, dtype=np.float32).reshape(-1, DIMENSIONS) for m in view.get(chunk)]
        repeated = np.repeat(chunk, [len(m) for m in matrices])
        index.add(repeated, np.vstack(matrices), threads=THREADS)
