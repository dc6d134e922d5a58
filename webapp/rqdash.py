"""rq-dashboard at /admin/rq, open only to a logged-in admin (its POST actions are unauthenticated)."""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import Flask, abort, redirect, request, url_for

PREFIX = "/admin/rq"
_CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
        "script-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'self'; "
        "form-action 'self'")


def _same_origin() -> bool:
    """The request's Origin (or Referer) is this site."""
    source = request.headers.get("Origin") or request.headers.get("Referer") or ""
    return urlsplit(source).netloc == request.host if source else False


def register(app: Flask) -> None:
    """Mount the dashboard on the app's Redis, behind the UI session of an admin."""
    import rq_dashboard
    from rq_dashboard.web import setup_rq_connection

    app.config.setdefault("RQ_DASHBOARD_REDIS_URL", app.config["REDIS_URL"])
    app.config.setdefault("RQ_DASHBOARD_POLL_INTERVAL", 2500)
    with app.app_context():
        setup_rq_connection(app)
    bp = rq_dashboard.blueprint
    if not getattr(bp, "_trawl_guarded", False):  # the blueprint is a module-level singleton
        _guard(bp)
    app.register_blueprint(bp, url_prefix=PREFIX)


def _guard(bp) -> None:
    """Add the admin check and the CSP to the dashboard blueprint (once per process)."""
    bp._trawl_guarded = True

    @bp.before_request
    def _admins_only():
        from webapp.ui.session import session_user

        user = session_user()
        if user is None:
            return redirect(url_for("ui.login", next=request.full_path))
        if not user.is_admin:
            abort(403)
        if request.method not in ("GET", "HEAD") and not _same_origin():
            abort(403)  # its buttons post by XHR without our CSRF token: require our own origin
        return None

    @bp.after_request
    def _csp(resp):
        resp.headers["Content-Security-Policy"] = _CSP  # the dashboard uses inline scripts
        return resp
