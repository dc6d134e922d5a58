"""The whole app (web server, workers, `flask --app wsgi ...`): create_app."""

from __future__ import annotations

import mimetypes
import re
import uuid
from collections.abc import Mapping
from typing import Any

from flask import Flask, g, request

from webapp import cli, errors, models, rqdash, runtime  # noqa: F401  (models: the tables)
from webapp.api import api, register_api
from webapp.api.schemas import ErrorSchema
from webapp.appbase import ROOT, new_app
from webapp.extensions import db, htmx, jwt, limiter
from webapp.ui import register_ui
from webapp.validation import JSONProvider

# the PDF viewer's ES modules (pdf.js) must be served as JavaScript whatever the system knows
mimetypes.add_type("text/javascript", ".mjs")

# a proxy's X-Request-ID is kept when it is one plain token (it goes into every log line)
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@+=/-]{1,128}")


def create_app(overrides: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: config -> extensions -> services -> blueprints -> errors -> cli."""
    app = new_app(overrides, template_folder=str(ROOT / "templates"), static_folder=str(ROOT / "static"))
    app.json = JSONProvider(app)  # one reader of request bodies (see validation.load_json)
    _init_extensions(app)
    runtime.init_app(app)  # Redis, the queue, the search backend (tests swap them via config)
    _register_blueprints(app)
    errors.register(app)
    _request_hooks(app)
    cli.register(app)
    return app


def _init_extensions(app: Flask) -> None:
    """Bind the unbound extensions of extensions.py."""
    api.ERROR_SCHEMA = ErrorSchema  # the documented default error body is ours: {"detail"}
    db.init_app(app)
    runtime.migrations(app)  # `flask db ...`
    jwt.init_app(app)
    limiter.init_app(app)
    htmx.init_app(app)
    api.init_app(app, spec_kwargs={"info": {"description": _api_description()}})
    api.spec.components.security_scheme(
        "bearerAuth",
        {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "JWT",
            "description": "An access token from login, or an API token trawl_...",
        },
    )


def _api_description() -> str:
    return (
        "Full-text search over the files of your server folders. Log in with "
        "`POST /api/auth/login`, then send `Authorization: Bearer <token>`; scripts may use "
        "an API token (`POST /api/tokens`, `trawl_...`) the same way. In this page use "
        "**Authorize**. Users see only the sources granted to them; managing sources and "
        'users needs an admin. Errors are `{"detail": "..."}`.'
    )


def _register_blueprints(app: Flask) -> None:
    """API blueprints through flask-smorest, the UI and the docs pages through Flask."""
    register_api(app)
    register_ui(app)
    rqdash.register(app)


def _request_hooks(app: Flask) -> None:
    """Request id on every response, and the security headers."""

    @app.before_request
    def _request_id():
        incoming = request.headers.get("X-Request-ID", "")
        g.request_id = incoming if SANE_REQUEST_ID.fullmatch(incoming) else uuid.uuid4().hex

    @app.after_request
    def _headers(resp):
        resp.headers["X-Request-ID"] = getattr(g, "request_id", "") or uuid.uuid4().hex
        resp.headers.setdefault("X-Content-Type-Options", "nosniff")
        resp.headers.setdefault("Referrer-Policy", "same-origin")
        resp.headers.setdefault("X-Frame-Options", "DENY")
        resp.headers.setdefault(
            "Content-Security-Policy",
            "default-src 'self'; img-src 'self' data: blob:; style-src 'self' 'unsafe-inline'; "
            "script-src 'self'; worker-src 'self' blob:; frame-ancestors 'none'; base-uri 'self'; "
            "form-action 'self'",
        )
        return resp
