"""Session login of the UI: who is logged in, the login gate of every page, and CSRF tokens.

The session is Flask's signed cookie (HttpOnly, SameSite=Lax, name set in create_app). It holds
the user id, the time it was issued, a random session id, the user's credential stamp and a CSRF
token. A session older than SESSION_EXPIRE_HOURS, of a deleted user, whose user changed password,
or whose id was revoked by logout (in Redis, like API tokens) counts as logged out, so a copied
cookie stops working when its owner logs out.
"""

from __future__ import annotations

import functools
import hmac
import secrets
import time
from urllib.parse import urlsplit

from flask import Flask, current_app, g, redirect, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from werkzeug.wrappers import Response

from webapp.exceptions import Forbidden, InvalidInput
from webapp.models import User
from webapp.services import auth
from webapp.ui.blueprint import bp
from webapp.ui.htmx import client_redirect

CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
# pages reachable without a session (the API reference pages are public like /openapi.json)
PUBLIC_ENDPOINTS = {"ui.login", "ui.setup", "ui.swagger_ui", "ui.redoc"}
CSRF_MESSAGE = "The form's security token is missing or has expired. Reload the page and try again."


class TrawlSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie session, marked Secure whenever the request came over HTTPS."""

    def get_cookie_secure(self, app: Flask) -> bool:
        """Secure when configured, or when this request is HTTPS (directly or via a proxy)."""
        return bool(app.config.get("SESSION_COOKIE_SECURE")) or request.is_secure


def init_app(app: Flask) -> None:
    """Install the session interface and make csrf_token() and the user available to templates."""
    app.session_interface = TrawlSessionInterface()

    @app.context_processor
    def _template_globals() -> dict:
        user = g.user if "user" in g else auth.session_user()
        return {"csrf_token": csrf_token, "current_user": user}


def csrf_token() -> str:
    """This session's CSRF token, created on first use."""
    token = session.get("csrf")
    if not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def check_csrf() -> None:
    """Refuse a state-changing request whose form field or header does not carry the token."""
    sent = request.form.get(CSRF_FIELD) or request.headers.get(CSRF_HEADER) or ""
    expected = session.get("csrf") or ""
    if not expected or not hmac.compare_digest(sent.encode(), expected.encode()):
        raise InvalidInput(CSRF_MESSAGE)


def login(user: User) -> None:
    """Start a fresh session for this user (a new CSRF token: no fixation across the login)."""
    session.clear()
    session.permanent = True
    session["uid"] = user.id
    session["iat"] = int(time.time())
    session["sid"] = secrets.token_urlsafe(24)
    session["stp"] = auth.credential_stamp(user)
    csrf_token()


def session_id() -> str:
    """The id of this UI session (what logout revokes, and what its download links carry)."""
    return str(session.get("sid", ""))


def logout() -> None:
    """End the session here and server-side: its id is revoked until it would have expired."""
    sid, issued = session.get("sid"), session.get("iat")
    if isinstance(sid, str) and isinstance(issued, int):
        lifetime = current_app.permanent_session_lifetime.total_seconds()
        auth.revoke_session(sid, int(issued + lifetime))
    session.clear()


def admin_required(view):
    """A page only admins may use (others get the 403 error page; the gate ran before)."""

    @functools.wraps(view)
    def checked(*args, **kwargs):
        if not g.user or not g.user.is_admin:
            raise Forbidden("Only an admin may do this")
        return view(*args, **kwargs)

    return checked


def safe_next(target: str | None) -> str | None:
    """`target` when it is a path on this site (never another host), else None."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    if not target.isprintable():  # CR/LF and other controls cannot go into a Location header
        return None
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else None


def _to(endpoint: str, **values) -> Response:
    """Redirect there; htmx requests get a 401 with HX-Redirect so the whole page changes."""
    url = url_for(endpoint, **values)
    return client_redirect(url, 401) if request.headers.get("HX-Request") else redirect(url)


def _next_value() -> str | None:
    """Where to come back after login: this page, or for htmx (a session that expired while
    typing) the page the browser shows, when it is on this site."""
    if request.headers.get("HX-Request"):
        if request.method == "GET" and request.endpoint == "ui.index":  # the search as typed
            shown = {k: v for k, v in request.args.items() if v}  # the fields typed or set
            return url_for("ui.index", **shown) if shown else None
        shown = urlsplit(request.headers.get("HX-Current-URL", ""))
        if shown.netloc != request.host:
            return None
        path = shown.path + (f"?{shown.query}" if shown.query else "")
        return safe_next(path) if path != "/" else None
    if request.method != "GET":
        return None
    path = request.full_path.rstrip("?")
    return path if path != "/" else None


@bp.before_request
def gate() -> Response | None:
    """Check CSRF on every state-changing request; send anyone not logged in to setup or login."""
    g.user = None
    if request.method not in SAFE_METHODS:
        check_csrf()
    if request.endpoint in PUBLIC_ENDPOINTS:
        g.user = auth.session_user()
        return None
    if auth.setup_required():
        return _to("ui.setup")
    g.user = auth.session_user()
    if g.user is None:
        nxt = _next_value()
        return _to("ui.login", next=nxt) if nxt else _to("ui.login")
    return None
