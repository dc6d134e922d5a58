"""glibc malloc tuning for long-lived worker processes (no-op elsewhere).

Tantivy's writer and merge threads each get a glibc malloc arena, and freed memory stays in
those arenas: a scan coordinator's resident memory grew by ~150 MB writing 5,400 documents.
Two arenas and an eager trim threshold bring that to ~55 MB with no measurable slowdown.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_ARENA_MAX = -8


def tune_malloc(arenas: int = 2, trim_threshold: int = 128 * 1024) -> bool:
    """Limit malloc arenas and return freed memory to the OS sooner; False when not glibc."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(M_ARENA_MAX, arenas)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))
