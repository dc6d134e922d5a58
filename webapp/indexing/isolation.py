"""Extraction in a reusable child process with per-type timeouts and a memory cap.

The parent sends a group of paths in one request over a pipe; the child answers each in turn
with the extracted document or a short error, so it never waits for the parent between files.
A child that misses a file's deadline is killed, one that crashes (segfault, out of memory) is
reaped, and the files after it in the group go to a fresh child.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Generic, TypeVar

from webapp.indexing.extractors import (
    TIMEOUT_MESSAGE,
    UNREADABLE_MESSAGE,
    VANISHED_MESSAGE,
    Budget,
    ContainerBomb,
    Extracted,
    ExtractionError,
    ExtractionSettings,
    ExtractorSpec,
    Member,
    detect_type,
    extract,
    find_extractor,
    preload,
    thumbnail,
    unpack,
)
from webapp.indexing.extractors.base import extension, is_mailbox
from webapp.indexing.ocr import holds_text, needs_ocr
from webapp.indexing.runstats import FileStatus
from webapp.procs import close_inherited_index_locks, die_with_parent, limit_memory

log = logging.getLogger(__name__)
CRASH_MESSAGE = "Extractor crashed on this file"
MEMORY_MESSAGE = "File needs too much memory to extract"
START_MESSAGE = "Extraction child did not start"
CHILD_START_TIMEOUT = 60.0  # seconds a new child may take to start (a spawn on a busy machine)
MAX_DEPTH = 3  # containers are opened this deep (a.zip!/b.zip!/c.zip!/d.txt); deeper ones listed
CHILD_GROUP = 64  # files sent to the child in one request (resent to a new child after a crash)
INTERRUPT_POLL = 1.0  # seconds between two looks at `Extractor.interrupt` while the child works


class Interrupted(Exception):
    """The caller's `interrupt` said stop while the child worked: the child was killed."""


# -- the wire: what goes through the pipe (pickled) ---------------------------------------
@dataclass(frozen=True)
class Extract:
    """Request: extract the file at `path` and make its thumbnail (answer: an Extracted)."""

    path: str


@dataclass(frozen=True)
class Unpack:
    """Request: unpack the container at `path` into the `spool` folder within the tree's
    `budget` (answer: the container's Extracted and its members)."""

    path: str
    spool: str
    budget: Budget


@dataclass(frozen=True)
class Call:
    """Request: run a module-level `function(*args)` (answer: its return value)."""

    function: Callable[..., Any]
    args: tuple


Request = Extract | Unpack | Call


class Reply(StrEnum):
    """What kind of answer the child sends."""

    READY = "ready"  # started, once before any request: timeouts count from here
    OK = "ok"  # payload: the request's result
    ERROR = "error"  # payload: why the file could not be extracted
    BOMB = "bomb"  # payload: why the container is a bomb
    FATAL = "fatal"  # payload: the message; the child exits after sending it


@dataclass(frozen=True)
class Answer:
    """The child's answer to one request, with the seconds it took there."""

    kind: Reply
    payload: Any = None
    seconds: float = 0.0


@dataclass
class FileResult:
    """Outcome of one file: status success|failed|skipped, the document, and why it failed;
    for a container, every member at every depth (flattened)."""

    status: FileStatus
    doc: Extracted
    error_message: str | None = None
    members: list[MemberResult] = field(default_factory=list)
    seconds: float = 0.0  # time the extraction took (in the child, for a file it extracted)


T = TypeVar("T")


@dataclass(frozen=True)
class Called(Generic[T]):
    """What a function run in the child (`Extractor.call`) gave: its value, or why it gave
    none (`error`: it raised, timed out, or the child died)."""

    value: T | None = None
    error: str | None = None
    seconds: float = 0.0  # the time it took in the child (a timeout's: the timeout)

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class MemberResult:
    """One member of a container: its path inside the outermost container (`b.zip!/c.txt`),
    the inner path of the container holding it ('' for the outermost), its size and mtime."""

    inner: str
    parent: str
    size: int
    mtime: int | None
    result: FileResult


def cut_message(limit: int, path: str, where: str) -> str:
    """What the record of a file whose tree passed its member budget says."""
    setting = "MAILBOX_MAX_MEMBERS" if is_mailbox(path) else "ARCHIVE_MAX_MEMBERS"
    return (
        f"Cut at {limit:,} members ({setting}, for this file and everything inside it): "
        f"indexing stopped in {where or 'the file itself'}; what comes after it was not indexed"
    )


def _format_seconds(seconds: float) -> str:
    return f"{seconds:g}"


def _child_main(
    conn: Any, other_end: Any, settings: ExtractionSettings, extra: tuple[ExtractorSpec, ...], parent: int
) -> None:
    """Child loop: receive a list of requests (None: exit), send back an Answer for each."""
    die_with_parent(signal.SIGKILL, parent)  # a hanging extraction must not outlive its worker
    close_inherited_index_locks()  # forked from a scan that has the index open
    other_end.close()
    faulthandler.disable()  # a crash is reported by the parent as a failed file
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    limit_memory(settings.memory_mb)
    conn.send(Answer(Reply.READY))  # a file's timeout starts now, not while the child starts up
    while True:
        try:
            requests: list[Request] | None = conn.recv()
        except (EOFError, OSError):
            return
        if requests is None:
            return
        for request in requests:
            started = time.perf_counter()
            kind, payload = _answer_one(request, settings, extra)
            try:
                conn.send(Answer(kind, payload, time.perf_counter() - started))
            except MemoryError:
                kind = Reply.FATAL
                conn.send(Answer(kind, MEMORY_MESSAGE, time.perf_counter() - started))
            if kind == Reply.FATAL:
                return


def _text_test(path: str, doc: Extracted, settings: ExtractionSettings) -> bool | None:
    """Whether a picture that would wait for OCR looks like it holds text (None: not tested)."""
    if not settings.text_test or doc.type not in ("image", "raw_image"):
        return None
    if not needs_ocr(doc.type, extension(path), doc.metadata or {}):
        return None
    return holds_text(path, doc.type, doc.metadata or {}, settings)


def _answer_one(
    request: Request, settings: ExtractionSettings, extra: tuple[ExtractorSpec, ...]
) -> tuple[Reply, Any]:
    """The child's answer to one request: its kind and payload."""
    try:
        match request:
            case Call(function, args):
                return Reply.OK, function(*args)
            case Unpack(path, spool, budget):
                return Reply.OK, unpack(path, settings, spool, budget)
            case Extract(path):
                doc = extract(path, settings, extra)
                doc.thumbnail = thumbnail(path, doc, settings, extra)  # same child, same limits
                doc.holds_text = _text_test(path, doc, settings)
                return Reply.OK, doc
        raise TypeError(f"not a request: {request!r}")
    except ContainerBomb as exc:
        return Reply.BOMB, str(exc)
    except ExtractionError as exc:
        return Reply.ERROR, str(exc) or "Extraction failed"
    except MemoryError:
        return Reply.FATAL, MEMORY_MESSAGE
    except BaseException as exc:  # noqa: B036 - the child must answer whatever happens
        return Reply.FATAL, f"Extraction failed: {type(exc).__name__}"


def remove_stale_spools(spool_dir: str) -> None:
    """Remove spool folders left by worker processes that died while unpacking a container."""
    try:
        names = os.listdir(spool_dir)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if len(parts) < 3 or parts[0] != "unpack" or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            shutil.rmtree(os.path.join(spool_dir, name), ignore_errors=True)
        except OSError:
            continue  # alive, another user's: not ours to judge


class Extractor:
    """Owns one extraction child process; use as a context manager or call close()."""

    def __init__(
        self,
        settings: ExtractionSettings,
        extra_extractors: Iterable[ExtractorSpec] = (),
        start_method: str | None = None,
    ) -> None:
        self.settings = settings
        self.extra = tuple(extra_extractors)  # test seam: specs tried before the registry
        if start_method is None:
            methods = multiprocessing.get_all_start_methods()
            start_method = "fork" if "fork" in methods else "spawn"
        self._ctx = multiprocessing.get_context(start_method)
        self._proc: Any = None
        self._conn: Any = None
        self.children_started = 0
        # asked every INTERRUPT_POLL s while waiting for the child: True kills it (Interrupted)
        self.interrupt: Callable[[], bool] | None = None
        if self._ctx.get_start_method() == "fork":
            preload()
        remove_stale_spools(settings.spool_dir)

    def __enter__(self) -> Extractor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """Process id of the current child, if one is running."""
        return self._proc.pid if self._proc is not None and self._proc.is_alive() else None

    def run(self, path: str, on_member: Callable[[MemberResult], None] | None = None) -> FileResult:
        """Extract one file; never raises for a bad file. A container's members are handed to
        `on_member` one by one as they are extracted (or collected in `members` without one)."""
        emit = (lambda _path, member: on_member(member)) if on_member else None
        with contextlib.closing(self.run_many([path], emit)) as results:
            return next(results)

    def run_many(
        self,
        paths: Iterable[str],
        on_member: Callable[[str, MemberResult], None] | None = None,
    ) -> Iterator[FileResult]:
        """The result of each file in order, as `run` gives it. Plain files (not containers)
        go to the child CHILD_GROUP at a time, so it extracts the next while the parent takes
        an answer. `on_member(path, member)` gets each member of the container at `path`."""
        group: list[tuple[str, str, FileResult | None]] = []
        for path in paths:
            spec, known = self._check(path)
            if known is None and spec.unpack is not None:  # a container, after those before it
                yield from self._plain(group)
                group = []
                started = time.perf_counter()
                emit = (lambda m, p=path: on_member(p, m)) if on_member else None
                result = self._open(path, spec.type, emit)
                result.seconds = time.perf_counter() - started
                yield result
                continue
            group.append((path, spec.type if spec else "file", known))
            if len(group) >= CHILD_GROUP:
                yield from self._plain(group)
                group = []
        yield from self._plain(group)

    def call(
        self, function: Callable[..., T], *args: Any, doc_type: str = "file", path: str = ""
    ) -> Called[T]:
        """Run a module-level function in the child, with the type's timeout and memory cap:
        its return value, or why there is none."""
        return self._ask_child(Call(function, args), doc_type, path)

    def _check(self, path: str) -> tuple[ExtractorSpec | None, FileResult | None]:
        """A file's extractor, and its result when it is known without the child (vanished,
        unreadable, too large, no extractor); the result is always known without an
        extractor."""
        spec = find_extractor(path, self.extra)
        doc_type = spec.type if spec else "file"
        try:
            size = os.stat(path).st_size
        except FileNotFoundError:
            return spec, self._failed(doc_type, VANISHED_MESSAGE)
        except OSError:
            return spec, self._failed(doc_type, UNREADABLE_MESSAGE)
        if size > self.settings.max_file_size_bytes:
            message = f"File is larger than {self.settings.max_file_size_mb} MB"
            return spec, FileResult(FileStatus.SKIPPED, Extracted(type=doc_type), message)
        if spec is None:
            return spec, FileResult(FileStatus.SUCCESS, Extracted(type="file"))
        return spec, None

    def _plain(self, group: list[tuple[str, str, FileResult | None]]) -> Iterator[FileResult]:
        """Results of a group of plain files in order: those known already, and the others'
        answers from the child, asked in one request."""
        asked = [(Extract(path), doc_type, path) for path, doc_type, known in group if known is None]
        with contextlib.closing(self._ask_many(asked)) as answers:
            for _path, doc_type, known in group:
                yield known if known is not None else self._as_file(next(answers), doc_type)

    def _open(self, path: str, doc_type: str, emit: Callable[[MemberResult], None] | None) -> FileResult:
        """A container's result; its members go to `emit` (or into `members` without one)."""
        collected: list[MemberResult] = []
        budget, cuts = Budget.start(self.settings, path), []
        try:
            result = self._container(path, doc_type, 1, (budget, cuts), emit or collected.append)
        except ContainerBomb as exc:  # its members already handed out are dropped by the caller
            return self._failed(doc_type, str(exc))
        result.members = collected
        if cuts and result.status == FileStatus.SUCCESS:
            limit = Budget.start(self.settings, path).members
            result.error_message = cut_message(limit, path, cuts[0])
            result.doc.metadata["cut"] = result.error_message
        return result

    # -- containers ------------------------------------------------------------------------
    def _container(
        self,
        path: str,
        doc_type: str,
        depth: int,
        budget: tuple[Budget, list[str]],
        emit: Callable[[MemberResult], None],
        prefix: str = "",
    ) -> FileResult:
        """Unpack a container in the child (into a spool folder under DATA_DIR), then extract
        each member like a file and emit it; raises ContainerBomb when it, or one inside it,
        is a bomb. `prefix` is the container's own path inside the outermost one + `!/`;
        `budget` is the tree's, with the containers cut when it ran out."""
        if depth == 1:
            os.makedirs(self.settings.spool_dir, exist_ok=True)
            spool = tempfile.mkdtemp(prefix=f"unpack-{os.getpid()}-", dir=self.settings.spool_dir)
        else:  # inside the outer spool folder, made by the child only when a member needs it
            spool = path + ".members"
        try:
            tree, cuts = budget
            answer = self._ask_child(Unpack(path, spool, tree), doc_type, path)
            if not answer.ok:
                return self._as_file(answer, doc_type)
            doc, members = answer.value
            tree.bytes -= sum(max(m.size, 0) for m in members)
            tree.members -= len(members)
            if doc.metadata.get("cut"):
                cuts.append(prefix[:-2])
            for member in members:
                self._member(member, depth, budget, emit, prefix)
                if member.spooled:  # the spool holds one member's bytes at a time
                    with contextlib.suppress(OSError):
                        os.unlink(member.spooled)
            return FileResult(FileStatus.SUCCESS, doc)
        finally:
            if depth == 1 or os.path.isdir(spool):
                shutil.rmtree(spool, ignore_errors=True)

    def _member(
        self,
        member: Member,
        depth: int,
        budget: tuple[Budget, list[str]],
        emit: Callable[[MemberResult], None],
        prefix: str,
    ) -> None:
        """Extract one member and emit it (after its own members, when it is a container)."""

        def done(result: FileResult) -> None:
            emit(MemberResult(prefix + member.name, prefix[:-2], member.size, member.mtime, result))

        doc_type = detect_type(member.name)
        if member.error:
            return done(self._failed(doc_type, member.error))
        if member.spooled is None:
            if doc_type != "file" and member.size > self.settings.max_file_size_bytes:
                message = f"File is larger than {self.settings.max_file_size_mb} MB"
                return done(FileResult(FileStatus.SKIPPED, Extracted(type=doc_type), message))
            return done(FileResult(FileStatus.SUCCESS, Extracted(type="file")))
        spec = find_extractor(member.spooled)
        if spec is not None and spec.unpack is not None and budget[0].members <= 0:
            budget[1].append(prefix + member.name)  # not opened: the tree's budget is spent
        if spec is None or spec.unpack is None or depth >= MAX_DEPTH or budget[0].members <= 0:
            return done(
                self._as_file(self._ask_child(Extract(member.spooled), doc_type, member.spooled), doc_type)
            )
        try:
            result = self._container(
                member.spooled, doc_type, depth + 1, budget, emit, prefix + member.name + "!/"
            )
        except ContainerBomb as exc:
            raise ContainerBomb(f"{exc} (in {member.name})") from exc
        return done(result)

    # -- the child ---------------------------------------------------------------------------
    def _ask_child(self, request: Request, doc_type: str, path: str) -> Called[Any]:
        """One request's answer (see `_ask_many`)."""
        with contextlib.closing(self._ask_many([(request, doc_type, path)])) as answers:
            return next(answers)

    def _ask_many(self, requests: list[tuple[Request, str, str]]) -> Iterator[Called[Any]]:
        """Send (request, doc_type, path) requests to the child
        in one message and take each answer in turn, with its type's timeout. After a timeout
        or a crash, the requests not answered yet go to a new child."""
        while requests:
            try:
                conn = self._ensure_child()
            except (EOFError, OSError, TimeoutError) as exc:
                log.warning("Extraction child did not start for %s: %s", requests[0][2], exc)
                self._kill()
                requests = requests[1:]
                yield Called(error=START_MESSAGE)
                continue
            answered = 0
            try:
                conn.send([request for request, _type, _path in requests])
                for _request, doc_type, path in requests:
                    answered += 1  # taken, whatever it is (or the child is gone)
                    result = self._answer(conn, doc_type, path)
                    yield result
                    if self._conn is not conn:
                        break
            except (EOFError, OSError):  # the send found the child dead
                log.warning("Extraction child died on %s", requests[0][2])
                self._kill()
                answered = 1
                yield Called(error=CRASH_MESSAGE)
            finally:
                if self._conn is conn and answered < len(requests):
                    self._kill()  # left early: its other answers must not reach the next request
            requests = requests[answered:]

    def _answer(self, conn: Any, doc_type: str, path: str) -> Called[Any]:
        """The child's next answer, within the type's timeout (the child is killed after it)."""
        timeout = self.settings.timeout_for(doc_type)
        try:
            if not self._wait(conn, timeout):
                log.warning("Extraction of %s timed out after %s s; child killed", path, timeout)
                self._kill()
                return Called(error=f"{TIMEOUT_MESSAGE} {_format_seconds(timeout)} s", seconds=timeout)
            answer: Answer = conn.recv()
        except (EOFError, OSError):
            log.warning("Extraction child died on %s", path)
            self._kill()
            return Called(error=CRASH_MESSAGE)
        if answer.kind == Reply.BOMB:
            raise ContainerBomb(answer.payload)
        if answer.kind == Reply.FATAL:
            self._kill()
        if answer.kind == Reply.OK:
            return Called(answer.payload, seconds=answer.seconds)
        return Called(error=answer.payload, seconds=answer.seconds)

    @staticmethod
    def _as_file(called: Called[Extracted], doc_type: str) -> FileResult:
        """A file's result from the child's answer to its Extract (or a failed Unpack)."""
        if called.ok:
            return FileResult(FileStatus.SUCCESS, called.value, seconds=called.seconds)
        return FileResult(FileStatus.FAILED, Extracted(type=doc_type), called.error, seconds=called.seconds)

    def _wait(self, conn: Any, timeout: float) -> bool:
        """Whether an answer came within `timeout`; raises Interrupted (child killed) when
        `interrupt` says stop meanwhile."""
        if self.interrupt is None:
            return conn.poll(timeout)
        deadline = time.monotonic() + timeout
        while not conn.poll(max(0.0, min(INTERRUPT_POLL, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return False
            if self.interrupt():
                self._kill()
                raise Interrupted
        return True

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
            name="trawl-extractor",
            daemon=True,
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
