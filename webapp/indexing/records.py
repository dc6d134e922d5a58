"""The file records of a source in the database: bulk upsert and delete of one batch."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TypedDict

from sqlalchemy import delete, select
from sqlalchemy.dialects import postgresql, sqlite

from webapp.extensions import db
from webapp.indexing.runstats import FileStatus
from webapp.indexing.scanner import path_hash
from webapp.models import IndexedFile, utcnow

DELETE_CHUNK = 500  # paths per DELETE ... IN (...): every database accepts that many parameters
_UPDATED = (
    "size_bytes",
    "mtime_ns",
    "modified_at",
    "indexed_at",
    "hash",
    "doc_type",
    "status",
    "error_message",
    "ocr",
    "container",
    "embedded",
    "text_hash",
)


class _RowFields(TypedDict):
    path: str
    size_bytes: int
    mtime_ns: int
    doc_type: str
    status: FileStatus
    error_message: str | None


class FileRow(_RowFields, total=False):
    """A file's record as a batch carries it (a TypedDict: it is JSON in a helper's result and
    the values of the insert); the other columns are set by `upsert_records`."""

    container: str | None  # the file on disk holding a member (None: on disk itself)
    ocr: str | None  # `pending` when its document waits for the OCR phase
    text_hash: str | None  # of its extracted text (indexing/copies.py); None: no text


def _epoch(dt_ns: int) -> datetime:
    return datetime.fromtimestamp(dt_ns / 1e9, UTC).replace(tzinfo=None, microsecond=0)


def upsert_records(source_id: str, rows: list[FileRow]) -> None:
    """Insert or update the records of one batch in a single statement."""
    if not rows:
        return
    now = utcnow()
    values = [
        {
            "container": None,
            "text_hash": None,
            **r,
            "ocr": r.get("ocr"),
            "source_id": source_id,
            "embedded": False,  # new or changed: its passages are read (again)
            "hash": path_hash(r["path"]),
            "indexed_at": now,
            "modified_at": _epoch(r["mtime_ns"]),
        }
        for r in rows
    ]
    values.sort(key=lambda v: v["path"])  # one lock order in every transaction: no deadlock
    dialect = postgresql if db.engine.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(IndexedFile.__table__)
    stmt = stmt.on_conflict_do_update(
        index_elements=["source_id", "path"], set_={c: stmt.excluded[c] for c in _UPDATED}
    )
    # executemany of one prepared statement: a multi-VALUES literal of 1000 rows costs more
    # to build and compile than the database needs to run it
    db.session.execute(stmt, values)
    db.session.commit()


def delete_records(source_id: str, paths: list[str]) -> None:
    """Remove the records of these paths (in chunks the database accepts)."""
    for i in range(0, len(paths), DELETE_CHUNK):
        db.session.execute(
            delete(IndexedFile).where(
                IndexedFile.source_id == source_id, IndexedFile.path.in_(paths[i : i + DELETE_CHUNK])
            )
        )
    db.session.commit()


def member_paths(source_id: str, containers: list[str]) -> list[tuple[str, str]]:
    """(path, container) of the recorded members of these files on disk."""
    found = []
    for i in range(0, len(containers), DELETE_CHUNK):
        found += db.session.execute(
            select(IndexedFile.path, IndexedFile.container).where(
                IndexedFile.source_id == source_id,
                IndexedFile.container.in_(containers[i : i + DELETE_CHUNK]),
            )
        ).all()
    return [tuple(row) for row in found]
