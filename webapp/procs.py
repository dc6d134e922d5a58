"""Process lifelines: a child that must not outlive the process that started it, its memory
cap, and what a process keeps between files and jobs (`kept`)."""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def pid_alive(pid: int) -> bool:
    """Whether a process of this number runs on this host (someone else's counts)."""
    if pid <= 0:
        return False  # 0 and negative numbers name process groups
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def die_with_parent(signum: int, parent: int) -> None:
    """Have the kernel send `signum` to this process when `parent` exits (Linux only).

    Call it first thing in a forked child. `parent` is the pid the parent had before the fork:
    if it already died, this process exits at once instead of living on as an orphan.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)  # the loaded libc; no ldconfig lookup
        if libc.prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the parent died between fork and prctl
        os._exit(1)


def close_inherited_index_locks() -> None:
    """Close, in a forked child, its copies of the parent's Tantivy lock files (Linux).

    A lock taken with flock belongs to the open file, which a fork shares. A thread of the
    parent may hold one as the child is forked: Tantivy's reader takes the index's meta lock
    to reload after a commit elsewhere. The parent's thread then lets go by closing its
    descriptor, but the child's copy keeps the lock. The parent's next commit waits for it for
    as long as the child lives, which is the whole scan. Call it first thing in a forked child
    that never touches the index; nothing in the child owns these descriptors, so nothing
    closes them twice."""
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:  # not Linux
        return
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # the listing's own descriptor, gone already
            continue
        base = os.path.basename(target)
        if base.startswith(".tantivy-") and base.endswith(".lock"):
            os.close(int(name))


def limit_memory(memory_mb: int) -> None:
    """Cap this process's address space at its present size plus memory_mb; no core dumps.

    Called first thing in a child (extraction, preview): what it inherited is not counted, so
    the cap is spent on the file it handles. A kernel that refuses the cap is logged, not fatal.
    """
    try:
        with open("/proc/self/statm") as handle:
            baseline = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        baseline = 0
    limit = baseline + memory_mb * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ValueError, OSError) as exc:
        log.warning("Could not cap the memory of process %d: %s", os.getpid(), exc)


def _close(value: Any) -> None:
    value.close()


class Kept:
    """What one process keeps between the files and jobs it handles: its extraction child, its
    OCR child, the thread that runs the model. One entry per name, made on first use and made
    again (the old one closed) when its key, the settings it was made with, changes. An entry
    belongs to the process that made it: a forked child makes its own and leaves the parent's
    alone (a child process or a thread of the parent's is not the forked one's to use or close).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[int, object, Any]] = {}
        self._lock = threading.Lock()

    def get(self, name: str, key: object, make: Callable[[], T], close: Callable[[T], None] = _close) -> T:
        """The entry `name` made with `key`: the one kept, or a new one from `make()`."""
        pid = os.getpid()
        with self._lock:
            held = self._entries.get(name)
            if held is not None and held[0] == pid:
                if held[1] == key:
                    return held[2]
                del self._entries[name]
                close(held[2])
            value = make()
            self._entries[name] = (pid, key, value)
            return value


# the one instance: a process's entries, created on first use (nothing is made at import)
kept = Kept()
