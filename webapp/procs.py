"""Process lifelines: a child that must not outlive the process that started it."""

from __future__ import annotations

import ctypes
import logging
import os
import resource
import sys

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1  # linux/prctl.h


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
