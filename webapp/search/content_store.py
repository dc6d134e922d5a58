"""The extracted text of Tantivy documents, kept beside the index in SQLite, compressed.

Why not in Tantivy's own document store: every segment merge reads the stores of the merged
segments whole through mmap, so the writing process briefly maps (and is charged for) hundreds
of MB at 50k documents, more as the index grows. SQLite reads with pread (page cache, not the
process), and a search needs the text of only the 20 documents on its page.

One row per document: id, source id, LZ4-compressed UTF-8 text (text halves in size, and
compressing costs the single writer ~3 s per GB of text where zlib took ~20 s). Writes come
from the process that holds Tantivy's writer; any number of processes read (WAL mode).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path

import lz4.frame

from webapp.search import Doc

FILE_NAME = "content.sqlite3"
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS content (id TEXT PRIMARY KEY, source_id TEXT NOT NULL, body BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS content_source ON content (source_id)",
)
IN_CHUNK = 500  # ids per IN (...) list


class ContentStore:
    """Text by document id in `<directory>/content.sqlite3` (process memory when None)."""

    def __init__(self, directory: Path | None) -> None:
        if directory is None:  # one in-memory database shared by this store's connections
            self._target = f"file:trawl-content-{uuid.uuid4().hex}?mode=memory&cache=shared"
            self._uri = True
        else:
            self._target, self._uri = str(directory / FILE_NAME), False
        self._local = threading.local()
        # this thread's connection; it also keeps an in-memory database alive
        self._local.conn, self._local.pid = self._connect(), os.getpid()

    def _connect(self) -> sqlite3.Connection:
        """A connection whose writes, in `with conn:`, run in one BEGIN IMMEDIATE transaction."""
        conn = sqlite3.connect(
            self._target, uri=self._uri, timeout=60, check_same_thread=False, isolation_level="IMMEDIATE"
        )
        if not self._uri:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        for statement in SCHEMA:
            conn.execute(statement)
        return conn

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection (a new one after a fork: connections never cross it)."""
        local = self._local
        if getattr(local, "pid", None) != os.getpid():
            local.conn, local.pid = self._connect(), os.getpid()
        return local.conn

    def _write(self, sql: str, rows: list[tuple]) -> None:
        """One statement over these rows, committed together."""
        conn = self._conn()
        with conn:
            conn.executemany(sql, rows)

    def put(self, docs: Iterable[Doc]) -> None:
        """Store the `content` of these documents (replacing what their ids had), one commit."""
        self._write(
            "INSERT OR REPLACE INTO content (id, source_id, body) VALUES (?, ?, ?)",
            [(d["id"], d["source_id"], lz4.frame.compress((d["content"] or "").encode())) for d in docs],
        )

    def get_many(self, ids: list[str]) -> dict[str, str]:
        """Text by id for the ids that have one."""
        out: dict[str, str] = {}
        conn = self._conn()
        for i in range(0, len(ids), IN_CHUNK):
            chunk = ids[i : i + IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            for doc_id, body in conn.execute(f"SELECT id, body FROM content WHERE id IN ({marks})", chunk):
                out[doc_id] = lz4.frame.decompress(body).decode()
        return out

    def delete_ids(self, ids: list[str]) -> None:
        """Forget the text of these ids."""
        self._write("DELETE FROM content WHERE id = ?", [(i,) for i in ids])

    def delete_source(self, source_id: str) -> None:
        """Forget the text of every document of a source."""
        self._write("DELETE FROM content WHERE source_id = ?", [(source_id,)])

    def clear(self) -> None:
        """Forget every text."""
        self._write("DELETE FROM content", [()])
