"""Process lifelines: a child that must not outlive the process that started it."""

from __future__ import annotations

import ctypes
import os
import sys

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
