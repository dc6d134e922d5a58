"""Linux inotify through libc (ctypes): one instance per watched source, one watch per folder.

Why not a library: the watcher must skip the folders a source excludes (`node_modules`, `.git`
...), which cost a kernel watch each and only produce events we would drop; it must tell the
watch limit (ENOSPC) apart to fall back to polling; and it needs nothing but the folder of
every event. Those are a few dozen lines over the three system calls (see docs/architecture.md
"Live index" for the comparison with watchdog).

`Tree` keeps the watches of one source: it adds a watch to every folder the source's patterns
let the walk enter, follows folders created, moved or deleted under it, and turns each event
into the path that changed (a file, or a folder whose whole subtree must be looked at again).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os
import struct
from collections.abc import Callable

from webapp.indexing.globs import PatternSet

IN_MODIFY = 0x002
IN_ATTRIB = 0x004
IN_CLOSE_WRITE = 0x008
IN_MOVED_FROM = 0x040
IN_MOVED_TO = 0x080
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
    | IN_DONT_FOLLOW
    | IN_EXCL_UNLINK
)
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len
READ_SIZE = 64 * 1024
LIMIT_HINT = (
    "raise the kernel's limit: sysctl -w fs.inotify.max_user_watches=524288 "
    "(and fs.inotify.max_user_instances for many sources), then restart the watcher"
)


@functools.cache
def _lib() -> ctypes.CDLL:
    """libc, opened on first use (a process's one handle; a failure is not kept: tried again)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    return libc


class WatchLimit(OSError):
    """The kernel refused a watch or an instance (fs.inotify.max_user_watches / instances)."""


def supported() -> bool:
    """Whether this system has inotify (Linux)."""
    try:
        return hasattr(_lib(), "inotify_init1")
    except OSError:
        return False


class Tree:
    """The inotify watches of one source's folders, and the paths its events name."""

    def __init__(self, root: str, patterns: PatternSet, max_watches: int = 0):
        self.root = root.rstrip("/") or "/"
        self.patterns = patterns
        self.max_watches = max_watches  # 0: as many as the kernel allows
        self.wds: dict[int, str] = {}  # watch descriptor -> folder
        fd = _lib().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise _error(err, "inotify_init1")
        self.fd = fd

    def close(self) -> None:
        """Drop every watch (closing the instance does it in the kernel)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.wds.clear()

    def fileno(self) -> int:
        """For select/poll."""
        return self.fd

    # -- watches -----------------------------------------------------------------------------
    def _rel(self, path: str) -> str:
        return path[len(self.root) + 1 :] if path != self.root else ""

    def watch_all(self, top: str | None = None) -> None:
        """Watch `top` (default: the root) and every folder below it the patterns let in.

        Raises WatchLimit when the kernel (or `max_watches`) refuses one more watch.
        """
        stack = [top or self.root]
        while stack:
            folder = stack.pop()
            if not self._add(folder):
                continue
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False) and not self.prunes(entry.path):
                            stack.append(entry.path)
            except OSError:
                continue  # vanished or unreadable: a scan reports it, the watch is just absent

    def prunes(self, folder: str) -> bool:
        """Whether the source's patterns keep the walk out of this folder."""
        rel = self._rel(folder)
        return bool(rel) and self.patterns.prunes_dir(rel)

    def _add(self, folder: str) -> bool:
        if self.max_watches and len(self.wds) >= self.max_watches:
            raise WatchLimit(errno.ENOSPC, f"more than {self.max_watches} folders to watch")
        try:
            encoded = os.fsencode(folder)
        except UnicodeError:
            return False
        wd = _lib().inotify_add_watch(self.fd, encoded, MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOSPC, errno.EMFILE):
                raise _error(err, folder)
            return False  # vanished, not a folder, unreadable
        self.wds[wd] = folder
        return True

    def _forget_under(self, folder: str) -> None:
        """Stop watching a folder moved away, and everything below it."""
        prefix = folder + "/"
        for wd, path in list(self.wds.items()):
            if path == folder or path.startswith(prefix):
                del self.wds[wd]
                _lib().inotify_rm_watch(self.fd, wd)

    # -- events ------------------------------------------------------------------------------
    def read(self, on_path: Callable[[str, bool], None]) -> bool:
        """Read the pending events; call `on_path(path, writing)` for every changed path.

        `writing` is true for a file created or written to and not closed yet (it may still be
        being written); a close after writing, a delete, a move or a folder event is settled.

        Returns False when the kernel's queue overflowed (events were lost: rescan the root).
        """
        try:
            data = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            return True
        complete = True
        pos = 0
        while pos + _HEADER.size <= len(data):
            wd, mask, _cookie, length = _HEADER.unpack_from(data, pos)
            raw = data[pos + _HEADER.size : pos + _HEADER.size + length].rstrip(b"\0")
            pos += _HEADER.size + length
            if mask & IN_Q_OVERFLOW:
                complete = False
                continue
            self._event(wd, mask, os.fsdecode(raw), on_path)
        return complete

    def _event(self, wd: int, mask: int, name: str, on_path: Callable[[str, bool], None]) -> None:
        folder = self.wds.get(wd)
        if folder is None:
            return
        if mask & IN_IGNORED:
            del self.wds[wd]
            return
        if not name:  # the watched folder itself was deleted or moved
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF):
                if folder == self.root:
                    on_path(folder, False)
                self._forget_under(folder)
            return
        path = f"{folder}/{name}"
        if mask & IN_ISDIR:
            if self.prunes(path):
                return
            if mask & IN_MOVED_FROM:
                self._forget_under(path)
            elif mask & (IN_CREATE | IN_MOVED_TO):
                self.watch_all(path)  # before the run walks it: nothing created meanwhile is missed
            elif not mask & (IN_DELETE | IN_ATTRIB):
                return
            on_path(path, False)
            return
        on_path(path, bool(mask & (IN_CREATE | IN_MODIFY)))


def _error(err: int, what: str) -> OSError:
    message = f"{os.strerror(err)} ({what})"
    if err in (errno.ENOSPC, errno.EMFILE):
        return WatchLimit(err, message)
    return OSError(err, message)
