"""Scan requests and scan state of a source: what the API, the UI and the CLI ask of scans."""

from __future__ import annotations

import time

from flask import current_app

from webapp import jobs, keys
from webapp.exceptions import Conflict, InvalidInput
from webapp.extensions import db
from webapp.indexing import diskfull, live, thumbstore
from webapp.indexing.records import delete_records
from webapp.indexing.runstats import FileStatus, RunState, RunStats, SourceState
from webapp.indexing.scanner import doc_id, root_problem
from webapp.indexing.state import ScanLock, dead_run, scan_lock
from webapp.models import IndexedFile, Source, get_source
from webapp.runtime import get_meaning, get_redis, get_search


def scan_state(source_id: str) -> SourceState:
    """idle, queued or indexing."""
    return scan_lock(source_id).state()


def live_stats(source_id: str) -> RunStats | None:
    """Stats of the current run, or of the latest one while Redis still has them.

    A run whose worker died shows as interrupted once its lock has expired (only shown: the
    lock's next acquisition or the scheduler's loop records it; a read never writes).
    """
    dead = dead_run(source_id)
    return dead[1] if dead else scan_lock(source_id).read_stats()


def request_scan(source_id: str, full: bool = False, wait: int = 0) -> dict:
    """Queue a scan; 409 while one is queued or running; wait up to `wait` seconds for the end."""
    source = get_source(source_id)
    if full:
        problem = root_problem(source.root_path, current_app.config["ALLOWED_ROOTS"])
        if problem:
            raise InvalidInput(f"root_path: {problem}")
    lock = scan_lock(source_id)
    run_id = lock.acquire_after_live_update("", full)
    if run_id is None:
        raise Conflict(f"Source '{source_id}' is already {lock.state()}")
    job_id = f"scan-{source_id}-{run_id[:12]}"
    lock.set_job(run_id, job_id)
    jobs.enqueue_scan(source_id, run_id, full, job_id)
    stats = _wait(lock, wait) if wait else (lock.read_stats() or RunStats(RunState.QUEUED))
    kind = "Full rebuild" if full else "Scan"
    return {"message": f"{kind} of '{source_id}' queued", "job_id": job_id, "stats": stats}


def request_live_update(source_id: str) -> str | None:
    """Queue a live update of the source's changed paths; None while the source is busy
    (the paths wait in Redis and the watcher asks again), or while an update that failed for
    want of space waits for its next try."""
    if diskfull.waiting_for_space(get_redis(), source_id):
        return None
    lock = scan_lock(source_id)
    run_id = lock.acquire_queued("", False, live=True)
    if run_id is None:
        return None
    job_id = f"live-{source_id}-{run_id[:12]}"
    lock.set_job(run_id, job_id)
    jobs.enqueue_live(source_id, run_id, job_id)
    return job_id


def last_live_update(source_id: str) -> RunStats | None:
    """The stats of the current or latest live update, while Redis has them."""
    return live.read_stats(get_redis(), source_id)


def watch_state(source: Source) -> str:
    """watching, polling, off, starting, or `error: <message>` (what the running watcher
    reports; `starting` until it has set up the source's watches)."""
    if not source.watch:
        return "off"
    conn = get_redis()
    if not conn.exists(keys.watcher_alive()):
        return "error: the watcher is not running"
    state = conn.hget(keys.watch_states(), source.id)
    return state.decode() if state else "starting"  # the watcher has not reached it yet


def sources_changed() -> None:
    """Tell the watcher to re-read the sources (one was added, changed or removed)."""
    get_redis().incr(keys.sources_version())


def _wait(lock: ScanLock, seconds: int) -> RunStats:
    deadline = time.monotonic() + seconds
    while True:
        stats = lock.read_stats() or RunStats(RunState.QUEUED)
        if stats.final or time.monotonic() >= deadline:
            return stats
        time.sleep(0.2)


def clear_stale(source_id: str) -> int:
    """Delete the failed records and their documents so the next scan retries them."""
    source = get_source(source_id)
    if scan_state(source.id) != SourceState.IDLE:
        raise Conflict(f"Source '{source_id}' is busy; try again when the scan has finished")
    paths = [
        p
        for (p,) in db.session.query(IndexedFile.path).filter_by(
            source_id=source.id, status=FileStatus.FAILED
        )
    ]
    if paths:
        ids = [doc_id(source.id, p) for p in paths]
        get_search().delete_ids(ids)
        get_meaning().delete_ids(ids)
        thumbstore.remove(current_app.config["DATA_DIR"], ids)
        delete_records(source.id, paths)
    return len(paths)


def cancel_scan(source_id: str) -> None:
    """Stop a queued or running scan of the source and forget its state."""
    lock = scan_lock(source_id)
    lock.cancel()
    lock.forget()
    live.forget(get_redis(), source_id)
