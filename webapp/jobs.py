"""RQ jobs (they take ids, never ORM objects) and the helpers that enqueue and schedule them.

A job finds its app through the app context its worker runs in (worker.py, and the tests'
`run_jobs`), and pushes a fresh context of that app for itself.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime
from functools import partial

from flask import Flask, current_app
from rq import get_current_job
from rq_scheduler import Scheduler

from webapp import keys, logs
from webapp import schedule as cron
from webapp.embed_jobs import enqueue_embed, requeue_stalled_embed  # meaning
from webapp.extensions import db
from webapp.indexing import diskfull, live
from webapp.indexing.background import enqueue_once, stalled
from webapp.indexing.ocr_phase import OcrRun, pending_count, pending_sources
from webapp.indexing.pipeline import ScanRun, help_extract
from webapp.indexing.runstats import RunState
from webapp.indexing.state import scan_lock
from webapp.models import Source, utcnow
from webapp.runtime import get_extract_queue, get_queue, get_redis, get_search, worker_count

log = logging.getLogger(__name__)


def _app() -> Flask:
    return current_app._get_current_object()


# -- jobs ---------------------------------------------------------------------------------------


def scan_job(source_id: str, run_id: str, full: bool = False) -> dict:
    """Coordinate one scan of a source (the queued run identified by run_id)."""
    app = _app()
    with app.app_context(), logs.bind(source_id=source_id):
        helpers = partial(enqueue_helpers, run_id, source_id)
        stats = ScanRun(app, source_id, run_id, full, start_helpers=helpers).run()
        enqueue_ocr(source_id)  # the documents are all indexed: now their OCR, at lower priority
        enqueue_embed(source_id)  # meaning: after OCR on the same low-priority queue
        return stats


def ocr_job(source_id: str) -> int:
    """Read a source's documents waiting for OCR for a while; queue the rest behind other jobs."""
    app = _app()
    with app.app_context():
        get_redis(app).delete(keys.ocr_queued(source_id))  # from now on a new job may queue
        run = OcrRun(app, source_id)
        done = run.run()
        if run.ran:  # else the source's running OCR job looks for more work when it ends
            enqueue_ocr(source_id)
            enqueue_embed(source_id)  # meaning: documents whose OCR text is in
        return done


def live_job(source_id: str, run_id: str) -> dict | None:
    """Index the source's changed paths the watcher collected (a live update)."""
    app = _app()
    with app.app_context(), logs.bind(source_id=source_id):
        conn = get_redis(app)
        paths, upto = live.pending(conn, source_id)
        if db.session.get(Source, source_id) is None:
            live.forget(conn, source_id)  # deleted after the watcher handed the paths on
            paths = []
        if not paths:
            scan_lock(source_id).release(run_id)
            return None
        helpers = partial(enqueue_helpers, run_id, source_id)
        run = ScanRun(app, source_id, run_id, False, start_helpers=helpers, paths=paths)
        started = time.monotonic()
        try:
            stats = run.run()
        except Exception as exc:
            if not diskfull.no_space(exc):  # for space, the paths wait for the retry (diskfull.py)
                live.done(conn, source_id, upto)  # a failing path must not come back forever
            raise
        # what the update cost: a polled source is polled less often when it costs more
        conn.set(keys.live_cost(source_id), time.monotonic() - started, ex=keys.DAY)
        if stats.state in (RunState.FINISHED, RunState.FAILED):  # else they are handed out again
            live.done(conn, source_id, upto)
        enqueue_ocr(source_id)  # a scanned page saved into a watched folder is read too
        enqueue_embed(source_id)  # meaning
        return stats.to_dict()


def extract_batches(run_id: str, source_id: str) -> int:
    """Help a running scan by extracting its batches on this worker."""
    app = _app()
    with app.app_context(), logs.bind(source_id=source_id):
        return help_extract(app, run_id, source_id)


def scheduled_scan(source_id: str) -> str:
    """A due scheduled run: book the next one, then scan unless the source is busy."""
    app = _app()
    with app.app_context(), logs.bind(source_id=source_id):
        source = db.session.get(Source, source_id)
        if source is None or not source.scan_schedule:
            return "no schedule"
        source.next_scan_at = cron.next_scan(source.scan_schedule, utcnow(), app.config["SCHEDULE_TIMEZONE"])
        db.session.commit()
        schedule_source(source_id, source.next_scan_at)
        job = get_current_job()
        run_id = scan_lock(source_id).acquire_after_live_update(job.id if job else "", False)
        if run_id is None:
            log.info("Scheduled scan of %s skipped: the source is busy", source_id)
            return "skipped: busy"
        scan_job(source_id, run_id, False)
        return "scanned"


def rename_documents(source_id: str) -> int:
    """Write the source's current name into its documents (after a rename)."""
    app = _app()
    with app.app_context(), logs.bind(source_id=source_id):
        source = db.session.get(Source, source_id)
        if source is None:
            return 0
        get_search(app).rename_source(source.id, source.name)
        return 1


# -- enqueueing ---------------------------------------------------------------------------------


def enqueue_scan(source_id: str, run_id: str, full: bool, job_id: str) -> None:
    """Queue the coordinator of a run whose lock was taken."""
    get_queue().enqueue(
        scan_job,
        source_id,
        run_id,
        full,
        job_id=job_id,
        job_timeout=keys.SCAN_JOB_TIMEOUT,
        result_ttl=keys.SCAN_RESULT_TTL,
        failure_ttl=keys.SCAN_FAILURE_TTL,
    )


def enqueue_live(source_id: str, run_id: str, job_id: str) -> None:
    """Queue a live update ahead of waiting scans: it is small and someone waits for it."""
    get_queue().enqueue(
        live_job,
        source_id,
        run_id,
        job_id=job_id,
        at_front=True,
        job_timeout=keys.LIVE_JOB_TIMEOUT,
        result_ttl=keys.LIVE_RESULT_TTL,
        failure_ttl=keys.SCAN_FAILURE_TTL,
    )


def enqueue_helpers(run_id: str, source_id: str, n_batches: int) -> None:
    """Ask the other idle workers to help a run with its batches (the coordinator is one);
    every worker serves the helpers' queue, extraction-only ones too."""
    queue = get_extract_queue()
    others = max(0, worker_count(queue) - 1)
    for _ in range(min(others, n_batches - 1)):
        queue.enqueue(
            extract_batches,
            run_id,
            source_id,
            job_timeout=keys.HELPER_JOB_TIMEOUT,
            result_ttl=keys.HELPER_RESULT_TTL,
            failure_ttl=keys.HELPER_FAILURE_TTL,
        )


def enqueue_ocr(source_id: str) -> None:
    """Queue an OCR job for the source when documents wait for OCR and none is queued yet."""
    if pending_count(source_id):
        enqueue_once(
            ocr_job,
            source_id,
            keys.ocr_queued(source_id),
            keys.OCR_JOB_TIMEOUT,
            keys.OCR_RESULT_TTL,
            keys.OCR_FAILURE_TTL,
        )


def enqueue_rename(source_id: str) -> None:
    """Queue the rewrite of source_name in the source's documents."""
    get_queue().enqueue(
        rename_documents, source_id, job_timeout=keys.RENAME_JOB_TIMEOUT, result_ttl=keys.RENAME_RESULT_TTL
    )


# -- schedules (rq-scheduler) -------------------------------------------------------------------


def _scheduler(app: Flask | None = None) -> Scheduler:
    app = app or current_app
    return Scheduler(queue=get_queue(app), connection=get_redis(app))


def _schedule_job_id(source_id: str) -> str:
    return f"schedule-{source_id}"


def schedule_source(source_id: str, when: datetime | None, app: Flask | None = None) -> None:
    """Replace the source's scheduled run with one at `when` (naive UTC), or none."""
    scheduler = _scheduler(app)
    scheduler.cancel(_schedule_job_id(source_id))
    if when is not None:
        scheduler.enqueue_at(
            when,
            scheduled_scan,
            source_id,
            job_id=_schedule_job_id(source_id),
            timeout=keys.SCAN_JOB_TIMEOUT,
            job_result_ttl=keys.SCHEDULED_RESULT_TTL,
        )


def unschedule(source_id: str) -> None:
    """Remove the source's scheduled run."""
    _scheduler().cancel(_schedule_job_id(source_id))


def resume_ocr(app: Flask) -> int:
    """At scheduler start: queue OCR for every source whose documents still wait for it (a job
    lost with Redis, or killed with its worker, would otherwise wait for the next scan)."""
    with app.app_context():
        sources = pending_sources()
        for source_id in sources:
            enqueue_ocr(source_id)
        return len(sources)


def requeue_stalled(app: Flask) -> list[str]:
    """The scheduler's sweep: queue OCR and meaning again for every source whose phase has had
    pending work and no job for a minute (whatever ended its last job); the ids queued."""
    with app.app_context():
        again = stalled("ocr", pending_sources(), keys.ocr_running, keys.ocr_queued)
        for source_id in again:
            enqueue_ocr(source_id)
    return [f"ocr:{s}" for s in again] + [f"embed:{s}" for s in requeue_stalled_embed(app)]


def retry_scans_for_space(app: Flask) -> list[str]:
    """The scheduler's sweep: queue again the scans that failed for want of space and whose
    pause is over (a busy source is tried at the next sweep); the sources queued."""
    queued = []
    with app.app_context():
        conn = get_redis(app)
        for source_id in diskfull.scans_due(conn):
            if db.session.get(Source, source_id) is None:
                diskfull.forget(conn, source_id)
                continue
            lock = scan_lock(source_id)
            run_id = lock.acquire_queued("", False)
            if run_id is not None:
                job_id = f"scan-{source_id}-{run_id[:12]}"
                lock.set_job(run_id, job_id)
                enqueue_scan(source_id, run_id, False, job_id)
                queued.append(source_id)
        db.session.remove()
    return queued


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
                get_queue(app).enqueue(scheduled_scan, source.id, job_timeout=keys.SCAN_JOB_TIMEOUT)
            else:
                schedule_source(source.id, source.next_scan_at, app)
            count += 1
        return count
