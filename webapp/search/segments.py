"""A source's vector files (search/vectors.py): how segments and tombstones are named, written
atomically (temporary file, flush, rename, flush the folder) and checked, which segments a
merge takes, and which temporary files no writer will finish."""

from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from webapp.procs import pid_alive

MERGE_FANOUT = 4  # segments of one size class merged into one (docs/performance.md "Meaning")
SIZE_CLASS_BASE = 64 * 1024  # bytes: segments smaller than this are of the smallest class
MERGE_MAX_BYTES = 256 * 1024 * 1024  # no merge makes a larger segment (one takes ~2 CPU-minutes)
TEMP_MAX_AGE = 3600.0  # seconds: another host's temporary file older than this is stale
SEGMENT_NAME = re.compile(r"^seg-(\d+)-(\d+)-([0-9a-f]{8})\.usearch$")
TOMBSTONE_NAME = re.compile(r"^del-(\d+)-([0-9a-f]{8})\.keys$")
TEMP_NAME = re.compile(r"^\.(.+)\.([^.]+)\.(\d+)\.tmp$")  # .<name>.<host>.<pid>.tmp
HOST = socket.gethostname().replace(".", "_")


class Unreadable(Exception):
    """A source's vector file cannot be read (its source is left out of meaning)."""


class NoSpace(OSError):
    """A vector write failed for want of disk space (nothing of it was left behind)."""


@dataclass(frozen=True)
class SegmentFile:
    """One segment or tombstone file of a source, as listed."""

    path: Path
    lo: int
    hi: int
    crc: int | None  # None: a file stored before segments (no checksum in its name)
    stamp: tuple[int, int, int]  # (inode, size, mtime) when listed


def crc_of(path: Path) -> int:
    crc = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def fsync_file(path: Path) -> None:
    """Flush a file's bytes to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Flush a folder's entries (a rename in it) to disk."""
    fsync_file(folder)


def _no_space(exc: BaseException, folder: Path) -> bool:
    """Whether a failed write failed for space (usearch's errors carry no errno: asked of
    the file system then)."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    try:
        usage = shutil.disk_usage(folder)
    except OSError:
        return False
    return usage.free < 4 * 1024 * 1024


def publish_file(tmp: Path, path: Path) -> None:
    """Flush a written temporary file, rename it to `path`, flush the folder."""
    fsync_file(tmp)
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _space_error(tmp: Path, exc: BaseException) -> NoSpace | None:
    """Remove a failed write's temporary file; NoSpace when it failed for space."""
    tmp.unlink(missing_ok=True)
    if isinstance(exc, Exception) and _no_space(exc, tmp.parent):
        return NoSpace(errno.ENOSPC, f"no space left on the vectors' disk ({tmp.parent})")
    return None


def save_segment(index, folder: Path, lo: int, hi: int, publish: bool = True) -> Path:
    """Write a segment (temporary file, flush, rename, flush the folder); with `publish`
    off, leave it flushed under its temporary name (returned) for the caller to rename."""
    tmp = folder / f".seg-{lo:010d}-{hi:010d}.{HOST}.{os.getpid()}.tmp"
    try:
        index.save(str(tmp))
        if tmp.stat().st_size != index.serialized_length:  # usearch may not say it failed
            raise OSError(f"{tmp.name}: written short of {index.serialized_length} bytes")
        if not publish:
            fsync_file(tmp)
            return tmp
        publish_file(tmp, folder / f"seg-{lo:010d}-{hi:010d}-{crc_of(tmp):08x}.usearch")
    except BaseException as exc:
        if space := _space_error(tmp, exc):
            raise space from exc
        raise
    return tmp


def save_tombstone(folder: Path, seq: int, keys: list[int]) -> None:
    """Write the keys deleted by write `seq` (as a segment: atomically)."""
    data = np.asarray(sorted(set(keys)), dtype="<u8").tobytes()
    tmp = folder / f".del-{seq:010d}.{HOST}.{os.getpid()}.tmp"
    try:
        tmp.write_bytes(data)
        publish_file(tmp, folder / f"del-{seq:010d}-{zlib.crc32(data):08x}.keys")
    except BaseException as exc:
        if space := _space_error(tmp, exc):
            raise space from exc
        raise


def read_keys(tomb: SegmentFile) -> np.ndarray:
    """The keys of a tombstone; Unreadable when its bytes are not what was written."""
    data = tomb.path.read_bytes()
    if len(data) % 8 or zlib.crc32(data) != tomb.crc:
        raise Unreadable(f"{tomb.path.name}: its bytes do not match their checksum")
    return np.frombuffer(data, dtype="<u8")


def _size_class(size: int) -> int:
    """A segment's size class: 0 below SIZE_CLASS_BASE, then one per MERGE_FANOUT times more."""
    classes = 0
    while size >= SIZE_CLASS_BASE:
        size //= MERGE_FANOUT
        classes += 1
    return classes


def merge_run(segments: list[SegmentFile]) -> list[SegmentFile] | None:
    """The segments to merge: the newest ones of the newest's size class or smaller, when
    they are MERGE_FANOUT or more; None otherwise."""
    if len(segments) < MERGE_FANOUT:
        return None
    top = _size_class(segments[-1].stamp[1])
    start, total = len(segments), 0
    while start > 0:
        size = segments[start - 1].stamp[1]
        if _size_class(size) > top or total + size > MERGE_MAX_BYTES:
            break
        start, total = start - 1, total + size
    run = segments[start:]
    return run if len(run) >= MERGE_FANOUT else None


def stale(path: Path) -> bool:
    """Whether a dot-file of the vectors' folders is a temporary file no writer will finish."""
    match = TEMP_NAME.match(path.name)
    legacy = re.match(r"^\..+\.usearch\.(\d+)$", path.name)  # before segments: .<file>.<pid>
    if legacy:
        return not pid_alive(int(legacy[1]))
    if not match:
        return False
    if match[2] == HOST:
        return not pid_alive(int(match[3]))
    try:
        return time.time() - path.stat().st_mtime > TEMP_MAX_AGE
    except FileNotFoundError:
        return False
