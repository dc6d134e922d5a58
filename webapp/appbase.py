"""What both apps share: Flask with Trawl's settings, and its logging. The whole app is built by
webapp/factory.py, the command line's by webapp/cli/app.py."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from flask import Flask

from webapp import config, logs

ROOT = Path(__file__).resolve().parent.parent


def new_app(overrides: Mapping[str, Any] | None = None, **flask_args: Any) -> Flask:
    """A Flask app named `webapp` with the settings loaded (config.py) and logging configured."""
    app = Flask("webapp", **flask_args)
    app.config.update(config.load(overrides))
    flask_settings(app)
    logs.configure(app.config["LOG_LEVEL"], app.config["LOG_FORMAT"])
    logging.getLogger("alembic").setLevel(logging.WARNING)
    return app


def flask_settings(app: Flask) -> None:
    """Settings of Flask and its extensions derived from ours."""
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
    c["API_VERSION"] = config.VERSION
    c["OPENAPI_VERSION"] = "3.0.3"
    c["OPENAPI_URL_PREFIX"] = "/"
    c["OPENAPI_JSON_PATH"] = "openapi.json"
    c["JSON_SORT_KEYS"] = False


def _limits_uri(redis_url: str) -> str:
    """flask-limiter spells a unix-socket Redis URL differently from redis-py."""
    if redis_url.startswith("unix://"):
        return "redis+unix://" + redis_url[len("unix://") :]
    return redis_url
