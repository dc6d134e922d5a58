"""Thumbnails on disk: DATA_DIR/thumbs/<source id>/<2 hex>/<document id>.jpg.

Written by the scan's coordinator (helpers on other hosts send them with the documents), read
by the web process, removed with their documents (deleted files, cleared stale records,
orphans, a deleted source: its whole folder).
The files are written whole under a temporary name and renamed, so a reader never sees half
a thumbnail. A deleted source leaves a mark (DATA_DIR/thumbs/.deleted/<source id>) until a
source of that id is made again: a worker still extracting its last batch (a scan is
cancelled between batches) drops the thumbnails it writes after the folder was removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable

from webapp.indexing import membercache

THUMBS_DIR = "thumbs"
SUFFIX = ".jpg"
DELETED_DIR = ".deleted"  # no source id starts with a dot (path_for refuses them)


def _source_dir(data_dir: str, source_id: str) -> str:
    return os.path.join(data_dir, THUMBS_DIR, source_id)


def path_for(data_dir: str, doc_id: str) -> str | None:
    """Where the thumbnail of this document id lives (None for an id of another form)."""
    source_id, sep, digest = doc_id.rpartition("--")
    if (
        not sep
        or not source_id
        or len(digest) < 2
        or not digest.isalnum()
        or "/" in source_id
        or source_id.startswith(".")
    ):
        return None
    return os.path.join(_source_dir(data_dir, source_id), digest[:2], doc_id + SUFFIX)


def exists(data_dir: str, doc_id: str) -> bool:
    """Whether this document has a thumbnail."""
    path = path_for(data_dir, doc_id)
    return path is not None and os.path.isfile(path)


def save(data_dir: str, doc_id: str, data: bytes | None) -> None:
    """Store a document's thumbnail; None removes an older one (the file changed and has none)."""
    path = path_for(data_dir, doc_id)
    if path is None:
        return
    if data is None:
        remove(data_dir, [doc_id])
        return
    source_id = doc_id.rpartition("--")[0]
    if _deleted(data_dir, source_id):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if _deleted(data_dir, source_id):  # deleted while this one was written
        remove_source(data_dir, source_id)


def _mark(data_dir: str, source_id: str) -> str:
    return os.path.join(data_dir, THUMBS_DIR, DELETED_DIR, source_id)


def _deleted(data_dir: str, source_id: str) -> bool:
    return os.path.exists(_mark(data_dir, source_id))


def remove(data_dir: str, doc_ids: Iterable[str]) -> None:
    """Remove the thumbnails of these documents (those that have none are skipped), and the
    copies of members read out for the web (membercache)."""
    doc_ids = list(doc_ids)
    membercache.remove(data_dir, doc_ids)
    for doc_id in doc_ids:
        path = path_for(data_dir, doc_id)
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


def prune(data_dir: str, source_id: str, keep: set[str]) -> int:
    """Remove the source's thumbnails whose document id is not in `keep` (left by a scan that
    was cancelled or killed after extracting, before writing); how many were removed."""
    removed = 0
    top = _source_dir(data_dir, source_id)
    for folder, _, names in os.walk(top):
        for name in names:
            if name.endswith(SUFFIX) and name[: -len(SUFFIX)] not in keep:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, name))
                    removed += 1
    return removed


def _valid(source_id: str) -> bool:
    return bool(source_id) and "/" not in source_id and not source_id.startswith(".")


def remove_source(data_dir: str, source_id: str) -> None:
    """Remove every thumbnail of a source, and its members' copies (its thumbnails stay
    removed: see forget_deleted)."""
    if _valid(source_id):
        mark = _mark(data_dir, source_id)
        os.makedirs(os.path.dirname(mark), exist_ok=True)
        with open(mark, "a"):
            pass
        shutil.rmtree(_source_dir(data_dir, source_id), ignore_errors=True)
        membercache.remove_source(data_dir, source_id)


def forget_deleted(data_dir: str, source_id: str) -> None:
    """A new source takes this id: its thumbnails are kept again."""
    if _valid(source_id):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_mark(data_dir, source_id))
