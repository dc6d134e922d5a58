"""The OCR phase of a source: after a scan has indexed every document (by name and metadata),
read the text of those waiting for OCR and add it to them.

It runs as jobs of the OCR queue, which workers serve after the main one: a job stops taking
documents after JOB_SECONDS and the next one queues behind any scan. Text is cached by the
SHA-256 of the file's bytes (and the languages) under DATA_DIR/ocr, so unchanged bytes are never
read twice: not after a rescan, a full rebuild, nor a renamed source. Results are written under
the source's writer lock (indexing/state.py), the one the scan's coordinator holds for its
writes, and only for records that still describe the bytes that were read.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
import zlib
from dataclasses import replace
from pathlib import Path

from flask import Flask
from sqlalchemy import func, select, update

from webapp import keys
from webapp.extensions import db
from webapp.indexing.extractors import ExtractionSettings
from webapp.indexing.isolation import Extractor
from webapp.indexing.ocr import DONE, FAILED, OK, PENDING, OcrSettings, availability, ocr_specs
from webapp.indexing.runstats import FileStatus
from webapp.indexing.scanner import doc_id
from webapp.indexing.state import held_lock, renewed, writer_lock
from webapp.models import IndexedFile, Source
from webapp.runtime import get_redis, get_search

log = logging.getLogger(__name__)
JOB_SECONDS = 60.0  # a job takes no new document after this: scans queued meanwhile go first
WRITE_EVERY = 10  # documents per write (one index commit)
WRITE_SECONDS = 10.0  # ... or sooner, so text appears while a long queue is read
PAGE_SEPARATOR = "\n\n"

_engine: tuple | None = None  # (settings, Extractor): one OCR child per worker process, reused


def get_engine(app: Flask) -> Extractor:
    """The process's OCR child (an extraction child whose extractors OCR), made on first use."""
    global _engine
    ocr = OcrSettings.from_config(app.config)
    base = ExtractionSettings.from_config(app.config)
    settings = replace(base, timeout_pdf=ocr.file_timeout, timeout_default=ocr.file_timeout)
    if _engine is None or _engine[0] != (settings, ocr):
        if _engine is not None:
            _engine[1].close()
        _engine = ((settings, ocr), Extractor(settings, ocr_specs(ocr)))
    return _engine[1]


def enabled(app: Flask) -> bool:
    """Whether new documents should wait for OCR (on, and Tesseract has the languages)."""
    return availability(OcrSettings.from_config(app.config))[0] == OK


def pending_count(source_id: str) -> int:
    """Documents of the source waiting for OCR."""
    return db.session.scalar(select(func.count()).select_from(IndexedFile).where(
        IndexedFile.source_id == source_id, IndexedFile.ocr == PENDING)) or 0


def pending_sources() -> list[str]:
    """Sources with documents waiting for OCR."""
    return list(db.session.scalars(select(IndexedFile.source_id).where(
        IndexedFile.ocr == PENDING).distinct()))


# -- the cache -----------------------------------------------------------------------------------

class TextCache:
    """OCR results by content hash and languages: DATA_DIR/ocr/ab/<sha256>.<langs>.json.z."""

    def __init__(self, data_dir: str, languages: str) -> None:
        self.root = Path(data_dir) / "ocr"
        self.languages = languages

    def _path(self, digest: str) -> Path:
        return self.root / digest[:2] / f"{digest}.{self.languages}.json.z"

    def get(self, digest: str) -> dict | None:
        """The cached {"content", "metadata"}, or None."""
        try:
            return json.loads(zlib.decompress(self._path(digest).read_bytes()))
        except (OSError, ValueError, zlib.error):
            return None

    def put(self, digest: str, value: dict) -> None:
        """Store a result (written whole, then renamed: readers never see half a file)."""
        path = self._path(digest)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_bytes(zlib.compress(json.dumps(value).encode(), 6))
        os.replace(tmp, path)


def file_digest(path: str) -> str:
    """SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# -- one job -------------------------------------------------------------------------------------

class OcrRun:
    """Reads a source's pending documents for up to JOB_SECONDS and writes their text."""

    def __init__(self, app: Flask, source_id: str) -> None:
        self.app = app
        self.source_id = source_id
        self.settings = OcrSettings.from_config(app.config)
        self.cache = TextCache(app.config["DATA_DIR"], self.settings.languages)
        self.read = 0  # pages read by Tesseract in this job (cache hits not counted)
        self.done = 0
        self.ran = False  # whether this job held the source's OCR lock

    def run(self) -> int:
        """Work for one job's time; returns the documents finished (0 when another job runs)."""
        if not enabled(self.app):
            return 0
        lock = held_lock(get_redis(self.app), keys.ocr_running(self.source_id),
                         self.app.config["SCAN_LOCK_SECONDS"])
        with renewed(lock, blocking=False) as taken:
            if not taken:
                return 0  # the source's other OCR job looks for new work when it ends
            self.ran = True
            self._work()
        return self.done

    def _work(self) -> None:
        deadline = time.monotonic() + JOB_SECONDS
        cursor, results, since = "", [], time.monotonic()
        while time.monotonic() < deadline:
            row = db.session.execute(
                select(IndexedFile.path, IndexedFile.size_bytes, IndexedFile.mtime_ns)
                .where(IndexedFile.source_id == self.source_id, IndexedFile.ocr == PENDING,
                       IndexedFile.path > cursor)
                .order_by(IndexedFile.path).limit(1)).first()
            db.session.rollback()  # no transaction stays open while Tesseract reads
            if row is None:
                break
            cursor = row.path
            results.append((row, self._text_of(row.path, row.size_bytes, row.mtime_ns)))
            if len(results) >= WRITE_EVERY or time.monotonic() - since >= WRITE_SECONDS:
                self._write(results)
                results, since = [], time.monotonic()
        self._write(results)

    def _text_of(self, path: str, size: int, mtime_ns: int) -> dict | None:
        """{"content", "metadata"} from the cache or Tesseract; None when it cannot be read."""
        try:
            stat = os.stat(path)
            if (stat.st_size, stat.st_mtime_ns) != (size, mtime_ns):
                return None  # changed since the scan: the next scan indexes it again
            digest = file_digest(path)
        except OSError:
            return None
        cached = self.cache.get(digest)
        if cached is not None:
            return cached
        result = get_engine(self.app).run(path)
        if result.status != FileStatus.SUCCESS:
            log.info("OCR of %s failed: %s", path, result.error_message)
            return None
        value = {"content": result.doc.content, "metadata": result.doc.metadata}
        self.read += int(value["metadata"].get("pages") or 0)
        self.cache.put(digest, value)
        return value

    def _write(self, results: list) -> None:
        """Add the text to the documents whose records did not change, then mark the records."""
        if not results:
            return
        with writer_lock(self.source_id, self.app):
            source = db.session.get(Source, self.source_id)
            current = {p: (s, m) for p, s, m in db.session.execute(
                select(IndexedFile.path, IndexedFile.size_bytes, IndexedFile.mtime_ns).where(
                    IndexedFile.source_id == self.source_id, IndexedFile.ocr == PENDING,
                    IndexedFile.path.in_([row.path for row, _ in results])))}
            docs, states = [], {}
            for row, value in results:
                if current.get(row.path) != (row.size_bytes, row.mtime_ns) or source is None:
                    continue  # rescanned, changed or deleted meanwhile: its new state rules
                doc = self._with_text(doc_id(self.source_id, row.path), value, source.name)
                if doc is not None:
                    docs.append(doc)
                states[row.path] = DONE if value is not None else FAILED
            if docs:
                get_search(self.app).upsert(docs)
                db.session.rollback()  # a source deleted meanwhile (without this lock): undo
                if db.session.get(Source, self.source_id) is None:
                    get_search(self.app).delete_ids([d["id"] for d in docs])
                    return
            for state in (DONE, FAILED):
                paths = [p for p, s in states.items() if s == state]
                if paths:
                    db.session.execute(update(IndexedFile).where(
                        IndexedFile.source_id == self.source_id,
                        IndexedFile.path.in_(paths)).values(ocr=state))
            db.session.commit()
            self.done += len(states)

    def _with_text(self, id_: str, value: dict | None, source_name: str) -> dict | None:
        """The indexed document with the OCR text after its own, or None if nothing changes."""
        if value is None:
            return None
        doc = get_search(self.app).get(id_)
        if doc is None or "ocr" in (doc.get("metadata") or {}):
            return None  # gone, or written by a job that died before it marked the record
        doc["metadata"] = {**(doc.get("metadata") or {}), "ocr": value["metadata"]}
        doc["content"] = PAGE_SEPARATOR.join(
            t for t in ((doc.get("content") or "").strip(), value["content"].strip()) if t)
        doc["source_name"] = source_name
        return doc
