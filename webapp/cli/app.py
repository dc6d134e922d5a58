"""The app the `trawl` command runs its commands in: create_cli_app."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flask import Flask

from webapp import models, runtime  # noqa: F401  (models: the tables)
from webapp.appbase import new_app
from webapp.extensions import db, jwt


def create_cli_app(overrides: Mapping[str, Any] | None = None) -> Flask:
    """The settings, the database, Redis, the queue and the search backend; no API, UI,
    dashboard, rate limits or Flask-Migrate (Alembic), whose imports cost a command most of
    its time (docs/performance.md, "The CLI"). `flask --app wsgi trawl ...` keeps the whole
    app."""
    app = new_app(overrides)
    db.init_app(app)
    jwt.init_app(app)  # tokens are made and checked by the services the commands share
    runtime.init_app(app)
    return app
