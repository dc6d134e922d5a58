"""One scan of a source: walk, compare with the records, extract what changed, write index, records.

The coordinator (the scan job) is the only writer of a run: it writes documents to the search
backend first and records second, so a worker that dies between the two leaves documents that the
next scan overwrites (same id), never records without documents. Extraction fans out: the
coordinator pushes batches of files to a Redis list that helper jobs on other workers drain too,
and their results come back through another list.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

import redis
from flask import Flask
from sqlalchemy import or_, select

from webapp import keys
from webapp.extensions import db
from webapp.indexing import copies, diskfull, live, thumbstore
from webapp.indexing.batch import Batch, BatchResult, extract_batch
from webapp.indexing.globs import PatternSet
from webapp.indexing.healing import retry_paths
from webapp.indexing.history import record_run
from webapp.indexing.records import delete_records, member_paths, upsert_records
from webapp.indexing.runstats import FileStatus, Progress, RunState, RunStats
from webapp.indexing.scanner import (
    Changes,
    FileStat,
    covering,
    diff,
    doc_id,
    root_problem,
    walk,
    walk_paths,
)
from webapp.indexing.state import Heartbeat, scan_lock, stamp, writer_lock
from webapp.memtune import release_freed
from webapp.metrics import scan_files, scan_runs
from webapp.models import IndexedFile, Source, utcnow
from webapp.runtime import get_meaning, get_redis, get_search

log = logging.getLogger(__name__)
RESULT_WAIT = 1.0  # seconds the coordinator blocks on helpers' results before looking around
INFLIGHT_TTL = 120  # a helper batch not refreshed for this long is handed out again
ALIVE_EVERY = 1.0  # seconds between a helper's "still working on batch n" marks
REDIS_RETRY_MAX = 5.0  # longest pause of a helper between two tries to reach a lost Redis
# Results of several batches are written together: a commit has a cost of its own (a segment,
# merges to wait for), so one commit per WRITE_BATCHES batches (5000 files by default): on small
# files 3,300 documents a commit took 16% less CPU per document than 1,000 (performance.md).
# Writes stay in the coordinator's own thread: an extraction child forked while the writer is
# held would inherit the index's lock file and keep every later writer out.
WRITE_BATCHES = 25
WRITE_SECONDS = 5.0  # ... but never hold extracted results longer than this
WRITE_MAX_CHARS = 8_000_000  # ... nor more extracted text than this (the writer's memory)
PUSH_BATCHES = 100  # batches per RPUSH when a run hands out its work
RECORD_CHUNK = 100  # paths per query when a live update loads the records it may touch


class ScanRun:
    """The coordinator of one run of one source.

    With `paths` it is a live update: an incremental run limited to those files and folders
    (the same walk rules, diff, extraction and writes as a scan); its stats are kept apart
    from the scans' (`live.write_stats`) and it leaves the source's `last_run` alone.
    """

    def __init__(
        self,
        app: Flask,
        source_id: str,
        run_id: str,
        full: bool,
        start_helpers: Callable[[int], None] | None = None,
        paths: list[str] | None = None,
    ):
        self.app = app
        self.source_id = source_id
        self.run_id = run_id
        self.full = full
        self.paths = paths
        # asks idle workers to help with n batches: queueing jobs is the job layer's business
        self.start_helpers = start_helpers or (lambda n_batches: None)
        self.redis = get_redis(app)
        self.lock = scan_lock(source_id, app)
        self.lists = keys.run_lists(run_id)
        self.stats = RunStats(RunState.INDEXING, started_at=stamp())
        self._last_publish = 0.0
        self._buffer: list[BatchResult] = []  # batch results not yet written
        self._buffer_since = 0.0
        self._buffer_chars = 0

    # -- stats -------------------------------------------------------------------------------
    def error(self, path: str, message: str) -> None:
        """Count an error of the walk or of a file (the stats keep the first ones)."""
        self.stats.add_error(path, message)

    def publish(self, force: bool = False) -> None:
        """Write the live stats to Redis (at most a few times a second)."""
        now = time.monotonic()
        if force or now - self._last_publish > 0.3:
            if self.paths is None:
                self.lock.write_stats(self.stats)
            else:
                live.write_stats(self.redis, self.source_id, self.stats)
            self._last_publish = now

    # -- run ---------------------------------------------------------------------------------
    def run(self) -> RunStats:
        """Do the whole scan; returns the final stats."""
        if not self.lock.start(self.run_id):
            log.info("Scan %s of %s no longer owns the source; skipped", self.run_id, self.source_id)
            return self.stats
        self.publish(force=True)
        started = time.monotonic()
        try:
            with Heartbeat(self.lock, self.run_id) as beat:
                self._scan(beat)
        except Exception as exc:
            self._finish(RunState.FAILED, f"Scan failed: {exc}")
            self._retry_for_space(exc)
            raise
        else:
            self._retry_for_space(None)
        finally:
            self.lock.release(self.run_id)
            self.redis.delete(*self.lists.values())
            # the final stats appear only once the source is free: whoever sees "finished"
            # (a ?wait= request, the UI) may start the next scan at once
            self.publish(force=True)
            self._summarize(time.monotonic() - started)
        return self.stats

    def _retry_for_space(self, exc: Exception | None) -> None:
        """A run that failed for want of space is tried again by itself, after a pause; any
        other end settles an earlier such failure (diskfull.retry_later, settled)."""
        if exc is not None and diskfull.no_space(exc):
            diskfull.retry_later(self.redis, self.source_id, scan=self.paths is None)
        else:
            diskfull.settled(self.redis, self.source_id, scan=self.paths is None)

    def _summarize(self, seconds: float) -> None:
        """One log line and the run counter for the run that just ended."""
        s = self.stats
        scan_runs.labels(self.source_id, str(s.state)).inc()
        log.info(
            "Scan of %s %s in %.1f s: %d files seen (%.0f files/s); %d new, %d modified, "
            "%d unchanged, %d deleted; %d indexed, %d failed, %d skipped",
            self.source_id,
            s.state,
            seconds,
            s.total_scanned,
            s.total_scanned / max(seconds, 0.001),
            s.new_files,
            s.modified_files,
            s.unchanged_files,
            s.deleted_files,
            s.successful,
            s.failed,
            s.skipped,
        )

    def _scan(self, beat: Heartbeat) -> None:
        source = db.session.get(Source, self.source_id)
        if source is None:
            self.stats.state = RunState.CANCELLED
            return
        problem = root_problem(source.root_path, self.app.config["ALLOWED_ROOTS"])
        if problem:
            self._finish(RunState.FAILED, problem)  # nothing is deleted when the root is missing
            return
        self.source = {"id": source.id, "name": source.name}
        unclean = not source.last_run or source.last_run.get("state") != RunState.FINISHED
        patterns = PatternSet(source.include_patterns, source.exclude_patterns)
        scope = self._scope(source.root_path)
        records = self._records(scope)
        disk = (
            walk(source.root_path, patterns, self.error)
            if scope is None
            else walk_paths(source.root_path, scope, patterns, self.error)
        )
        # the walk streams into the diff, which consumes the records: no list of every file
        changes = diff(disk, records, full=self.full, retry=retry_paths(self.source_id))
        self._count(changes)
        if changes.deleted:
            gone = changes.deleted + [p for p, _ in member_paths(self.source_id, changes.deleted)]
            ids = [doc_id(self.source_id, p) for p in gone]
            with writer_lock(self.source_id, self.app):
                planned = copies.plan(self.source_id, gone, {})  # a copy left becomes primary
                # vectors first: search and records then go together, so what search no
                # longer finds is not still counted by the source's status
                get_meaning(self.app).delete_ids(ids)  # meaning
                get_search(self.app).delete_ids(ids)
                delete_records(self.source_id, gone)
                copies.apply(self.app, self.source_id, planned)
            thumbstore.remove(self.app.config["DATA_DIR"], ids)
        if (unclean and scope is None) or self.full:
            self._remove_orphans()
        self._extract_all(changes.to_index, beat)
        self._finish(RunState.CANCELLED if self._stopped(beat) else RunState.FINISHED)

    def _scope(self, root: str) -> list[str] | None:
        """The paths a live update looks at (None: the whole source, as a scan does)."""
        if self.paths is None:
            return None
        top = os.path.abspath(root)
        scope = covering(p for p in self.paths if p == top or p.startswith(top + "/"))
        if top in scope or len(scope) > self.app.config["LIVE_MAX_PATHS"]:
            return None  # the whole source: exactly an incremental scan
        return scope

    def _records(self, scope: list[str] | None) -> dict[str, tuple[int, int]]:
        """{path: (size, mtime_ns)} of the source's records (in `scope` and below only)."""
        query = select(IndexedFile.path, IndexedFile.size_bytes, IndexedFile.mtime_ns).where(
            IndexedFile.source_id == self.source_id, IndexedFile.container.is_(None)
        )  # members go with their container
        if scope is None:
            return {p: (size, mtime) for p, size, mtime in db.session.execute(query)}
        records: dict[str, tuple[int, int]] = {}
        for i in range(0, len(scope), RECORD_CHUNK):
            chunk = scope[i : i + RECORD_CHUNK]
            near = or_(
                IndexedFile.path.in_(chunk),
                *(IndexedFile.path.startswith(p.rstrip("/") + "/", autoescape=True) for p in chunk),
            )
            records.update({p: (size, mtime) for p, size, mtime in db.session.execute(query.where(near))})
        return records

    def _count(self, changes: Changes) -> None:
        s = self.stats
        s.total_scanned = changes.scanned
        s.new_files, s.modified_files = len(changes.new), len(changes.modified)
        s.unchanged_files, s.deleted_files = changes.unchanged, len(changes.deleted)
        s.progress = Progress(0, len(changes.to_index))
        scan_files.labels(self.source_id, "unchanged").inc(changes.unchanged)
        scan_files.labels(self.source_id, "deleted").inc(len(changes.deleted))
        self.publish(force=True)

    def _remove_orphans(self) -> None:
        """Delete documents and thumbnails of this source that have no record (left by a crash
        or a cancelled run); this run's own extraction has not started yet."""
        known = {
            doc_id(self.source_id, p)
            for (p,) in db.session.execute(
                select(IndexedFile.path).where(IndexedFile.source_id == self.source_id)
            )
        }
        search = get_search(self.app)
        orphans = search.ids(self.source_id) - known
        if orphans:
            log.info("Removing %d orphan documents of %s", len(orphans), self.source_id)
            get_meaning(self.app).delete_ids(sorted(orphans))  # meaning
            search.delete_ids(sorted(orphans))
        thumbstore.prune(self.app.config["DATA_DIR"], self.source_id, known)

    def _stopped(self, beat: Heartbeat) -> bool:
        return beat.lost or self.lock.cancelled(self.run_id)

    # -- fan-out -----------------------------------------------------------------------------
    def _extract_all(self, files: list[FileStat], beat: Heartbeat) -> None:
        size = self.app.config["SCAN_BATCH_SIZE"]
        n_batches = -(-len(files) // size)
        if not n_batches:
            return

        def payload(n: int) -> str:  # built when pushed (again), never all held at once
            chunk = files[n * size : (n + 1) * size]
            return Batch(n, [(f.path, f.size, f.mtime_ns) for f in chunk]).to_json()

        for first in range(0, n_batches, PUSH_BATCHES):
            self.redis.rpush(
                self.lists["todo"], *map(payload, range(first, min(first + PUSH_BATCHES, n_batches)))
            )
        self.redis.expire(self.lists["todo"], keys.RUN_LISTS_TTL)
        self.start_helpers(n_batches)
        pending = set(range(n_batches))
        while pending and not self._stopped(beat):
            if self._drain_results(pending):
                continue  # helpers' results were waiting: the writing is behind, so write first
            raw = self.redis.lpop(self.lists["todo"])
            if raw is not None:
                batch = Batch.from_json(raw)
                self._write(
                    extract_batch(
                        self.app, self.source, batch, on_partial=lambda part: self._write(part, pending)
                    ),
                    pending,
                )
                continue
            self._wait_for_helpers(pending, payload)
        self._flush()  # what arrived before a stop is still written (unless cancelled)

    def _drain_results(self, pending: set[int]) -> int:
        """Write the helpers' results that are waiting; how many there were."""
        taken = 0
        while True:
            raw = self.redis.lpop(self.lists["results"])
            if raw is None:
                return taken
            self._write(BatchResult.from_json(raw), pending)
            taken += 1

    def _wait_for_helpers(self, pending: set[int], payload: Callable[[int], str]) -> None:
        """Block briefly on results; hand out again any batch whose helper went silent."""
        item = self.redis.blpop([self.lists["results"]], timeout=RESULT_WAIT)
        if item is not None:
            self._write(BatchResult.from_json(item[1]), pending)
            return
        alive = {int(n) for n in self.redis.hkeys(self.lists["inflight"]) if self._inflight_fresh(n)}
        for n in sorted(pending - alive):
            log.warning("Batch %d of run %s was lost by its worker; extracting it again", n, self.run_id)
            self.redis.hdel(self.lists["inflight"], n)
            self.redis.rpush(self.lists["todo"], payload(n))

    def _inflight_fresh(self, n: bytes) -> bool:
        seen = self.redis.hget(self.lists["inflight"], n)
        return seen is not None and time.time() - float(seen) < INFLIGHT_TTL

    def _write(self, result: BatchResult, pending: set[int]) -> None:
        """Take a batch's results; they are written (docs, then records) with the next flush."""
        if result.n not in pending:
            return  # a batch handed out twice: the first result won
        if not result.partial:  # a partial result: more of this batch is coming
            pending.discard(result.n)
        self._buffer.append(result)
        self._buffer_chars += result.size()
        if not self._buffer_since:
            self._buffer_since = time.monotonic()
        self._count_batch(result)
        if (
            not pending
            or len(self._buffer) >= WRITE_BATCHES
            or self._buffer_chars >= WRITE_MAX_CHARS
            or time.monotonic() - self._buffer_since >= WRITE_SECONDS
        ):
            self._flush()

    def _flush(self) -> None:
        """Documents first (one commit), then records (one statement); nothing when cancelled."""
        buffer, self._buffer = self._buffer, []
        self._buffer_since, self._buffer_chars = 0.0, 0
        if not buffer or self.lock.cancelled(self.run_id):
            return
        with writer_lock(self.source_id, self.app):  # the OCR phase writes between flushes
            self._drop_members([p for result in buffer for p in result.reset])
            records = [r for result in buffer for r in result.records]
            docs = [d for result in buffer for d in result.docs]
            # identical texts: the documents written carry their copy flag (indexing/copies.py)
            planned = copies.plan(self.source_id, [], {r["path"]: r.get("text_hash") for r in records})
            for doc in docs:
                doc["copy"] = doc["path"] in planned.hidden
            # stored on the coordinator's host, where the web server reads them, before the
            # documents are written: a search that finds a document finds its thumbnail
            self._save_thumbnails(buffer)
            if docs:
                with diskfull.guard(self.redis, diskfull.INDEX):
                    get_search(self.app).upsert(docs)
            with diskfull.guard(self.redis, diskfull.DATABASE):
                upsert_records(self.source_id, records)
            copies.apply(self.app, self.source_id, planned)
            # a container that failed (a bomb found late) keeps none of the members sent before
            self._drop_members(
                [r["path"] for r in records if r["container"] is None and r["status"] == FileStatus.FAILED]
            )
        del buffer
        release_freed()  # the texts just written, and the writer's heap, go back to the OS

    def _save_thumbnails(self, buffer: list[BatchResult]) -> None:
        """Store the buffer's thumbnails; on a full disk the documents are still written,
        without the pictures left (health says the thumbnails' disk is full)."""
        thumbnails = [item for result in buffer for item in result.thumbnails.items()]
        if not thumbnails:
            return
        try:
            with diskfull.guard(self.redis, diskfull.THUMBNAILS):
                for ident, thumbnail in thumbnails:
                    thumbstore.save(self.app.config["DATA_DIR"], ident, thumbnail)
        except diskfull.DiskFull:
            pass  # recorded by guard(); a thumbnail is not worth failing the scan for

    def _drop_members(self, containers: list[str]) -> None:
        """Remove every recorded member of these files (documents, then records)."""
        stale = [p for p, _ in member_paths(self.source_id, containers)]
        if stale:
            ids = [doc_id(self.source_id, p) for p in stale]
            planned = copies.plan(self.source_id, stale, {})
            get_meaning(self.app).delete_ids(ids)  # meaning
            get_search(self.app).delete_ids(ids)
            delete_records(self.source_id, stale)
            copies.apply(self.app, self.source_id, planned)

    def _count_batch(self, result: BatchResult) -> None:
        s = self.stats
        for rec in result.records:
            status = rec["status"]
            s.count_file(status)
            scan_files.labels(self.source_id, str(status)).inc()
            if rec["error_message"] and status == FileStatus.FAILED:
                self.error(rec["path"], rec["error_message"])
        s.progress.done += sum(1 for r in result.records if r.get("container") is None)
        if result.records:
            s.current_file = result.records[-1]["path"]
        self.publish()

    def _finish(self, state: RunState, message: str | None = None) -> None:
        """Persist the final stats on the source (they outlive Redis); run() publishes them."""
        self.stats.state = state
        self.stats.finished_at = stamp()
        self.stats.current_file = None
        if message:
            self.stats.message = message
            if state == RunState.FAILED:
                self.error("", message)
        db.session.rollback()
        if self.paths is not None:
            return  # a live update: the source's last_run stays the last scan's
        source = db.session.get(Source, self.source_id)
        if source is not None:
            source.last_run = self.stats.to_dict()
            if state == RunState.FINISHED:
                source.last_scan_at = utcnow()
            try:
                with diskfull.guard(self.redis, diskfull.DATABASE):
                    record_run(self.source_id, self.stats)
                    db.session.commit()
            except diskfull.DiskFull:  # the run's end stays in Redis (run() publishes it)
                db.session.rollback()


def help_extract(app: Flask, run_id: str, source_id: str) -> int:
    """A helper job: take a run's batches until none are left; results go to the coordinator.

    A helper on another host may lose Redis for a while (a network cut): it keeps extracting,
    and takes and sends batches again once Redis answers. It gives up after INFLIGHT_TTL, when
    the coordinator has handed its batch to another worker anyway.
    """
    r = get_redis(app)
    lists = keys.run_lists(run_id)
    source = db.session.get(Source, source_id)
    if source is None:
        return 0
    info = {"id": source.id, "name": source.name}
    done = 0
    while True:
        raw = _patiently(r.lpop, lists["todo"])
        if raw is None:
            return done
        batch = Batch.from_json(raw)
        _patiently(r.expire, lists["inflight"], keys.RUN_LISTS_TTL)

        beat = {"at": 0.0}

        def alive(n: int = batch.n, beat: dict = beat) -> None:
            now = time.time()
            if now - beat["at"] >= ALIVE_EVERY:  # one Redis round trip a second, not per file
                beat["at"] = now
                try:
                    r.hset(lists["inflight"], n, now)
                except (redis.ConnectionError, redis.TimeoutError):
                    pass  # a mark missed: the extraction goes on, the result will be sent

        def send(result: BatchResult) -> None:
            _patiently(r.rpush, lists["results"], result.to_json())
            _patiently(r.expire, lists["results"], keys.RUN_LISTS_TTL)

        alive()  # held from now on: a first file slower than RESULT_WAIT is not handed out again
        send(extract_batch(app, info, batch, on_file=alive, on_partial=send))
        done += 1


def _patiently(command: Callable, *args):
    """A helper's Redis command, tried again while Redis cannot be reached (for INFLIGHT_TTL).

    Each try that fails drops its connection, so the next one opens a new connection at once
    when the network is back (a connection caught in the cut would wait for TCP's backoff).
    A command whose reply was lost may have run: a batch popped without its reply is handed out
    again by the coordinator; a batch's result pushed twice is taken once (the first wins), a
    container's partial result twice is written again under the same document ids.
    """
    deadline = time.monotonic() + INFLIGHT_TTL
    delay, told = 0.25, False
    while True:
        try:
            result = command(*args)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if time.monotonic() + delay > deadline:
                raise
            if not told:
                log.warning("Redis unreachable (%s); trying again until %d s have passed", exc, INFLIGHT_TTL)
                told = True
            time.sleep(delay)
            delay = min(delay * 2, REDIS_RETRY_MAX)
            continue
        if told:
            log.info("Redis answers again")
        return result
