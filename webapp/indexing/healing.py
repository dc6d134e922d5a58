"""Records that heal: failed records whose failure was about access, not about the content.

A file recorded `failed` because it had vanished, could not be read, vanished or changed while
it was read (a content error of bytes never read whole), or its extraction timed out is tried
again by the next scan even when its size and mtime did not change (a root moved
away and back during a scan keeps both). Content failures ("Not a valid PDF file") are not:
the same bytes would fail the same way.
"""

from __future__ import annotations

import os
import stat

from sqlalchemy import ColumnElement, and_, func, or_, select

from webapp.extensions import db
from webapp.indexing.extractors import (
    CHANGED_MESSAGE,
    TIMEOUT_MESSAGE,
    UNREADABLE_MESSAGE,
    VANISHED_MESSAGE,
)
from webapp.indexing.runstats import FileStatus
from webapp.models import IndexedFile

ACCESS_FAILURES = (VANISHED_MESSAGE, UNREADABLE_MESSAGE, CHANGED_MESSAGE)


def _failed_with(*messages: str, timeouts: bool) -> ColumnElement[bool]:
    """Records of failed files whose message is one of `messages` (or a timeout)."""
    reason = IndexedFile.error_message.in_(messages)
    if timeouts:
        reason = or_(reason, IndexedFile.error_message.startswith(TIMEOUT_MESSAGE, autoescape=True))
    return and_(IndexedFile.status == FileStatus.FAILED, reason)


def retry_paths(source_id: str) -> set[str]:
    """Paths the next scan extracts again whatever their size and mtime (a member that timed
    out has its container extracted again)."""
    return set(
        db.session.scalars(
            select(func.coalesce(IndexedFile.container, IndexedFile.path)).where(
                IndexedFile.source_id == source_id, _failed_with(*ACCESS_FAILURES, timeouts=True)
            )
        )
    )


def readable_again(source_id: str) -> list[str]:
    """Sorted paths recorded as vanished or unreadable whose file now opens and reads.

    Timeouts are left out: such a file always reads, and its next try may time out again.
    """
    paths = db.session.scalars(
        select(IndexedFile.path).where(
            IndexedFile.source_id == source_id, _failed_with(*ACCESS_FAILURES, timeouts=False)
        )
    )
    return sorted(path for path in paths if reads(path))


def reads(path: str) -> bool:
    """Whether the regular file at `path` opens read-only and yields its first byte."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a FIFO swapped in must not block
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        os.read(fd, 1)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
