"""Thumbnails on disk: DATA_DIR/thumbs/<source id>/<2 hex>/<document id>.jpg.

Written by the scan's coordinator (helpers on other hosts send them with the documents), read
by the web process, removed with their documents (deleted files, cleared stale records,
orphans, a deleted source: its whole folder).
The files are written whole under a temporary name and renamed, so a reader never sees half
a thumbnail.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable

THUMBS_DIR = "thumbs"
SUFFIX = ".jpg"


def _source_dir(data_dir: str, source_id: str) -> str:
    return os.path.join(data_dir, THUMBS_DIR, source_id)


def path_for(data_dir: str, doc_id: str) -> str | None:
    """Where the thumbnail of this document id lives (None for an id of another form)."""
    source_id, sep, digest = doc_id.rpartition("--")
    if not sep or not source_id or len(digest) < 2 or not digest.isalnum() or "/" in source_id \
            or source_id.startswith("."):
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


def remove(data_dir: str, doc_ids: Iterable[str]) -> None:
    """Remove the thumbnails of these documents (those that have none are skipped)."""
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
            if name.endswith(SUFFIX) and name[:-len(SUFFIX)] not in keep:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, name))
                    removed += 1
    return removed


def remove_source(data_dir: str, source_id: str) -> None:
    """Remove every thumbnail of a source."""
    if source_id and "/" not in source_id and not source_id.startswith("."):
        shutil.rmtree(_source_dir(data_dir, source_id), ignore_errors=True)
