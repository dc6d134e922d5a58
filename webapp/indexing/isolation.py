"""Extraction in a reusable child process with per-type timeouts and a memory cap.

The parent sends one path per request over a pipe; the child answers with the extracted
document or a short error. A child that misses its deadline is killed, one that crashes
(segfault, out of memory) is reaped, and the next file gets a fresh child.
"""

from __future__ import annotations

import faulthandler
import logging
import multiprocessing
import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from webapp.indexing.extractors import (
    TIMEOUT_MESSAGE,
    UNREADABLE_MESSAGE,
    VANISHED_MESSAGE,
    Extracted,
    ExtractionError,
    ExtractionSettings,
    ExtractorSpec,
    extract,
    find_extractor,
    preload,
    thumbnail,
)
from webapp.indexing.runstats import FileStatus
from webapp.procs import die_with_parent, limit_memory

log = logging.getLogger(__name__)
CRASH_MESSAGE = "Extractor crashed on this file"
MEMORY_MESSAGE = "File needs too much memory to extract"
START_MESSAGE = "Extraction child did not start"
CHILD_START_TIMEOUT = 60.0  # seconds a new child may take to start (a spawn on a busy machine)


@dataclass
class FileResult:
    """Outcome of one file: status success|failed|skipped, the document, and why it failed."""

    status: FileStatus
    doc: Extracted
    error_message: str | None = None


def _format_seconds(seconds: float) -> str:
    return f"{seconds:g}"




def _child_main(conn: Any, other_end: Any, settings: ExtractionSettings,
                extra: tuple[ExtractorSpec, ...], parent: int) -> None:
    """Child loop: receive a path, send back ("ok", doc) or ("error", message)."""
    die_with_parent(signal.SIGKILL, parent)  # a hanging extraction must not outlive its worker
    other_end.close()
    faulthandler.disable()  # a crash is reported by the parent as a failed file
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    limit_memory(settings.memory_mb)
    conn.send(("ready", None))  # a file's timeout starts now, not while the child starts up
    while True:
        try:
            path = conn.recv()
        except (EOFError, OSError):
            return
        if path is None:
            return
        try:
            doc = extract(path, settings, extra)
            doc.thumbnail = thumbnail(path, doc, settings, extra)  # same child, same limits
            reply: tuple[str, Any] = ("ok", doc)
        except ExtractionError as exc:
            reply = ("error", str(exc) or "Extraction failed")
        except MemoryError:
            reply = ("fatal", MEMORY_MESSAGE)
        except BaseException as exc:  # noqa: B036 - the child must answer whatever happens
            reply = ("fatal", f"Extraction failed: {type(exc).__name__}")
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("fatal", MEMORY_MESSAGE))
        if reply[0] == "fatal":
            return


class Extractor:
    """Owns one extraction child process; use as a context manager or call close()."""

    def __init__(self, settings: ExtractionSettings,
                 extra_extractors: Iterable[ExtractorSpec] = (),
                 start_method: str | None = None) -> None:
        self.settings = settings
        self.extra = tuple(extra_extractors)  # test seam: specs tried before the registry
        if start_method is None:
            methods = multiprocessing.get_all_start_methods()
            start_method = "fork" if "fork" in methods else "spawn"
        self._ctx = multiprocessing.get_context(start_method)
        self._proc: Any = None
        self._conn: Any = None
        self.children_started = 0
        if self._ctx.get_start_method() == "fork":
            preload()

    def __enter__(self) -> Extractor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """Process id of the current child, if one is running."""
        return self._proc.pid if self._proc is not None and self._proc.is_alive() else None

    def run(self, path: str) -> FileResult:
        """Extract one file; never raises for a bad file."""
        spec = find_extractor(path, self.extra)
        doc_type = spec.type if spec else "file"
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return self._failed(doc_type, VANISHED_MESSAGE)
        except OSError:
            return self._failed(doc_type, UNREADABLE_MESSAGE)
        if size > self.settings.max_file_size_bytes:
            message = f"File is larger than {self.settings.max_file_size_mb} MB"
            return FileResult(FileStatus.SKIPPED, Extracted(type=doc_type), message)
        if spec is None:
            return FileResult(FileStatus.SUCCESS, Extracted(type="file"))
        return self._ask_child(path, doc_type)

    def _ask_child(self, path: str, doc_type: str) -> FileResult:
        timeout = self.settings.timeout_for(doc_type)
        try:
            conn = self._ensure_child()
        except (EOFError, OSError, TimeoutError) as exc:
            log.warning("Extraction child did not start for %s: %s", path, exc)
            self._kill()
            return self._failed(doc_type, START_MESSAGE)
        try:
            conn.send(path)
            if not conn.poll(timeout):
                log.warning("Extraction of %s timed out after %s s; child killed", path, timeout)
                self._kill()
                return self._failed(doc_type,
                                    f"{TIMEOUT_MESSAGE} {_format_seconds(timeout)} s")
            kind, payload = conn.recv()
        except (EOFError, OSError):
            log.warning("Extraction child died on %s", path)
            self._kill()
            return self._failed(doc_type, CRASH_MESSAGE)
        if kind == "ok":
            return FileResult(FileStatus.SUCCESS, payload)
        if kind == "fatal":
            self._kill()
        return self._failed(doc_type, payload)

    def _failed(self, doc_type: str, message: str) -> FileResult:
        return FileResult(FileStatus.FAILED, Extracted(type=doc_type), message)

    def _ensure_child(self) -> Any:
        if self._proc is not None and self._proc.is_alive():
            return self._conn
        if self._proc is not None:
            self._kill()
        parent_end, child_end = self._ctx.Pipe(duplex=True)
        proc = self._ctx.Process(
            target=_child_main,
            args=(child_end, parent_end, self.settings, self.extra, os.getpid()),
            name="trawl-extractor", daemon=True,
        )
        proc.start()
        child_end.close()
        self._proc, self._conn = proc, parent_end
        self.children_started += 1
        # Start-up (a spawn re-imports everything) is slow on a busy machine: wait for the
        # child's word before the file's own timeout starts counting.
        if not parent_end.poll(CHILD_START_TIMEOUT):
            raise TimeoutError(f"no answer after {CHILD_START_TIMEOUT} s")
        parent_end.recv()
        return parent_end

    def _kill(self) -> None:
        """Stop the child at once (after a timeout or crash) and forget it."""
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(5)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Ask the child to exit, then make sure it is gone."""
        proc, conn = self._proc, self._conn
        if proc is None:
            return
        try:
            conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        proc.join(2)
        self._kill()
