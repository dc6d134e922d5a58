"""The history of ended scans (the status page's Jobs): one row per run, the newest kept per source."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, select

from webapp.extensions import db
from webapp.indexing.runstats import RunStats
from webapp.models import RunRecord, utcnow

RUNS_KEPT = 20  # ended runs kept per source; older ones are deleted as new ones end


def _parse(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def record_run(source_id: str, stats: RunStats) -> None:
    """Add an ended run to the session (the caller commits) and drop the source's oldest."""
    kept = stats.to_dict()
    kept.pop("errors", None)  # the failed files are on their records; the count stays
    db.session.add(
        RunRecord(
            source_id=source_id,
            state=str(stats.state),
            started_at=_parse(stats.started_at),
            finished_at=_parse(stats.finished_at) or utcnow(),
            stats=kept,
        )
    )
    db.session.flush()
    newest = (
        select(RunRecord.id)
        .where(RunRecord.source_id == source_id)
        .order_by(RunRecord.finished_at.desc(), RunRecord.id.desc())
        .limit(RUNS_KEPT)
    )
    db.session.execute(
        delete(RunRecord)
        .where(RunRecord.source_id == source_id, RunRecord.id.not_in(newest.scalar_subquery()))
        .execution_options(synchronize_session=False)
    )
