"""Archive members read out once for the web: DATA_DIR/members/<source id>/<document id>.<key>.

A member (`a.zip!/film.mp4`) sent to a browser is read out of its container into this folder
once; later requests (a player's Range requests, a second download) are served from that file,
so they answer 206/416 like a plain file and the container is not unpacked again for each. The
key is the container's size and mtime: a changed container is never served from an old copy.
The folder is bounded (MEMBER_CACHE_MB): the least recently used copies go first, but never
one used in the last IN_USE_SECONDS (it may be being sent). Copies go with their documents
(thumbstore.remove and remove_source call remove and remove_source here).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import IO

MEMBERS_DIR = "members"
IN_USE_SECONDS = 60


def _source_dir(data_dir: str, source_id: str) -> str:
    return os.path.join(data_dir, MEMBERS_DIR, source_id)


def _valid(source_id: str) -> bool:
    return bool(source_id) and "/" not in source_id and not source_id.startswith(".")


def path_for(data_dir: str, doc_id: str, key: str) -> str | None:
    """Where the copy of this member (for this state of its container) lives."""
    source_id = doc_id.rpartition("--")[0]
    if not _valid(source_id) or "/" in doc_id:
        return None
    return os.path.join(_source_dir(data_dir, source_id), f"{doc_id}.{key}")


def get(data_dir: str, doc_id: str, key: str, read: Callable[[], IO[bytes]], limit_bytes: int) -> str | None:
    """The path of the member's copy, read out with `read()` (a file object at its start) when
    there is none yet; None when the cache is off (limit 0) or the id is of another form."""
    path = path_for(data_dir, doc_id, key)
    if path is None or limit_bytes <= 0:
        return None
    try:
        os.utime(path)  # used now: the last to be evicted
        return path
    except FileNotFoundError:
        pass
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    _drop(folder, {doc_id})  # copies of the member from an older state of its container
    with read() as data:
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                shutil.copyfileobj(data, out, 1024 * 1024)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    evict(data_dir, limit_bytes)
    return path


def evict(data_dir: str, limit_bytes: int) -> int:
    """Remove the least recently used copies until the folder holds `limit_bytes` at most
    (copies used in the last IN_USE_SECONDS stay); how many were removed."""
    entries = []
    top = os.path.join(data_dir, MEMBERS_DIR)
    for folder, _, names in os.walk(top):
        for name in names:
            path = os.path.join(folder, name)
            with contextlib.suppress(FileNotFoundError):
                st = os.stat(path)
                entries.append((st.st_mtime, st.st_size, path))
    total = sum(size for _, size, _ in entries)
    removed = 0
    recent = time.time() - IN_USE_SECONDS
    for mtime, size, path in sorted(entries):
        if total <= limit_bytes or mtime > recent:
            break
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
            removed += 1
        total -= size
    return removed


def _drop(folder: str, doc_ids: set[str]) -> None:
    """Remove the copies of these documents from one source's folder."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        if name.rsplit(".", 1)[0] in doc_ids:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))


def remove(data_dir: str, doc_ids: Iterable[str]) -> None:
    """Remove the copies of these documents (members or not: others have none)."""
    if not os.path.isdir(os.path.join(data_dir, MEMBERS_DIR)):
        return
    by_source: dict[str, set[str]] = {}
    for doc_id in doc_ids:
        source_id = doc_id.rpartition("--")[0]
        if _valid(source_id):
            by_source.setdefault(source_id, set()).add(doc_id)
    for source_id, ids in by_source.items():
        _drop(_source_dir(data_dir, source_id), ids)


def remove_source(data_dir: str, source_id: str) -> None:
    """Remove every copy of a source's members."""
    if _valid(source_id):
        shutil.rmtree(_source_dir(data_dir, source_id), ignore_errors=True)
