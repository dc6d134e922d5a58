"""RQ jobs (they take ids, never ORM objects) and the helpers that enqueue and schedule them."""

from __future__ import annotations

import logging
import time

from flask import Flask, current_app, has_app_context
from rq import get_current_job
from rq_scheduler import Scheduler

from webapp.exceptions import Conflict, InvalidInput
from webapp.extensions import db
from webapp.indexing.scanner import doc_id
from webapp.indexing.state import ScanLock, new_stats
from webapp.models import IndexedFile, Source, utcnow
from webapp.runtime import get_queue, get_redis, get_search

log = logging.getLogger(__name__)
_bound_app: Flask | None = None
FINAL_STATES = {"finished", "failed", "cancelled"}


# -- app binding for job functions ------------------------------------------------------------

def bind_app(app: Flask) -> None:
    """Give job functions the app of this worker process (worker.py and tests call this)."""
    global _bound_app
    _bound_app = app


def _app() -> Flask:
    if has_app_context():
        return current_app._get_current_object()
    global _bound_app
    if _bound_app is None:
        from webapp import create_app

        _bound_app = create_app()
    return _bound_app


def _lock(source_id: str, app: Flask | None = None) -> ScanLock:
    app = app or current_app
    return ScanLock(get_redis(app), source_id, app.config["SCAN_LOCK_SECONDS"])


# -- jobs ---------------------------------------------------------------------------------------

def scan_job(source_id: str, run_id: str, full: bool = False) -> dict:
    """Coordinate one scan of a source (the queued run identified by run_id)."""
    from webapp.indexing.pipeline import ScanRun

    app = _app()
    with app.app_context():
        return ScanRun(app, source_id, run_id, full).run()


def extract_batches(run_id: str, source_id: str) -> int:
    """Help a running scan by extracting its batches on this worker."""
    from webapp.indexing.pipeline import help_extract

    app = _app()
    with app.app_context():
        return help_extract(app, run_id, source_id)


def scheduled_scan(source_id: str) -> str:
    """A due scheduled run: book the next one, then scan unless the source is busy."""
    app = _app()
    with app.app_context():
        source = db.session.get(Source, source_id)
        if source is None or not source.scan_schedule:
            return "no schedule"
        from webapp.services.sources import next_scan

        source.next_scan_at = next_scan(source.scan_schedule)
        db.session.commit()
        schedule_source(source_id, source.next_scan_at)
        job = get_current_job()
        run_id = _lock(source_id).acquire_queued(job.id if job else "", full=False)
        if run_id is None:
            log.info("Scheduled scan of %s skipped: the source is busy", source_id)
            return "skipped: busy"
        scan_job(source_id, run_id, False)
        return "scanned"


def rename_documents(source_id: str) -> int:
    """Write the source's current name into its documents (after a rename)."""
    app = _app()
    with app.app_context():
        source = db.session.get(Source, source_id)
        if source is None:
            return 0
        get_search(app).rename_source(source.id, source.name)
        return 1


# -- requests from the API, UI and CLI ----------------------------------------------------------

def enqueue_rename(source_id: str) -> None:
    """Queue the rewrite of source_name in the source's documents."""
    get_queue().enqueue(rename_documents, source_id, job_timeout=3600, result_ttl=600)


def scan_state(source_id: str) -> str:
    """idle, queued or indexing."""
    return _lock(source_id).state()


def live_stats(source_id: str) -> dict | None:
    """Stats of the current run, or of the latest one while Redis still has them."""
    return _lock(source_id).read_stats()


def request_scan(source_id: str, full: bool = False, wait: int = 0) -> dict:
    """Queue a scan; 409 while one is queued or running; wait up to `wait` seconds for the end."""
    from webapp.services.sources import get, root_problem

    source = get(source_id)
    if full:
        problem = root_problem(source.root_path)
        if problem:
            raise InvalidInput(f"root_path: {problem}")
    lock = _lock(source_id)
    run_id = lock.acquire_queued("", full)
    if run_id is None:
        raise Conflict(f"Source '{source_id}' is already {lock.state()}")
    job_id = f"scan-{source_id}-{run_id[:12]}"
    lock.set_job(run_id, job_id)
    get_queue().enqueue(scan_job, source_id, run_id, full, job_id=job_id,
                        job_timeout=7 * 24 * 3600, result_ttl=3600, failure_ttl=7 * 24 * 3600)
    stats = _wait(lock, wait) if wait else (lock.read_stats() or new_stats("queued"))
    kind = "Full rebuild" if full else "Scan"
    return {"message": f"{kind} of '{source_id}' queued", "job_id": job_id, "stats": stats}


def _wait(lock: ScanLock, seconds: int) -> dict:
    deadline = time.monotonic() + seconds
    while True:
        stats = lock.read_stats() or new_stats("queued")
        if stats["state"] in FINAL_STATES or time.monotonic() >= deadline:
            return stats
        time.sleep(0.2)


def clear_stale(source_id: str) -> int:
    """Delete the failed records and their documents so the next scan retries them."""
    from webapp.services.sources import get

    source = get(source_id)
    if scan_state(source.id) != "idle":
        raise Conflict(f"Source '{source_id}' is busy; try again when the scan has finished")
    paths = [p for (p,) in db.session.query(IndexedFile.path)
             .filter_by(source_id=source.id, status="failed")]
    if paths:
        get_search().delete_ids([doc_id(source.id, p) for p in paths])
        from webapp.indexing.pipeline import delete_records

        delete_records(source.id, paths)
    return len(paths)


def cancel_scan(source_id: str) -> None:
    """Stop a queued or running scan of the source and forget its state."""
    lock = _lock(source_id)
    lock.cancel()
    lock.forget()


# -- schedules (rq-scheduler) -------------------------------------------------------------------

def _scheduler(app: Flask | None = None) -> Scheduler:
    app = app or current_app
    return Scheduler(queue=get_queue(app), connection=get_redis(app))


def _schedule_job_id(source_id: str) -> str:
    return f"schedule-{source_id}"


def schedule_source(source_id: str, when, app: Flask | None = None) -> None:
    """Replace the source's scheduled run with one at `when` (naive UTC), or none."""
    scheduler = _scheduler(app)
    scheduler.cancel(_schedule_job_id(source_id))
    if when is not None:
        scheduler.enqueue_at(when, scheduled_scan, source_id, job_id=_schedule_job_id(source_id),
                             timeout=7 * 24 * 3600, job_result_ttl=3600)


def unschedule(source_id: str) -> None:
    """Remove the source's scheduled run."""
    _scheduler().cancel(_schedule_job_id(source_id))


def rebuild_schedules(app: Flask) -> int:
    """At scheduler start: one scheduled run per scheduled source; a missed run runs once now."""
    with app.app_context():
        scheduler = _scheduler(app)
        for job in scheduler.get_jobs():
            if job.id.startswith("schedule-"):
                scheduler.cancel(job)
        now = utcnow()
        count = 0
        for source in db.session.query(Source).filter(Source.scan_schedule.isnot(None)):
            if source.next_scan_at is None or source.next_scan_at <= now:
                get_queue(app).enqueue(scheduled_scan, source.id, job_timeout=7 * 24 * 3600)
            else:
                schedule_source(source.id, source.next_scan_at, app)
            count += 1
        return count
