"""One batch of files read by a worker: extracted in the sandboxed child, turned into the
search documents and file records the coordinator writes (pipeline.py)."""

from __future__ import annotations

import base64
import logging
import os
import time
from collections.abc import Callable, Iterable

from flask import Flask

from webapp import procs
from webapp.indexing.extractors import ExtractionSettings, extension
from webapp.indexing.isolation import Extractor, FileResult, MemberResult
from webapp.indexing.ocr import PENDING, needs_ocr
from webapp.indexing.ocr_phase import enabled as ocr_enabled
from webapp.indexing.runstats import FileStatus
from webapp.indexing.scanner import (
    doc_id,
)
from webapp.metrics import extraction_seconds

log = logging.getLogger(__name__)

MEMBER_CHUNK = 500  # members of one container sent on (and written) together


def get_extractor(app: Flask) -> Extractor:
    """The process's extraction child, created on first use and again when the settings change
    (kept between batches: procs.kept)."""
    settings = ExtractionSettings.from_config(app.config)
    return procs.kept.get("extraction", settings, lambda: Extractor(settings))


def extract_batch(
    app: Flask,
    source: dict,
    files: Iterable[list],
    on_file: Callable[[], None] | None = None,
    on_partial: Callable[[dict], None] | None = None,
) -> dict:
    """Extract a batch of files into documents and record rows (no writes).

    The members of a container (`a.zip!/b.txt`) are documents too, their records naming it.
    A container with many members does not wait in memory: every MEMBER_CHUNK members, what
    was gathered goes to `on_partial` (a partial result) and a new result starts. A result's
    `reset` lists the files whose earlier members are to be dropped before its rows are
    written; it comes with the first rows of each file.
    """
    extractor = get_extractor(app)
    out = {"docs": [], "records": [], "reset": []}
    now = int(time.time())
    ocr = ocr_enabled(app)  # documents that need it wait for the OCR phase (ocr_phase.py)

    files = list(files)
    mtimes = {path: mtime_ns for path, _size, mtime_ns in files}
    started: set[str] = set()

    def start(path: str) -> None:
        """A file's first rows carry its reset (its old members are dropped before them)."""
        if path not in started:
            started.add(path)
            out["reset"].append(path)

    def add_member(path: str, member: MemberResult) -> None:
        nonlocal out
        if on_file:
            on_file()  # a helper's "still alive" mark, also while one container takes long
        start(path)
        mtime_ns = mtimes[path]
        member_path = f"{path}!/{member.inner}"
        parent = f"{path}!/{member.parent}" if member.parent else path
        member_ns = member.mtime * 1_000_000_000 if member.mtime is not None else mtime_ns
        size = max(member.size, 0)
        out["docs"].append(
            _document(source, member_path, size, member_ns, member.result, now, doc_id(source["id"], parent))
        )
        # a scan inside an archive or e-mail waits for OCR as a file on disk does
        out["records"].append(_record(member_path, size, member_ns, member.result, path, ocr))
        if on_partial and len(out["records"]) >= MEMBER_CHUNK:
            on_partial({**out, "partial": True})
            out = {"docs": [], "records": [], "reset": []}

    results = extractor.run_many((path for path, _size, _mtime in files), on_member=add_member)
    for (path, size, mtime_ns), result in zip(files, results, strict=True):
        if on_file:
            on_file()
        start(path)
        extraction_seconds.labels(result.doc.type).observe(result.seconds)
        out["docs"].append(_document(source, path, size, mtime_ns, result, now, None))
        out["records"].append(_record(path, size, mtime_ns, result, None, ocr))
    return out


def _document(
    source: dict, path: str, size: int, mtime_ns: int, result: FileResult, now: int, container_id: str | None
) -> dict:
    """The document of an extraction result, with its thumbnail (base64, or None) for the
    coordinator to store on its host before it writes the document (`_store_thumbnails`)."""
    doc = result.doc
    ident = doc_id(source["id"], path)
    thumb = base64.b64encode(doc.thumbnail).decode() if doc.thumbnail else None
    return {
        "thumbnail": thumb,
        "id": ident,
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
) -> dict:
    """A file record; with `ocr`, marked pending when its document needs the OCR phase."""
    doc = result.doc
    pending = (
        ocr
        and result.status == FileStatus.SUCCESS
        and needs_ocr(doc.type, extension(path), doc.metadata or {})
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
    }
