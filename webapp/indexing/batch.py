"""One batch of files read by a worker: extracted in the sandboxed child, turned into the
search documents and file records the coordinator writes (pipeline.py).

`Batch` and `BatchResult` are what goes through the run's Redis lists, as JSON: the batches
the coordinator hands out, the results helpers send back.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flask import Flask

from webapp import procs
from webapp.indexing.copies import text_hash
from webapp.indexing.extractors import ExtractionSettings, extension
from webapp.indexing.isolation import Extractor, FileResult, MemberResult
from webapp.indexing.ocr import PENDING, needs_ocr
from webapp.indexing.ocr_phase import enabled as ocr_enabled
from webapp.indexing.records import FileRow
from webapp.indexing.runstats import FileStatus
from webapp.indexing.scanner import doc_id
from webapp.metrics import extraction_seconds
from webapp.search import Doc

log = logging.getLogger(__name__)

MEMBER_CHUNK = 500  # members of one container sent on (and written) together


@dataclass
class Batch:
    """The n-th batch of files of a run, for whichever worker takes it first."""

    n: int
    files: list[tuple[str, int, int]]  # (path, size, mtime_ns)

    def to_json(self) -> str:
        """The batch as the run's list holds it (a file is a [path, size, mtime_ns] list)."""
        return json.dumps({"n": self.n, "files": self.files})

    @classmethod
    def from_json(cls, raw: str | bytes) -> Batch:
        """A batch read back from the run's list."""
        data = json.loads(raw)
        return cls(data["n"], [(path, size, mtime_ns) for path, size, mtime_ns in data["files"]])


@dataclass
class BatchResult:
    """What a worker made of batch `n`, or of a part of it (`partial`: more comes later): the
    documents, their thumbnails and the file records, for the coordinator to write."""

    n: int
    docs: list[Doc] = field(default_factory=list)
    # every document's thumbnail by its id (None: it has none, an older one is removed); the
    # coordinator stores them on its host, where the web server reads them
    thumbnails: dict[str, bytes | None] = field(default_factory=dict)
    records: list[FileRow] = field(default_factory=list)
    # files whose earlier members are dropped before these rows are written (a file's first
    # rows carry it)
    reset: list[str] = field(default_factory=list)
    partial: bool = False

    def size(self) -> int:
        """Characters of text and bytes of thumbnails held (what the writer's memory holds)."""
        return sum(len(d["content"]) for d in self.docs) + sum(
            len(t or b"") for t in self.thumbnails.values()
        )

    def to_json(self) -> str:
        """The result as the run's list holds it (thumbnails in base64)."""
        thumbs = {k: base64.b64encode(t).decode() if t else None for k, t in self.thumbnails.items()}
        return json.dumps(
            {
                "n": self.n,
                "docs": self.docs,
                "thumbnails": thumbs,
                "records": self.records,
                "reset": self.reset,
                "partial": self.partial,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> BatchResult:
        """A result read back from the run's list."""
        data = json.loads(raw)
        thumbs = {k: base64.b64decode(t) if t else None for k, t in data["thumbnails"].items()}
        records = [{**r, "status": FileStatus(r["status"])} for r in data["records"]]
        return cls(data["n"], data["docs"], thumbs, records, data["reset"], data["partial"])


def get_extractor(app: Flask) -> Extractor:
    """The process's extraction child, created on first use and again when the settings change
    (kept between batches: procs.kept)."""
    settings = ExtractionSettings.from_config(app.config)
    return procs.kept.get("extraction", settings, lambda: Extractor(settings))


def extract_batch(
    app: Flask,
    source: dict,
    batch: Batch,
    on_file: Callable[[], None] | None = None,
    on_partial: Callable[[BatchResult], None] | None = None,
) -> BatchResult:
    """Extract a batch of files into documents and record rows (no writes).

    The members of a container (`a.zip!/b.txt`) are documents too, their records naming it.
    A container with many members does not wait in memory: every MEMBER_CHUNK members, what
    was gathered goes to `on_partial` (a partial result) and a new result starts.
    """
    return _BatchReader(app, source, batch, on_file, on_partial).read()


class _BatchReader:
    """One batch's extraction: the result being gathered, handed on in parts for containers."""

    def __init__(self, app: Flask, source: dict, batch: Batch, on_file, on_partial) -> None:
        self.extractor = get_extractor(app)
        self.source, self.batch = source, batch
        self.on_file, self.on_partial = on_file or (lambda: None), on_partial
        self.out = BatchResult(batch.n)
        self.now = int(time.time())
        self.ocr = ocr_enabled(app)  # documents that need it wait for the OCR phase (ocr_phase.py)
        self.mtimes = {path: mtime_ns for path, _size, mtime_ns in batch.files}
        self.started: set[str] = set()

    def read(self) -> BatchResult:
        files = self.batch.files
        results = self.extractor.run_many((path for path, _size, _mtime in files), on_member=self._member)
        for (path, size, mtime_ns), result in zip(files, results, strict=True):
            self.on_file()
            extraction_seconds.labels(result.doc.type).observe(result.seconds)
            doc = _document(self.source, path, size, mtime_ns, result, self.now, None)
            self._add(path, doc, result.doc.thumbnail, _record(path, size, mtime_ns, result, None, self.ocr))
        return self.out

    def _add(self, path: str, doc: Doc, thumbnail: bytes | None, record: FileRow) -> None:
        if path not in self.started:  # a file's first rows carry its reset
            self.started.add(path)
            self.out.reset.append(path)
        self.out.docs.append(doc)
        self.out.thumbnails[doc["id"]] = thumbnail
        self.out.records.append(record)

    def _member(self, path: str, member: MemberResult) -> None:
        self.on_file()  # a helper's "still alive" mark, also while one container takes long
        member_path = f"{path}!/{member.inner}"
        parent = f"{path}!/{member.parent}" if member.parent else path
        mtime_ns = member.mtime * 1_000_000_000 if member.mtime is not None else self.mtimes[path]
        size = max(member.size, 0)
        container_id = doc_id(self.source["id"], parent)
        doc = _document(self.source, member_path, size, mtime_ns, member.result, self.now, container_id)
        # a scan inside an archive or e-mail waits for OCR as a file on disk does
        record = _record(member_path, size, mtime_ns, member.result, path, self.ocr)
        self._add(path, doc, member.result.doc.thumbnail, record)
        if self.on_partial and len(self.out.records) >= MEMBER_CHUNK:
            self.out.partial = True
            self.on_partial(self.out)
            self.out = BatchResult(self.batch.n)


def _document(
    source: dict, path: str, size: int, mtime_ns: int, result: FileResult, now: int, container_id: str | None
) -> Doc:
    """The search document of an extraction result."""
    doc = result.doc
    return {
        "id": doc_id(source["id"], path),
        "source_id": source["id"],
        "source_name": source["name"],
        "path": path,
        "basename": os.path.basename(path),
        "extension": extension(path),
        "type": doc.type,
        "size_bytes": size,
        "modified_at": int(mtime_ns // 1_000_000_000),
        "indexed_at": now,
        "content": doc.content or "",
        "title": doc.title,
        "metadata": doc.metadata or {},
        "container_id": container_id,
    }


def _record(
    path: str, size: int, mtime_ns: int, result: FileResult, container: str | None, ocr: bool
) -> FileRow:
    """A file record; with `ocr`, marked pending when its document needs the OCR phase."""
    doc = result.doc
    pending = (
        ocr
        and result.status == FileStatus.SUCCESS
        and needs_ocr(doc.type, extension(path), doc.metadata or {}, doc.holds_text)
    )
    return {
        "path": path,
        "size_bytes": size,
        "mtime_ns": mtime_ns,
        "doc_type": doc.type,
        "status": result.status,
        "error_message": result.error_message,
        "container": container,
        "ocr": PENDING if pending else None,
        # text still waiting for OCR is not what the file holds: no hash until it is read
        "text_hash": text_hash(doc.title, doc.content, doc.type)
        if result.status == FileStatus.SUCCESS and not pending
        else None,
    }
