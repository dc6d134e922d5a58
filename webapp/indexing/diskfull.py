"""A write that failed for want of space: a state, not a silence.

Each part Trawl writes (the search index, the database, the thumbnails) that hit a full disk
is recorded in Redis with the error and the time (keys.DISK_FULL), shown by the status and by
health (`components.disk`: `degraded`, naming the parts) and cleared by the next write of
that part that succeeds. The write itself leaves nothing half done behind (the index rolls
back and drops the files of the segment it was writing; a thumbnail's temporary file goes);
sweep() removes what a killed process left.

A scan or live update that failed for want of space is tried again by itself (keys.SPACE_RETRY):
the scheduler's sweep queues the scan again after a pause that doubles with each failure in a
row (RETRY_FIRST up to RETRY_MAX, the background phases' pace), and the watcher holds the
source's changed paths until then; the first run that ends otherwise settles it. So once space
returns, what failed is indexed within the pause, without a person.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sqlite3
import time
from collections.abc import Iterator

import redis as redis_lib

from webapp import keys
from webapp.indexing import thumbstore
from webapp.indexing.background import next_backoff

log = logging.getLogger(__name__)

INDEX, DATABASE, THUMBNAILS = "index", "database", "thumbnails"
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# How the engines say it when they do not raise an OSError: Tantivy (Rust's io error in a
# ValueError), SQLite (SQLITE_FULL), PostgreSQL (SQLSTATE 53100, disk_full).
NO_SPACE_WORDS = ("no space left on device", "os error 28", "database or disk is full", "disk quota exceeded")
PG_DISK_FULL = "53100"
TEMP_SUFFIX = ".tmp"  # thumbstore's temporary files
TEMP_STALE_SECONDS = 600  # a thumbnail is written in milliseconds: older temporaries are left over


class DiskFull(Exception):
    """A write of `part` failed because its disk is full."""

    def __init__(self, part: str, cause: BaseException) -> None:
        super().__init__(f"no space left on the disk of the {_NAMES[part]}: {_first_line(cause)}")
        self.part = part


_NAMES = {INDEX: "search index", DATABASE: "database", THUMBNAILS: "thumbnails"}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def no_space(exc: BaseException | None) -> bool:
    """Whether an error (or one it was raised from) says the disk is full."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, DiskFull):
            return True
        if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
            return True
        if getattr(exc, "sqlstate", None) == PG_DISK_FULL or getattr(exc, "pgcode", None) == PG_DISK_FULL:
            return True
        if isinstance(exc, ValueError | sqlite3.OperationalError) or type(exc).__module__.startswith(
            ("sqlalchemy", "psycopg")
        ):
            if any(word in str(exc).lower() for word in NO_SPACE_WORDS):
                return True
        exc = getattr(exc, "orig", None) or exc.__cause__ or exc.__context__
        seen += 1
    return False


def record(redis: redis_lib.Redis, part: str, exc: BaseException) -> None:
    """Note that `part` could not be written for want of space (Redis itself may be down)."""
    log.error("No space left to write the %s: %s", _NAMES.get(part, part), _first_line(exc))
    entry = {"error": _first_line(exc), "since": int(time.time())}
    with contextlib.suppress(redis_lib.RedisError):
        if not redis.hsetnx(keys.DISK_FULL, part, json.dumps(entry)):
            return  # the first failure's time stays


def clear(redis: redis_lib.Redis, part: str) -> None:
    """A write of `part` succeeded: its disk has room again."""
    with contextlib.suppress(redis_lib.RedisError):
        if redis.hdel(keys.DISK_FULL, part):
            log.info("The %s is written again: its disk has room", _NAMES.get(part, part))


def current(redis: redis_lib.Redis) -> dict[str, dict]:
    """part -> {"error", "since"} of every part whose last write failed for want of space."""
    out = {}
    for part, raw in (redis.hgetall(keys.DISK_FULL) or {}).items():
        name = part.decode() if isinstance(part, bytes) else part
        with contextlib.suppress(ValueError, TypeError):
            out[name] = json.loads(raw)
    return out


def health(redis: redis_lib.Redis) -> str:
    """Health's `disk` component: `ok`, or `degraded: ...` naming the full parts."""
    full = current(redis)
    if not full:
        return "ok"
    said = "; ".join(f"{_NAMES.get(p, p)}: {e.get('error', '')}" for p, e in sorted(full.items()))
    return f"degraded: no space left on device ({said})"


@contextlib.contextmanager
def guard(redis: redis_lib.Redis, part: str) -> Iterator[None]:
    """Run one write of `part`: a failure for space is recorded and raised as DiskFull; a
    success clears an earlier one."""
    try:
        yield
    except Exception as exc:
        if not no_space(exc):
            raise
        record(redis, part, exc)
        raise DiskFull(part, exc) from exc
    clear(redis, part)


def _retry(redis: redis_lib.Redis, source_id: str) -> dict | None:
    raw = redis.hget(keys.SPACE_RETRY, source_id)
    return json.loads(raw) if raw else None


def retry_later(redis: redis_lib.Redis, source_id: str, scan: bool) -> None:
    """A scan (`scan`) or live update of the source failed for want of space: try it again after
    the next pause (a scan waiting to be retried stays one when a live update fails after it)."""
    with contextlib.suppress(redis_lib.RedisError):
        before = _retry(redis, source_id) or {}
        backoff = next_backoff(before)
        entry = {"at": time.time() + backoff, "backoff": backoff, "scan": scan or before.get("scan", False)}
        redis.hset(keys.SPACE_RETRY, source_id, json.dumps(entry))
        log.warning("%s: tried again for space in %.0f s", source_id, backoff)


def settled(redis: redis_lib.Redis, source_id: str, scan: bool) -> None:
    """A run of the source ended other than for want of space. After a scan nothing waits; after
    a live update a scan waiting to be retried is due at once (its disk has room again)."""
    with contextlib.suppress(redis_lib.RedisError):
        before = _retry(redis, source_id)
        if before is None:
            return
        if scan or not before.get("scan"):
            redis.hdel(keys.SPACE_RETRY, source_id)
        else:
            redis.hset(keys.SPACE_RETRY, source_id, json.dumps({**before, "at": time.time()}))


def waiting_for_space(redis: redis_lib.Redis, source_id: str) -> bool:
    """Whether the source's runs wait for their next try (a live update is not asked for yet)."""
    entry = _retry(redis, source_id)
    return entry is not None and time.time() < entry["at"]


def scans_due(redis: redis_lib.Redis) -> list[str]:
    """The sources whose scan failed for want of space and is due to be tried again."""
    now, due = time.time(), []
    for source_id, raw in (redis.hgetall(keys.SPACE_RETRY) or {}).items():
        entry = json.loads(raw)
        if entry.get("scan") and now >= entry["at"]:
            due.append(source_id.decode() if isinstance(source_id, bytes) else source_id)
    return sorted(due)


def forget(redis: redis_lib.Redis, source_id: str) -> None:
    """The source is gone: nothing of it is tried again."""
    redis.hdel(keys.SPACE_RETRY, source_id)


def sweep(data_dir: str) -> int:
    """Remove the temporary files a killed or failed writer left under the thumbnails (older
    than TEMP_STALE_SECONDS: another process may be writing one now); how many."""
    removed, cutoff = 0, time.time() - TEMP_STALE_SECONDS
    for folder, _, names in os.walk(os.path.join(data_dir, thumbstore.THUMBS_DIR)):
        for name in names:
            path = os.path.join(folder, name)
            with contextlib.suppress(OSError):
                if name.endswith(TEMP_SUFFIX) and os.stat(path).st_mtime < cutoff:
                    os.unlink(path)
                    removed += 1
    return removed
