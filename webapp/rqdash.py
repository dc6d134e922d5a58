"""rq-dashboard at /admin/rq, open only to a logged-in admin, with our origin and CSRF checks.

The dashboard's own routes trust whoever reaches them: its actions (delete, requeue, empty,
compact) are plain POSTs, `requeue/<queue>` also answers GET, and bad path values (an unknown
job, registry or instance, a page of 0) raise inside its views. A guard in front of every one
of its requests therefore checks the session, refuses actions that are not a same-origin POST
carrying our CSRF token, and answers bad path values with 404/400 before the views run.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from flask import Flask, abort, current_app, redirect, request, session, url_for
from werkzeug.wrappers import Response

from webapp.services import auth

PREFIX = "/admin/rq"
BLUEPRINT = "rq_dashboard"
CSRF_COOKIE = "_csrf_token"  # the dashboard's script sends this cookie back as X-CSRFToken
CSRF_HEADERS = ("X-CSRFToken", "X-CSRF-Token")
REGISTRIES = {"queued", "failed", "deferred", "started", "finished", "scheduled", "canceled"}
ORDERS = {"asc", "dsc"}
MAX_PER_PAGE = 100
# its views that count or list jobs: the queues are tidied first so the two agree
_COUNTED = {
    f"{BLUEPRINT}.{name}" for name in ("list_queues", "list_jobs", "queues_overview", "jobs_overview")
}
# a way back to Trawl at the top of its pages (they are its own templates)
_BACK_BAR = (
    '<nav style="padding:.4rem 1rem;background:#0a5cb8;font:14px system-ui,sans-serif">'
    '<a href="/status" style="color:#fff">&larr; Back to Trawl</a></nav>'
)
# its templates use inline scripts and underscore's _.template (new Function): only these
# pages get 'unsafe-inline' and 'unsafe-eval'; the rest of the site keeps script-src 'self'
_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self' 'unsafe-inline' 'unsafe-eval'; frame-ancestors 'none'; "
    "base-uri 'self'; form-action 'self'"
)


def answers_json(path: str, method: str) -> bool:
    """The dashboard's data and action routes answer errors as JSON; its pages as HTML."""
    if not path.startswith(PREFIX + "/"):
        return False
    page = method in ("GET", "HEAD") and (path.endswith("/") or "/view" in path)
    return not page


def register(app: Flask) -> None:
    """Mount the dashboard on the app's Redis, behind the guard and with its own CSP."""
    import rq_dashboard
    from rq_dashboard.web import setup_rq_connection

    app.config.setdefault("RQ_DASHBOARD_REDIS_URL", app.config["REDIS_URL"])
    app.config.setdefault("RQ_DASHBOARD_POLL_INTERVAL", 2500)
    with app.app_context():
        setup_rq_connection(app)
    # app-level hooks run before the blueprint's own (which opens Redis by instance number)
    app.before_request(_guard)
    app.after_request(_dashboard_headers)
    app.register_blueprint(rq_dashboard.blueprint, url_prefix=PREFIX)


def queue_url() -> str:
    """The dashboard's list of Trawl's own queue (where the Status page's link opens)."""
    from webapp.runtime import get_queue

    return url_for(
        f"{BLUEPRINT}.jobs_overview",
        instance_number=0,
        queue_name=get_queue().name,
        registry_name="queued",
        per_page=8,
        order="asc",
        page=1,
    )


def _tidy_queues() -> None:
    """Drop what the dashboard would count but cannot list: entries of its registries (failed,
    started, finished, ...) whose jobs expired (it counts with cleanup=False, so its counts and
    its lists differed). The queues themselves are left alone: compacting one could lose a job
    enqueued meanwhile."""
    from rq import Queue
    from rq.registry import clean_registries

    for queue in Queue.all(connection=current_app.redis_conn):
        clean_registries(queue)


def _same_origin() -> bool:
    """The request's Origin (or Referer) is this site."""
    source = request.headers.get("Origin") or request.headers.get("Referer") or ""
    return urlsplit(source).netloc == request.host if source else False


def _csrf_ok() -> bool:
    """The session's CSRF token came back in a header (the dashboard's or ours)."""
    expected = session.get("csrf") or ""
    sent = next((request.headers[h] for h in CSRF_HEADERS if request.headers.get(h)), "")
    return bool(expected) and hmac.compare_digest(sent.encode(), expected.encode())


def _changes_state() -> bool:
    """Routes of the dashboard that accept POST change something (requeue also takes GET)."""
    rule = request.url_rule
    return rule is not None and "POST" in (rule.methods or ())


def _guard() -> Response | None:
    """Admin session, then origin and CSRF for actions, then the path values its views trust."""
    if request.blueprint != BLUEPRINT:
        return None
    user = auth.session_user()
    if user is None:
        return redirect(url_for("ui.login", next=request.full_path.rstrip("?")))
    if not user.is_admin:
        abort(403)
    if _changes_state():
        if request.method != "POST":
            abort(405)
        if not _same_origin() or not _csrf_ok():
            abort(403)  # a cross-site form or script: it cannot read our token
    _check_path_values(request.view_args or {})
    if request.endpoint == f"{BLUEPRINT}.jobs_overview" and not (request.view_args or {}).get("queue_name"):
        return redirect(queue_url())  # its Jobs tab opened on RQ's "default" queue, not ours
    if request.method == "GET" and request.endpoint in _COUNTED:
        _tidy_queues()
    return None


def _check_path_values(args: dict) -> None:
    """404 for an instance, registry or job that does not exist; 400 for a bad page or order."""
    if args.get("instance_number", 0) != 0:
        abort(404)  # one Redis: instance 0
    if "registry_name" in args and args["registry_name"] not in REGISTRIES:
        abort(404)
    if "order" in args and args["order"] not in ORDERS:
        abort(400)
    for key, upper in (("per_page", MAX_PER_PAGE), ("page", None)):
        if key in args and not _positive_int(args[key], upper):
            abort(400)
    if args.get("job_id") is not None and request.endpoint != f"{BLUEPRINT}.delete_job_view":
        from rq.job import Job

        if not Job.exists(str(args["job_id"]), connection=current_app.redis_conn):
            abort(404)


def _positive_int(value: object, upper: int | None) -> bool:
    text = str(value)
    return text.isdigit() and 0 < int(text) <= (upper or 1_000_000)


def _dashboard_headers(resp: Response) -> Response:
    """The dashboard's CSP, and its CSRF cookie (readable by its script, only under PREFIX)."""
    if request.blueprint != BLUEPRINT:
        return resp
    resp.headers["Content-Security-Policy"] = _CSP
    if resp.mimetype == "text/html" and resp.status_code == 200 and not resp.direct_passthrough:
        page = resp.get_data(as_text=True)
        body = page.find("<body")
        if body >= 0:
            at = page.find(">", body) + 1
            resp.set_data(page[:at] + _BACK_BAR + page[at:])
    token = session.get("csrf")
    if token and request.method == "GET" and resp.mimetype == "text/html":
        resp.set_cookie(
            CSRF_COOKIE, token, path=PREFIX, samesite="Strict", secure=request.is_secure, httponly=False
        )
    return resp
