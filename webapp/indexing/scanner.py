"""Pure scanning core: walk a source root, detect changes, and the document id rules.

Walk rules:
- Excluded directories are pruned: never listed, never entered.
- Symlinked directories are never followed (no loops, no escaping the root). A symlinked file
  is yielded under its own path (with the target's size and mtime) only when its target
  resolves inside the root; dangling links and links leaving the root are skipped silently.
- Unreadable or vanished directories and files are reported through `on_error` and skipped.
- Names that are not valid UTF-8 (they arrive as surrogate escapes) are reported with the
  message `File name is not valid UTF-8` and skipped: they cannot be stored in the database,
  JSON or the search index reliably. The reported path has U+FFFD in place of the bad bytes.
- Anything other than regular files and directories (fifos, sockets, devices) is skipped.
- Entries are visited in name order, files of a directory before its subdirectories.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Container, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from webapp.indexing.globs import PatternSet

ErrorCallback = Callable[[str, str], None]

NOT_UTF8 = "File name is not valid UTF-8"

MEMBER_SEPARATOR = "!/"  # a member's path: `<container>!/<name>[!/<name inside>...]`


class FileStat(NamedTuple):
    """One file found on disk: absolute path, where in it the path relative to the root
    starts, size, mtime. (A first scan holds one per file: no second string for relpath.)"""

    path: str
    rel_start: int
    size: int
    mtime_ns: int

    @property
    def relpath(self) -> str:
        """The path relative to the scanned root."""
        return self.path[self.rel_start :]


class RootUnavailable(OSError):
    """The source root is missing or unreadable, so a scan must not run (it would delete all)."""


def path_hash(path: str) -> str:
    """Full SHA-256 hex digest of a file path (the record's `hash`)."""
    return hashlib.sha256(path.encode("utf-8")).hexdigest()


def doc_id(source_id: str, path: str) -> str:
    """Search document id: `{source_id}--{first 12 hex of sha256(path)}`."""
    return f"{source_id}--{path_hash(path)[:12]}"


def source_of(doc_id: str) -> str | None:
    """The source id a document id names (None when it is not of doc_id()'s form)."""
    source_id, sep, _ = doc_id.rpartition("--")
    return source_id if sep and source_id else None


def check_root(root: str) -> str | None:
    """Return why `root` cannot be scanned (missing, not a directory, unreadable), or None."""
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except FileNotFoundError:
        return f"Root path does not exist: {_printable(root)}"
    except NotADirectoryError:
        return f"Root path is not a directory: {_printable(root)}"
    except PermissionError:
        return f"Root path is not readable: {_printable(root)}"
    except OSError as exc:
        return f"Root path cannot be read: {_printable(root)}: {exc.strerror or exc}"
    return None


def walk(root: str, patterns: PatternSet, on_error: ErrorCallback, under: str = "") -> Iterator[FileStat]:
    """Yield every regular file under `root` that the patterns select (see module doc).

    `under` (a folder relative to the root, say `a/b`) limits the walk to that folder; its
    own place is not checked here (see `walk_paths`).
    Raises RootUnavailable when the root itself cannot be listed; every other problem is
    reported through `on_error(path, message)` and skipped.
    """
    problem = check_root(root)
    if problem:
        raise RootUnavailable(problem)
    top = os.path.abspath(root)
    real_top = os.path.realpath(top)
    stack: list[tuple[str, str]] = [(os.path.join(top, under), under + "/")] if under else [(top, "")]
    while stack:
        dirpath, reldir = stack.pop()
        entries = _list_dir(dirpath, on_error)
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            rel = f"{reldir}{entry.name}"
            kind = _kind(entry, on_error)
            if kind == "dir":
                if not patterns.prunes_dir(rel):
                    subdirs.append((entry.path, rel + "/"))
            elif kind and patterns.matches_file(rel, check_parents=False):
                found = _file_stat(entry, rel, kind, real_top, on_error)
                if found is not None:
                    yield found
        stack.extend(reversed(subdirs))


def covering(paths: Iterable[str]) -> list[str]:
    """The paths without those below another one of them (a folder covers its contents)."""
    kept: set[str] = set()
    for path in sorted({p.rstrip("/") or "/" for p in paths}, key=len):
        parent, covered = path, False
        while not covered:
            parent, _ = os.path.split(parent)
            covered = parent in kept
            if parent in ("/", ""):
                break
        if not covered:
            kept.add(path)
    return sorted(kept)


def walk_paths(
    root: str, paths: Iterable[str], patterns: PatternSet, on_error: ErrorCallback
) -> Iterator[FileStat]:
    """What `walk` would yield at these paths only: a file, or everything below a folder.

    The paths are absolute (below `root`) and may name things gone since; those yield
    nothing. A path under an excluded or symlinked folder yields nothing either, as in `walk`.
    """
    top = os.path.abspath(root)
    real_top = os.path.realpath(top)
    for path in covering(paths):
        if path == top:
            yield from walk(root, patterns, on_error)
            continue
        if not within(path, top):
            continue
        rel = path[len(top) + 1 :]
        if not _reachable(top, real_top, rel, patterns):
            continue
        try:
            rel.encode("utf-8")
            st = os.lstat(path)
        except UnicodeEncodeError:
            on_error(_printable(path), NOT_UTF8)
            continue
        except OSError:
            continue  # gone already: its records are deleted
        if stat.S_ISDIR(st.st_mode):
            if not patterns.prunes_dir(rel):
                yield from walk(root, patterns, on_error, under=rel)
        elif patterns.matches_file(rel):
            found = _path_stat(path, rel, st, real_top, on_error)
            if found is not None:
                yield found


def _reachable(top: str, real_top: str, rel: str, patterns: PatternSet) -> bool:
    """Whether the walk would get to `rel`: no folder on the way excluded or a symlink."""
    parent = os.path.dirname(rel)
    if parent and os.path.realpath(os.path.join(top, parent)) != os.path.join(real_top, parent):
        return False
    parts = parent.split("/") if parent else []
    return not any(patterns.prunes_dir("/".join(parts[:d])) for d in range(1, len(parts) + 1))


def _path_stat(
    path: str, rel: str, st: os.stat_result, real_top: str, on_error: ErrorCallback
) -> FileStat | None:
    """A FileStat of a regular file or of a symlink to a regular file inside the root."""
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(path)
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode) or not _inside(path, real_top):
            return None
    elif not stat.S_ISREG(st.st_mode):
        return None
    return FileStat(path, len(path) - len(rel), st.st_size, st.st_mtime_ns)


def _list_dir(dirpath: str, on_error: ErrorCallback) -> list[os.DirEntry[str]]:
    """Entries of one directory with valid UTF-8 names, sorted; errors are reported."""
    try:
        with os.scandir(dirpath) as it:
            entries = list(it)
    except OSError as exc:
        on_error(_printable(dirpath), _dir_error(exc))
        return []
    good = []
    for entry in entries:
        try:
            entry.name.encode("utf-8")
        except UnicodeEncodeError:
            on_error(_printable(entry.path), NOT_UTF8)
            continue
        good.append(entry)
    good.sort(key=lambda e: e.name)
    return good


def _kind(entry: os.DirEntry[str], on_error: ErrorCallback) -> str | None:
    """'dir', 'file', 'link' (symlink to check) or None (skip) for one entry."""
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        if entry.is_file(follow_symlinks=False):
            return "file"
    except OSError as exc:
        on_error(_printable(entry.path), _file_error(exc))
    return None


def _file_stat(
    entry: os.DirEntry[str], rel: str, kind: str, real_top: str, on_error: ErrorCallback
) -> FileStat | None:
    """Stat a selected file (following a symlink only to a regular file inside the root)."""
    try:
        if kind == "link":
            st = os.stat(entry.path)
            if not stat.S_ISREG(st.st_mode) or not _inside(entry.path, real_top):
                return None
        else:
            st = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        if kind == "file":  # a dangling symlink is not worth reporting; a vanished file is
            on_error(_printable(entry.path), "File vanished during the scan")
        return None
    except OSError as exc:
        on_error(_printable(entry.path), _file_error(exc))
        return None
    return FileStat(entry.path, len(entry.path) - len(rel), st.st_size, st.st_mtime_ns)


def _inside(path: str, real_top: str) -> bool:
    """True when `path` resolves (all symlinks followed) to a place below `real_top`."""
    real = os.path.realpath(path)
    return real != real_top and within(real, real_top)


def within(path: str, folder: str) -> bool:
    """Whether the resolved `path` is the resolved `folder` or lies below it."""
    try:
        return os.path.commonpath([path, folder]) == folder
    except ValueError:
        return False


def inside_any(path: str, folders: Iterable[str]) -> bool:
    """Whether `path` (symlinks followed) lies inside one of the resolved `folders`."""
    real = os.path.realpath(path)
    return any(within(real, folder) for folder in folders)


def root_problem(root: str, allowed_roots: Iterable[str]) -> str | None:
    """Why a source's root cannot be scanned now (missing, unreadable, or resolving outside
    the allowed roots since it was added), or None."""
    problem = check_root(root)
    if problem is None and not inside_any(root, allowed_roots):
        problem = f"Root path now resolves outside the allowed roots: {root}"
    return problem


def _dir_error(exc: OSError) -> str:
    """User-facing message for a directory that cannot be listed."""
    if isinstance(exc, FileNotFoundError):
        return "Directory vanished during the scan"
    if isinstance(exc, PermissionError):
        return "Permission denied: directory is not readable"
    return f"Directory cannot be read: {exc.strerror or exc}"


def _file_error(exc: OSError) -> str:
    """User-facing message for a file that cannot be examined."""
    if isinstance(exc, PermissionError):
        return "Permission denied"
    return f"File cannot be read: {exc.strerror or exc}"


def _printable(path: str) -> str:
    """The path with undecodable bytes shown as U+FFFD, safe for JSON and the database."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@dataclass
class Changes:
    """The result of comparing disk with the records of the last scan.

    Only what needs work is kept: files to index and paths to delete. Unchanged files are
    counted, not listed, so a rescan of a million unchanged files holds no list of them.
    """

    new: list[FileStat] = field(default_factory=list)
    modified: list[FileStat] = field(default_factory=list)
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)

    @property
    def to_index(self) -> list[FileStat]:
        """Files that need extraction: new ones first, then modified ones."""
        return self.new + self.modified

    @property
    def scanned(self) -> int:
        """Files the walk selected."""
        return len(self.new) + len(self.modified) + self.unchanged


def diff(
    disk: Iterable[FileStat],
    records: dict[str, tuple[int, int]],
    *,
    full: bool = False,
    retry: Container[str] = frozenset(),
) -> Changes:
    """Classify files by path against records `{path: (size, mtime_ns)}`, consuming both.

    `disk` (the walk, streamed) is what the walk selected, so a record whose file is gone or
    no longer matches the patterns is `deleted`. With `full=True` every known file counts as
    modified; so does a known file whose path is in `retry` (its last try failed for a reason
    that may have passed). Matched records are removed from `records` as they are found.
    """
    changes = Changes()
    for found in disk:
        known = records.pop(found.path, None)
        if known is None:
            changes.new.append(found)
        elif full or known[0] != found.size or known[1] != found.mtime_ns or found.path in retry:
            changes.modified.append(found)
        else:
            changes.unchanged += 1
    changes.deleted = list(records)
    records.clear()
    return changes
