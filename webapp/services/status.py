"""Health of the backing services and the per-source indexing status."""

from __future__ import annotations

import inspect

from flask import current_app
from rq.job import Job
from rq.queue import Queue
from rq.registry import FailedJobRegistry, StartedJobRegistry
from sqlalchemy import func, text

from webapp import keys
from webapp.config import VERSION
from webapp.extensions import db
from webapp.indexing import diskfull, embed_phase
from webapp.indexing.background import PhaseInfo
from webapp.indexing.ocr import DONE, OK, OcrSettings, availability
from webapp.indexing.ocr_phase import pending_count
from webapp.indexing.runstats import FileStatus, RunState, RunStats, SourceState
from webapp.models import IndexedFile, RunRecord, Source, User, iso
from webapp.runtime import (
    get_extract_queue,
    get_ocr_queue,
    get_queue,
    get_redis,
    get_search,
    worker_count,
)
from webapp.services import auth, meaning, scans
from webapp.services.access import Visible, can_see, source_for, visible_sources
from webapp.services.sources import counts

FAILED_FILES = 50
RECENT_RUNS = 30  # ended scans shown in the Jobs section
FAILED_PAGE = 50  # failed files per page of the failed-files list


def _check(probe) -> str:
    try:
        result = probe()
        return "ok" if result in (None, True, "ok") else str(result)
    except Exception as exc:  # any failure of a component is reported, never raised
        return f"error: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"


def health() -> tuple[dict, int]:
    """Database, Redis, search engine, disk and meaning checks; 503 when degraded."""
    components = {
        "database": _check(lambda: db.session.execute(text("SELECT 1")) and None),
        "redis": _check(lambda: get_redis().ping()),
        "search": _check(lambda: get_search().health()),
        # a write that failed for want of space: `degraded: no space left on device (...)`
        "disk": _check(lambda: diskfull.health(get_redis())),
    }
    ok = all(v == "ok" for v in components.values())
    # OCR that is off or not installed leaves search working: reported, never `degraded`
    components["ocr"] = availability(OcrSettings.from_config(current_app.config))[0]
    components["semantic"] = meaning.health()  # likewise: words work without the model
    if components["database"] == "ok" and components["redis"] == "ok":
        components["semantic"] = _semantic_health(components["semantic"])
    setup_required = None
    if components["database"] == "ok":
        setup_required = auth.setup_required()
    else:
        db.session.rollback()
    # a source whose meaning stopped (a vector file that cannot be read, a full disk) makes
    # health `degraded`, naming it: 503 as the contract says of `degraded` (words still answer)
    degraded = not ok or components["semantic"].startswith("degraded")
    body = {
        "status": "degraded" if degraded else "ok",
        "version": VERSION,
        "setup_required": setup_required,
        "components": components,
    }
    return body, 503 if degraded else 200


def _semantic_health(model: str) -> str:
    """The model's health, or `degraded: <source>: <why>; ...` for sources whose meaning
    stopped on an error."""
    stopped = []
    for source in db.session.query(Source).filter(Source.semantic.is_(True)).order_by(Source.id):
        error = embed_phase.problem(source.id) or PhaseInfo(embed_phase.KIND, source.id).read().get("error")
        if error:
            stopped.append(f"{source.id}: {error}")
    db.session.rollback()
    return f"degraded: {'; '.join(stopped)}" if stopped else model


def ocr_status(source_id: str) -> dict:
    """The source's `ocr` status, in the shape of `semantic`: state, documents done and
    pending, the ETA at the observed rate, the error that stopped it."""
    pending = pending_count(source_id)
    done = (
        db.session.query(func.count())
        .select_from(IndexedFile)
        .filter_by(source_id=source_id, ocr=DONE)
        .scalar()
    )
    phase_info = PhaseInfo("ocr", source_id)
    info = phase_info.read()
    available = availability(OcrSettings.from_config(current_app.config))[0]
    conn = get_redis()
    if available != OK:
        state = available
    elif info.get("error"):
        state = "error"
    elif conn.exists(keys.ocr_running(source_id)) or (pending and conn.exists(keys.ocr_queued(source_id))):
        state = "reading"
    else:
        state = "idle"
    return {
        "state": state,
        "done": done or 0,
        "pending": pending,
        "eta_seconds": phase_info.eta_seconds(pending, info),
        "error": info.get("error"),
    }


def source_status(source: Source, by_status: dict[str, int] | None = None) -> dict:
    """Counts, schedule, latest run and failed files of one source."""
    if by_status is None:
        by_status = counts().get(source.id, {})
    last_indexed = db.session.query(func.max(IndexedFile.indexed_at)).filter_by(source_id=source.id).scalar()
    # ordered by an expression of the path: ordered by the path itself, SQLite (which does not
    # know how rare failures are) read every record of the source through its path key to
    # skip a sort (0.5 s at a million records) instead of the few failed ones through status
    failed = (
        db.session.query(IndexedFile.path, IndexedFile.error_message)
        .filter_by(source_id=source.id, status=FileStatus.FAILED)
        .order_by(func.coalesce(IndexedFile.path, ""))
        .limit(FAILED_FILES)
    )
    state = scans.scan_state(source.id)  # first: a lock expiring between the two reads is then
    live = scans.live_stats(source.id)  # seen as settled (interrupted), never "idle but indexing"
    kept = RunStats.from_dict(source.last_run) if source.last_run else None
    # a dead run is shown interrupted before the scheduler's sweep writes it on the source
    unsettled = (
        live is not None
        and live.state == RunState.INTERRUPTED
        and (kept is None or kept.started_at != live.started_at)
    )
    return {
        "source_id": source.id,
        "source_name": source.name,
        "state": state,
        "total_files": sum(by_status.values()),
        "successful": by_status.get(FileStatus.SUCCESS, 0),
        "failed": by_status.get(FileStatus.FAILED, 0),
        "skipped": by_status.get(FileStatus.SKIPPED, 0),
        "ocr_pending": pending_count(source.id),
        "ocr": ocr_status(source.id),
        "semantic": embed_phase.status(source),
        "last_indexed_at": iso(last_indexed),
        "last_scan_at": iso(source.last_scan_at),
        "next_scan_at": iso(source.next_scan_at),
        "last_run": (live if state != SourceState.IDLE or unsettled else kept or live),
        "watch_state": scans.watch_state(source),
        "last_live_update": scans.last_live_update(source.id),
        "failed_files": [{"path": p, "error": e or ""} for p, e in failed],
    }


def one(source_id: str, user: User | None) -> dict:
    """GET /api/status/<id> (404 for a source the user was not granted)."""
    return source_status(source_for(user, source_id))


def overall(user: User | None) -> dict:
    """GET /api/status: the documents and sources `user` may see (None: everything)."""
    visible = visible_sources(user)
    by_source = counts()
    shown = [s for s in db.session.query(Source).order_by(Source.name, Source.id) if can_see(visible, s.id)]
    return {
        "version": VERSION,
        "search_backend": current_app.config["SEARCH_BACKEND"],
        "documents": (
            get_search().count() if visible is None else sum(get_search().count(s.id) for s in shown)
        ),
        "sources": [source_status(s, by_source.get(s.id, {})) for s in shown],
        "recent_runs": recent_runs(visible),
        "queue": queue_counts(all_queues(), visible),
        # the parts whose last write failed for want of space: {part: {"error", "since"}}
        "disk_full": diskfull.current(get_redis()),
    }


def all_queues() -> list[Queue]:
    """Every queue Trawl's jobs wait in: scans, the background phases (OCR, meaning) and the
    scans' extraction helpers (the RQ dashboard lists each)."""
    return [get_queue(), get_ocr_queue(), get_extract_queue()]


def queue_counts(queues: list[Queue], visible: Visible = None) -> dict:
    """Queued, started and failed jobs of every queue in `queues`, of the sources in `visible`
    (None: every job), and the live workers (shared by everyone). A user's counts leave out
    other sources' jobs: how busy a source they cannot see is, is not theirs to know."""
    counts = {"queued": 0, "started": 0, "failed": 0}
    for queue in queues:
        ids = {
            "queued": queue.get_job_ids(),
            "started": StartedJobRegistry(queue=queue).get_job_ids(),
            "failed": FailedJobRegistry(queue=queue).get_job_ids(),
        }
        for state, job_ids in ids.items():
            if visible is None:
                counts[state] += len(job_ids)
            else:
                jobs = Job.fetch_many(job_ids, connection=queue.connection)
                counts[state] += sum(1 for job in jobs if job is not None and _job_source(job) in visible)
    # every worker serves the helpers' queue (extraction-only ones too)
    return {**counts, "workers": worker_count(get_extract_queue())}


def _job_source(job: Job) -> str | None:
    """The `source_id` argument of a job (every job of jobs.py takes one), or None."""
    try:
        bound = inspect.signature(job.func).bind_partial(*job.args, **job.kwargs)
    except Exception:  # noqa: BLE001 - a job whose function or data cannot be read is no one's
        return None
    return bound.arguments.get("source_id")


def recent_runs(visible: Visible = None, limit: int = RECENT_RUNS) -> list[dict]:
    """The newest ended scans of every visible source (None: all): outcome, times, duration
    and counts."""
    rows = db.session.query(RunRecord, Source.name).join(Source, Source.id == RunRecord.source_id)
    if visible is not None:
        rows = rows.filter(RunRecord.source_id.in_(visible))
    rows = rows.order_by(RunRecord.finished_at.desc(), RunRecord.id.desc()).limit(limit)
    out = []
    for run, name in rows:
        stats = run.stats or {}
        seconds = (
            (run.finished_at - run.started_at).total_seconds() if run.started_at and run.finished_at else None
        )
        out.append(
            {
                "source_id": run.source_id,
                "source_name": name,
                "state": run.state,
                "started_at": iso(run.started_at),
                "finished_at": iso(run.finished_at),
                "duration_seconds": seconds,
                "message": stats.get("message"),
                **{
                    k: stats.get(k, 0)
                    for k in (
                        "total_scanned",
                        "new_files",
                        "modified_files",
                        "deleted_files",
                        "successful",
                        "failed",
                        "skipped",
                    )
                },
            }
        )
    return out


def failed_files(source_id: str, page: int, user: User | None, per_page: int | None = None) -> dict:
    """One page of a source's failed files, ordered by message then path, and every message's
    count (so the page shows them grouped); a page past the end shows the last one. 404 for a
    source `user` may not see."""
    per_page = per_page or FAILED_PAGE
    source = source_for(user, source_id)
    base = db.session.query(IndexedFile).filter_by(source_id=source.id, status=FileStatus.FAILED)
    total = base.count()
    pages = max(1, -(-total // per_page))
    page = min(max(1, page), pages)
    message = func.coalesce(IndexedFile.error_message, "")
    groups = (
        db.session.query(message, func.count())
        .filter(IndexedFile.source_id == source.id, IndexedFile.status == FileStatus.FAILED)
        .group_by(message)
        .order_by(func.count().desc(), message)
    )
    rows = base.order_by(message, IndexedFile.path).offset((page - 1) * per_page).limit(per_page)
    shown: dict[str, list[str]] = {}
    for rec in rows:
        shown.setdefault(rec.error_message or "", []).append(rec.path)
    counts = dict(groups.all())
    return {
        "source_id": source.id,
        "source_name": source.name,
        "total": total,
        "page": page,
        "pages": pages,
        "per_page": per_page,
        "messages": [{"message": m, "count": n} for m, n in counts.items()],
        "groups": [
            {"message": m, "count": counts.get(m, len(paths)), "paths": paths} for m, paths in shown.items()
        ],
    }
