"""The OCR phase of a source: after a scan has indexed every document (by name and metadata),
read the text of those waiting for OCR and add it to them.

It runs as jobs of the OCR queue, which workers serve after the main one, under the policy of
background phases (indexing/background.py): a job holds a slot (one worker is always left to
indexing), reads page by page, and between pages gives its worker back when a scan, live update
or helper waits, or after JOB_SECONDS, keeping the pages read so far (DATA_DIR/ocr, `.partial`)
for its successor, which queues behind the main queue. A deleted source ends the page being read
within about a second (the OCR child and its tesseract are killed). Members of archives and
e-mails (a scan attached to a message) are read too: the OCR child reads them out of their
container into a spool folder first, a batch of one container's pending members per walk of it.
Text is cached by the SHA-256 of the bytes (and the languages) under DATA_DIR/ocr, so the same
bytes are never read twice: not after a rescan, a full rebuild or a renamed source, nor when a
file on disk and a member (or two members) are the same scan. Results are written under the
source's writer lock (indexing/state.py), the one the scan's coordinator holds for its writes,
and only for records that still describe the bytes that were read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import zlib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from flask import Flask
from sqlalchemy import func, select, update

from webapp import keys, procs
from webapp.extensions import db
from webapp.indexing import diskfull
from webapp.indexing.background import Phase, PhaseInfo, Stopped, Yielded
from webapp.indexing.extractors import (
    TIMEOUT_MESSAGE,
    ExtractionError,
    ExtractionSettings,
    read_out,
)
from webapp.indexing.isolation import Extractor, Interrupted
from webapp.indexing.ocr import (
    DONE,
    FAILED,
    OK,
    PENDING,
    SKIPPED,
    TIMED_OUT,
    OcrSettings,
    availability,
    ocr_type,
    page_count,
    read_one,
    result_of,
)
from webapp.indexing.scanner import MEMBER_SEPARATOR, doc_id
from webapp.indexing.state import held_lock, renewed, writer_lock
from webapp.models import IndexedFile, Source
from webapp.runtime import get_redis, get_search
from webapp.search import Doc

log = logging.getLogger(__name__)
WRITE_EVERY = 10  # documents per write (one index commit)
MEMBER_BATCH = 50  # pending members of one container read out of it in one walk
MEMBER_BATCH_BYTES = 256 * 1024 * 1024  # ... holding this much at most (one, if larger)
WRITE_SECONDS = 10.0  # ... or sooner, so text appears while a long queue is read
PAGE_SEPARATOR = "\n\n"


def get_engine(app: Flask) -> Extractor:
    """The process's OCR child (an extraction child that reads one page per call, each within
    the page's timeout), made on first use and again when the settings change (procs.kept)."""
    ocr = OcrSettings.from_config(app.config)
    settings = replace(ExtractionSettings.from_config(app.config), timeout_default=ocr.call_timeout)
    return procs.kept.get("ocr", (settings, ocr), lambda: Extractor(settings))


def enabled(app: Flask) -> bool:
    """Whether new documents should wait for OCR (on, and Tesseract has the languages)."""
    return availability(OcrSettings.from_config(app.config))[0] == OK


def pending_count(source_id: str) -> int:
    """Documents of the source waiting for OCR."""
    return (
        db.session.scalar(
            select(func.count())
            .select_from(IndexedFile)
            .where(IndexedFile.source_id == source_id, IndexedFile.ocr == PENDING)
        )
        or 0
    )


def pending_sources() -> list[str]:
    """Sources with documents waiting for OCR."""
    return list(
        db.session.scalars(select(IndexedFile.source_id).where(IndexedFile.ocr == PENDING).distinct())
    )


# -- the cache -----------------------------------------------------------------------------------


@dataclass
class PagesRead:
    """How far the OCR of one document got: what a job that yields in its middle keeps
    (TextCache.keep) and the next job goes on from."""

    count: int | None = None  # the document's pages; None until counted
    next: int = 0  # the first page not read yet
    texts: list[str] = field(default_factory=list)  # each page's text so far
    taken: int = 0  # pages given to Tesseract (a page with a text layer is not)
    timed_out: int = 0  # of those, pages that ran out of time
    words: dict[str, list] = field(default_factory=dict)  # page index -> its words' boxes

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict | None) -> PagesRead:
        """What to_json wrote; a new PagesRead for anything else (a damaged or older file)."""
        if not isinstance(value, dict):
            return cls()
        try:
            read = cls(**{f.name: value[f.name] for f in fields(cls) if f.name in value})
        except TypeError:
            return cls()
        ok = isinstance(read.texts, list) and all(isinstance(n, int) for n in (read.next, read.taken))
        ok = ok and isinstance(read.words, dict)
        return read if ok and (read.count is None or isinstance(read.count, int)) else cls()

    def add(self, state: str, text: str, words: list | None = None) -> None:
        """Count the next page, read (`state`: READ, SKIPPED or TIMED_OUT) with this text and
        its words' boxes (kept for the scan's page: hits drawn on it)."""
        self.taken += state != SKIPPED
        self.timed_out += state == TIMED_OUT
        self.texts.append(text)
        if words:
            self.words[str(self.next)] = words
        self.next += 1


class TextCache:
    """OCR results by content hash and languages: DATA_DIR/ocr/ab/<sha256>.<langs>.json.z."""

    def __init__(self, data_dir: str, languages: str) -> None:
        self.root = Path(data_dir) / "ocr"
        self.languages = languages

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.{self.languages}.json.z"

    def get(self, digest: str) -> dict | None:
        """The cached {"content", "metadata"}; None when there is none."""
        return self._read(self._path(digest))

    def progress(self, digest: str) -> PagesRead:
        """The pages read so far of a document whose job yielded in its middle (none: a new
        PagesRead)."""
        return PagesRead.from_json(self._read(self._partial(digest)))

    def keep(self, digest: str, progress: PagesRead) -> None:
        """Keep the pages read so far of a document, for the job after this one."""
        self.put(digest, progress.to_json(), partial=True)

    @staticmethod
    def _read(path: Path) -> dict | None:
        try:
            value = json.loads(zlib.decompress(path.read_bytes()))
        except (OSError, ValueError, zlib.error):
            return None
        return value if isinstance(value, dict) else None

    def put(self, digest: str, value: dict, partial: bool = False) -> None:
        """Store a result, or the pages read so far of a document (`partial`); written whole,
        then renamed: readers never see half a file. A whole result drops the partial one."""
        path = self._partial(digest) if partial else self._path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_bytes(zlib.compress(json.dumps(value).encode(), 6))
        os.replace(tmp, path)
        if not partial:
            self._partial(digest).unlink(missing_ok=True)

    def _partial(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.{self.languages}.partial"


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# -- one job -------------------------------------------------------------------------------------


class OcrRun:
    """Reads a source's pending documents for one background job's time and writes their text."""

    def __init__(self, app: Flask, source_id: str) -> None:
        self.app = app
        self.source_id = source_id
        self.settings = OcrSettings.from_config(app.config)
        self.cache = TextCache(app.config["DATA_DIR"], self.settings.languages)
        self.read = 0  # pages read by Tesseract in this job (cache hits not counted)
        self.done = 0
        self.ran = False  # whether this job held the source's OCR lock
        self.folder: str | None = None  # this job's spool folder of members read out
        self.copies: dict[str, str] = {}  # member path -> its copy in `folder`, not read yet

    def run(self) -> int:
        """Work for one job's time; returns the documents finished (0 when another job runs)."""
        if not enabled(self.app):
            return 0
        lock = held_lock(
            get_redis(self.app), keys.ocr_running(self.source_id), self.app.config["SCAN_LOCK_SECONDS"]
        )
        with renewed(lock, blocking=False) as taken:
            if not taken:
                return 0  # the source's other OCR job looks for new work when it ends
            self.ran = True
            phase, started = Phase(self.app, "ocr", self.source_id), time.monotonic()
            with phase.slot() as held:
                if held:
                    self._work(phase)
                else:
                    PhaseInfo("ocr", self.source_id).waiting("a scan or live update has the worker")
            if self.done:  # the observed rate: the status's eta_seconds
                PhaseInfo("ocr", self.source_id).ran(self.done, time.monotonic() - started)
        return self.done

    def _work(self, phase: Phase) -> None:
        engine = get_engine(self.app)
        engine.interrupt = phase.stopped  # a deleted source stops the page being read
        try:
            self._documents(phase)
        except (Stopped, Interrupted):
            log.info("OCR of %s stopped: the source was deleted", self.source_id)
        finally:
            engine.interrupt = None
            self.close()

    def _documents(self, phase: Phase) -> None:
        cursor, results, since = "", [], time.monotonic()
        while True:
            try:
                phase.check()
            except Yielded:
                break
            row = db.session.execute(
                select(IndexedFile.path, IndexedFile.size_bytes, IndexedFile.mtime_ns, IndexedFile.container)
                .where(
                    IndexedFile.source_id == self.source_id,
                    IndexedFile.ocr == PENDING,
                    IndexedFile.path > cursor,
                )
                .order_by(IndexedFile.path)
                .limit(1)
            ).first()
            db.session.rollback()  # no transaction stays open while Tesseract reads
            if row is None:
                break
            cursor = row.path
            try:
                results.append((row, self._read(row, phase)))
            except Yielded:
                break  # its pages so far are kept for the next job
            if len(results) >= WRITE_EVERY or time.monotonic() - since >= WRITE_SECONDS:
                self._write(results)
                results, since = [], time.monotonic()
        self._write(results)

    def _read(self, row, phase: Phase) -> dict | None:
        """The text of a pending document: a file on disk, or a member read out of its
        container (at any depth); None when it cannot be read or changed since the scan (the
        next scan indexes it again)."""
        if row.container is None:
            try:
                stat = os.stat(row.path)
            except OSError:
                return None
            if (stat.st_size, stat.st_mtime_ns) != (row.size_bytes, row.mtime_ns):
                return None
            return self._text_of(row.path, ocr_type(row.path), phase)
        if row.path not in self.copies:
            self._read_out(row)
        copy = self.copies.pop(row.path, None)
        if copy is None:
            return None
        try:
            return self._text_of(copy, ocr_type(row.path), phase)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(copy)

    def _read_out(self, row) -> None:
        """Read the member of `row` and the pending members after it in the same container
        (up to MEMBER_BATCH of them, MEMBER_BATCH_BYTES together) out of the container into
        this job's spool folder, in one walk of it in the OCR child (its memory cap, the
        archive timeout): a mailbox with many scans is not walked once for each. Nothing is
        read when the container changed since the scan."""
        self.close()
        paths = self._members_to_read(row)
        if not paths:
            return
        engine = get_engine(self.app)
        os.makedirs(engine.settings.spool_dir, exist_ok=True)
        self.folder = tempfile.mkdtemp(prefix=f"unpack-{os.getpid()}-", dir=engine.settings.spool_dir)
        start = len(row.container) + len(MEMBER_SEPARATOR)
        by_names = {tuple(path[start:].split(MEMBER_SEPARATOR)): path for path in paths}
        names = [list(names) for names in by_names]
        try:
            result = engine.call(
                read_out,
                row.container,
                names,
                self.folder,
                engine.settings,
                doc_type="archive",
                path=row.container,
            )
        except ExtractionError as exc:  # a bomb, found on this walk
            log.info("OCR of %s: its container cannot be read: %s", row.path, exc)
            return
        if not result.ok:
            log.info("OCR of %s: not read out of its container: %s", row.path, result.error)
            return
        self.copies = {by_names[names]: file for names, file in result.value.items() if names in by_names}

    def _members_to_read(self, row) -> list[str]:
        """The pending members of `row`'s container from `row` on, within MEMBER_BATCH and
        MEMBER_BATCH_BYTES; none when the container changed since the scan (or is gone)."""
        container = db.session.execute(
            select(IndexedFile.size_bytes, IndexedFile.mtime_ns).where(
                IndexedFile.source_id == self.source_id, IndexedFile.path == row.container
            )
        ).first()
        batch = db.session.execute(
            select(IndexedFile.path, IndexedFile.size_bytes)
            .where(
                IndexedFile.source_id == self.source_id,
                IndexedFile.container == row.container,
                IndexedFile.ocr == PENDING,
                IndexedFile.path >= row.path,
            )
            .order_by(IndexedFile.path)
            .limit(MEMBER_BATCH)
        ).all()
        db.session.rollback()
        try:
            stat = os.stat(row.container)
        except OSError:
            return []
        if container is None or (stat.st_size, stat.st_mtime_ns) != tuple(container):
            return []
        paths, total = [], 0
        for path, size in batch:
            total += size
            if paths and total > MEMBER_BATCH_BYTES:
                break
            paths.append(path)
        return paths

    def close(self) -> None:
        """Remove this job's copies of members."""
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        self.folder, self.copies = None, {}

    def _text_of(self, path: str, kind: str, phase: Phase) -> dict | None:
        """{"content", "metadata"} of the file at `path`, read as `kind`, from the cache or
        Tesseract, page by page with the phase's checks between pages; None when it cannot be
        read."""
        try:
            digest = file_digest(path)
        except OSError:
            return None
        cached = self.cache.get(digest)
        if cached is not None:
            return cached
        engine = get_engine(self.app)
        extraction = engine.settings
        done = self.cache.progress(digest)
        if done.count is None:
            result = engine.call(page_count, path, kind, self.settings, extraction, doc_type="ocr", path=path)
            if not result.ok:
                log.info("OCR of %s failed: %s", path, result.error)
                return None
            done.count = result.value
        if not self._pages(path, kind, digest, done, phase):
            return None
        doc = result_of(done.texts, done.taken, done.timed_out, kind, self.settings)
        value = {"content": doc.content, "metadata": doc.metadata, "words": done.words}
        self.cache.put(digest, value)
        return value

    def _pages(self, path: str, kind: str, digest: str, done: PagesRead, phase: Phase) -> bool:
        """Read the document's pages from where `done` stands, with the phase's checks
        between pages (a yield keeps them for the next job); False when a page cannot be read."""
        engine = get_engine(self.app)
        while done.next < (done.count or 0) and done.taken < self.settings.max_pages:
            try:
                phase.check()
                phase.step_aside()
            except Yielded:
                self.cache.keep(digest, done)
                raise
            result = engine.call(
                read_one, path, kind, done.next, self.settings, engine.settings, doc_type="ocr", path=path
            )
            if result.ok:
                state, text, words = result.value
            elif result.error.startswith(TIMEOUT_MESSAGE):
                state, text, words = TIMED_OUT, "", []
            else:
                log.info("OCR of %s failed: %s", path, result.error)
                return False
            done.add(state, text, words)
            self.read += state != SKIPPED
            phase.page_done()
        return True

    def _write(self, results: list) -> None:
        """Add the text to the documents whose records did not change, then mark the records."""
        if not results:
            return
        with writer_lock(self.source_id, self.app):
            source = db.session.get(Source, self.source_id)
            current = {
                p: (s, m)
                for p, s, m in db.session.execute(
                    select(IndexedFile.path, IndexedFile.size_bytes, IndexedFile.mtime_ns).where(
                        IndexedFile.source_id == self.source_id,
                        IndexedFile.ocr == PENDING,
                        IndexedFile.path.in_([row.path for row, _ in results]),
                    )
                )
            }
            docs, states = [], {}
            for row, value in results:
                if current.get(row.path) != (row.size_bytes, row.mtime_ns) or source is None:
                    continue  # rescanned, changed or deleted meanwhile: its new state rules
                doc = self._with_text(doc_id(self.source_id, row.path), value, source.name)
                if doc is not None:
                    docs.append(doc)
                states[row.path] = DONE if value is not None else FAILED
            if docs:
                with diskfull.guard(get_redis(self.app), diskfull.INDEX):
                    get_search(self.app).upsert(docs)
                db.session.rollback()  # a source deleted meanwhile (without this lock): undo
                if db.session.get(Source, self.source_id) is None:
                    get_search(self.app).delete_ids([d["id"] for d in docs])
                    return
            for state in (DONE, FAILED):
                paths = [p for p, s in states.items() if s == state]
                if paths:
                    db.session.execute(
                        update(IndexedFile)
                        .where(IndexedFile.source_id == self.source_id, IndexedFile.path.in_(paths))
                        .values(ocr=state)
                    )
            with diskfull.guard(get_redis(self.app), diskfull.DATABASE):
                db.session.commit()
            self.done += len(states)

    def _with_text(self, id_: str, value: dict | None, source_name: str) -> Doc | None:
        """The indexed document with the OCR text after its own, or None if nothing changes."""
        if value is None:
            return None
        doc = get_search(self.app).get(id_)
        if doc is None or "ocr" in (doc.get("metadata") or {}):
            return None  # gone, or written by a job that died before it marked the record
        doc["metadata"] = {**(doc.get("metadata") or {}), "ocr": value["metadata"]}
        doc["content"] = PAGE_SEPARATOR.join(
            t for t in ((doc.get("content") or "").strip(), value["content"].strip()) if t
        )
        doc["source_name"] = source_name
        return doc
