"""Health of the backing services and the per-source indexing status."""

from __future__ import annotations

from flask import current_app
from rq import Worker
from rq.registry import FailedJobRegistry, StartedJobRegistry
from sqlalchemy import func, text

from webapp.config import VERSION
from webapp.extensions import db
from webapp.indexing.runstats import FileStatus, RunStats, SourceState
from webapp.models import IndexedFile, Source, iso
from webapp.runtime import get_queue, get_redis, get_search
from webapp.services import auth, scans
from webapp.services.sources import counts, get

FAILED_FILES = 50


def _check(probe) -> str:
    try:
        result = probe()
        return "ok" if result in (None, True, "ok") else str(result)
    except Exception as exc:  # any failure of a component is reported, never raised
        return f"error: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"


def health() -> tuple[dict, int]:
    """Database, Redis and search engine checks; 503 when any is not ok."""
    components = {
        "database": _check(lambda: db.session.execute(text("SELECT 1")) and None),
        "redis": _check(lambda: get_redis().ping()),
        "search": _check(lambda: get_search().health()),
    }
    ok = all(v == "ok" for v in components.values())
    setup_required = None
    if components["database"] == "ok":
        setup_required = auth.setup_required()
    else:
        db.session.rollback()
    body = {"status": "ok" if ok else "degraded", "version": VERSION,
            "setup_required": setup_required, "components": components}
    return body, 200 if ok else 503


def source_status(source: Source, by_status: dict[str, int] | None = None) -> dict:
    """Counts, schedule, latest run and failed files of one source."""
    if by_status is None:
        by_status = counts().get(source.id, {})
    last_indexed = db.session.query(func.max(IndexedFile.indexed_at)).filter_by(
        source_id=source.id).scalar()
    failed = (db.session.query(IndexedFile.path, IndexedFile.error_message)
              .filter_by(source_id=source.id, status=FileStatus.FAILED)
              .order_by(IndexedFile.path).limit(FAILED_FILES))
    state = scans.scan_state(source.id)  # first: a lock expiring between the two reads is then
    live = scans.live_stats(source.id)  # seen as settled (interrupted), never "idle but indexing"
    kept = RunStats.from_dict(source.last_run) if source.last_run else None
    return {
        "source_id": source.id, "source_name": source.name, "state": state,
        "total_files": sum(by_status.values()),
        "successful": by_status.get(FileStatus.SUCCESS, 0),
        "failed": by_status.get(FileStatus.FAILED, 0), "skipped": by_status.get(FileStatus.SKIPPED, 0),
        "last_indexed_at": iso(last_indexed), "last_scan_at": iso(source.last_scan_at),
        "next_scan_at": iso(source.next_scan_at),
        "last_run": (live if state != SourceState.IDLE else kept or live),
        "watch_state": scans.watch_state(source),
        "last_live_update": scans.last_live_update(source.id),
        "failed_files": [{"path": p, "error": e or ""} for p, e in failed],
    }


def one(source_id: str) -> dict:
    """GET /api/status/<id>."""
    return source_status(get(source_id))


def overall() -> dict:
    """GET /api/status."""
    by_source = counts()
    queue = get_queue()
    conn = get_redis()
    return {
        "version": VERSION,
        "search_backend": current_app.config["SEARCH_BACKEND"],
        "documents": get_search().count(),
        "sources": [source_status(s, by_source.get(s.id, {}))
                    for s in db.session.query(Source).order_by(Source.name, Source.id)],
        "queue": {"queued": queue.count,
                  "started": StartedJobRegistry(queue=queue).count,
                  "failed": FailedJobRegistry(queue=queue).count,
                  "workers": Worker.count(connection=conn, queue=queue)},
    }
