"""The status page: health of the backing services, the queue, and every source's files."""

from __future__ import annotations

from flask import g, render_template, request

from webapp import rqdash
from webapp.services import status, ui_support
from webapp.ui.blueprint import bp
from webapp.ui.htmx import is_htmx, render


def _overall() -> tuple[dict | None, str | None]:
    """status.overall(), or why it could not be read (the page still shows the health checks)."""
    try:
        return status.overall(g.user), None
    except Exception as exc:  # a down Redis or search engine must not hide the health table
        return None, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


@bp.get("/status")
def status_page():
    """Health (database, Redis, search, workers), queue counts, per-source counts and failures."""
    health, code = status.health()
    overall, error = _overall()
    return render_template(
        "status.html",
        health=health,
        overall=overall,
        error=error,
        folders=ui_support.folder_problems(g.user),
        rq_dashboard=rqdash.queue_url(),
    ), 200 if code == 200 else 503


@bp.get("/status/progress")
def status_progress():
    """The queue and the sources' phases: the fragment the Status page polls while work runs
    (the whole page without htmx)."""
    if not is_htmx():
        return status_page()
    overall, _error = _overall()
    if overall is None:  # Redis or the engine away for a moment: keep what is shown, poll on
        return "", 204
    return render("status.html", "_status_progress.html", overall=overall)


@bp.get("/sources/<source_id>/failed")
def failed_files(source_id: str):
    """A source's failed files with their messages, grouped by message, 50 a page."""
    try:
        page = int(request.args.get("page", "1"))
    except ValueError:
        page = 1
    return render_template("failed_files.html", info=status.failed_files(source_id, page, g.user))
