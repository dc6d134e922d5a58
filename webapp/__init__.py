"""Trawl: index the files under server folders and search them by full text."""

from __future__ import annotations

import logging
import mimetypes
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from flask import Flask, g, request

from webapp import cli
from webapp import config as settings

# the PDF viewer's ES modules (pdf.js) must be served as JavaScript whatever the system knows
mimetypes.add_type("text/javascript", ".mjs")

ROOT = Path(__file__).resolve().parent.parent
# a proxy's X-Request-ID is kept when it is one plain token (it goes into every log line)
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:@+=/-]{1,128}")


def create_app(overrides: Mapping[str, Any] | None = None) -> Flask:
    """Build the app: config -> extensions -> services -> blueprints -> errors -> cli."""
    app = Flask(__name__, template_folder=str(ROOT / "templates"), static_folder=str(ROOT / "static"))
    from webapp.validation import JSONProvider

    app.json = JSONProvider(app)  # one reader of request bodies (see validation.load_json)
    cfg = settings.load(overrides)
    app.config.update(cfg)
    _flask_settings(app)
    from webapp import logs

    logs.configure(app.config["LOG_LEVEL"], app.config["LOG_FORMAT"])
    logging.getLogger("alembic").setLevel(logging.WARNING)
    _init_extensions(app)
    _init_services(app)
    _register_blueprints(app)
    from webapp import errors

    errors.register(app)
    _request_hooks(app)
    cli.register(app)
    return app


def create_cli_app(overrides: Mapping[str, Any] | None = None) -> Flask:
    """The app the `trawl` command runs its commands in: the settings, the database, Redis,
    the queue and the search backend; no API, UI, dashboard, rate limits or Flask-Migrate
    (Alembic), whose imports cost a command most of its time (docs/performance.md, "The CLI").
    `flask --app wsgi trawl ...` keeps the whole app."""
    app = Flask(__name__)
    app.config.update(settings.load(overrides))
    _flask_settings(app)
    from webapp import logs

    logs.configure(app.config["LOG_LEVEL"], app.config["LOG_FORMAT"])
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from webapp import models  # noqa: F401  (the tables)
    from webapp.extensions import db, jwt

    db.init_app(app)
    jwt.init_app(app)  # tokens are made and checked by the services the commands share
    _init_services(app)
    return app


def _flask_settings(app: Flask) -> None:
    """Settings of Flask and its extensions derived from ours."""
    from datetime import timedelta

    c = app.config
    c["SQLALCHEMY_DATABASE_URI"] = c["DATABASE_URL"]
    if c["DATABASE_URL"].startswith("sqlite"):
        c.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {"connect_args": {"timeout": 30}})
    else:
        c.setdefault("SQLALCHEMY_ENGINE_OPTIONS", {"pool_pre_ping": True})
    c["JWT_SECRET_KEY"] = c["SECRET_KEY"]
    c["JWT_ACCESS_TOKEN_EXPIRES"] = timedelta(hours=c["SESSION_EXPIRE_HOURS"])
    c["JWT_TOKEN_LOCATION"] = ["headers"]
    c["JWT_ALGORITHM"] = "HS256"
    c["PERMANENT_SESSION_LIFETIME"] = timedelta(hours=c["SESSION_EXPIRE_HOURS"])
    c["SESSION_COOKIE_HTTPONLY"] = True
    c["SESSION_COOKIE_SAMESITE"] = "Lax"
    c["SESSION_COOKIE_NAME"] = "trawl_session"
    c["RATELIMIT_STORAGE_URI"] = _limits_uri(c["REDIS_URL"])
    c["RATELIMIT_KEY_PREFIX"] = "trawl-rl"
    c["RATELIMIT_STRATEGY"] = "moving-window"  # a fixed window allows a burst across its edge
    c["RATELIMIT_HEADERS_ENABLED"] = True
    c["API_TITLE"] = "Trawl"
    c["API_VERSION"] = settings.VERSION
    c["OPENAPI_VERSION"] = "3.0.3"
    c["OPENAPI_URL_PREFIX"] = "/"
    c["OPENAPI_JSON_PATH"] = "openapi.json"
    c["JSON_SORT_KEYS"] = False


def _limits_uri(redis_url: str) -> str:
    """flask-limiter spells a unix-socket Redis URL differently from redis-py."""
    if redis_url.startswith("unix://"):
        return "redis+unix://" + redis_url[len("unix://") :]
    return redis_url


def _init_extensions(app: Flask) -> None:
    """Bind the unbound extensions of extensions.py."""
    from webapp import models, runtime  # noqa: F401  (models: the tables)
    from webapp.api import api
    from webapp.api.schemas import ErrorSchema
    from webapp.extensions import db, htmx, jwt, limiter

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


def _init_services(app: Flask) -> None:
    """Redis, the queue and the search backend, kept in app.extensions (tests swap them via config)."""
    from webapp import runtime

    runtime.init_app(app)


def _register_blueprints(app: Flask) -> None:
    """API blueprints through flask-smorest, the UI and the docs pages through Flask."""
    from webapp.api import register_api
    from webapp.ui import register_ui

    register_api(app)
    register_ui(app)
    from webapp import rqdash

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
