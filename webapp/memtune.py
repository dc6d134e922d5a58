"""glibc malloc tuning for long-lived worker processes (no-op elsewhere).

Tantivy's writer and merge threads each get a glibc malloc arena, and freed memory stays in
those arenas: a scan coordinator's resident memory grew by ~150 MB writing 5,400 documents.
Two arenas and an eager trim threshold bring that to ~55 MB with no measurable slowdown.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading

M_TRIM_THRESHOLD = -1
M_ARENA_MAX = -8


@functools.cache
def _libc():
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None


def tune_malloc(arenas: int = 2, trim_threshold: int = 128 * 1024) -> bool:
    """Limit malloc arenas and return freed memory to the OS sooner; False when not glibc."""
    libc = _libc()
    if libc is None or not hasattr(libc, "mallopt"):
        return False
    mallopt = libc.mallopt
    return bool(mallopt(M_ARENA_MAX, arenas)) and bool(mallopt(M_TRIM_THRESHOLD, trim_threshold))


def release_freed() -> None:
    """Hand memory freed since the last call back to the OS (glibc's malloc_trim)."""
    libc = _libc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


MADV_PAGEOUT = 21  # Linux 5.4+: reclaim these pages now; never loses data


def page_out_mappings(folder: str) -> int:
    """Reclaim this process's resident pages of read-only shared mappings of files in `folder`.

    Returns the number of mappings advised, or -1 when the kernel or libc cannot do it.
    """
    libc = _libc()
    if libc is None:
        return -1
    prefix = folder.rstrip("/") + "/"
    count = 0
    try:
        with open("/proc/self/maps") as maps:
            lines = [line for line in maps if prefix in line]
    except OSError:
        return -1
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 6 or parts[1] != "r--s" or not parts[5].startswith(prefix):
            continue
        start, end = (int(x, 16) for x in parts[0].split("-"))
        if libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), MADV_PAGEOUT) == 0:
            count += 1
        elif ctypes.get_errno() == 22:  # EINVAL: a kernel older than 5.4
            return -1
    return count


class PageOut:
    """While the block runs, page out every `every` seconds what `page_out_mappings` finds."""

    def __init__(self, folder: str | None, every: float = 0.2) -> None:
        self.folder, self.every = folder, every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PageOut:
        if self.folder and page_out_mappings(self.folder) >= 0:
            self._thread = threading.Thread(target=self._loop, daemon=True, name="page-out")
            self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            if page_out_mappings(self.folder) < 0:
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.folder:
            page_out_mappings(self.folder)
