"""Server-rendered pages (Jinja + htmx): search, documents, sources, status, API reference."""

from __future__ import annotations

from flask import Flask, Response, current_app, send_from_directory

# the page modules attach their routes to bp when imported
from webapp.ui import (  # noqa: F401
    account,
    filters,
    i18n,
    media_details,
    metadata,
    pages,
    pdfview,
    progress,
    saved,
    session,
    sources,
    status,
    users,
)
from webapp.ui.blueprint import bp


def register_ui(app: Flask) -> None:
    """Register the UI blueprint, its session handling and the page modules that extend it."""
    session.init_app(app)
    i18n.init_app(app)
    filters.init_app(app)
    progress.init_app(app)
    metadata.init_app(app)
    media_details.init_app(app)
    app.register_blueprint(bp)
    app.add_url_rule("/favicon.ico", "favicon", _favicon)


def _favicon() -> Response:
    """The icon browsers ask for at the root of every site (public, cached for a day)."""
    return send_from_directory(
        current_app.static_folder, "favicon.ico", mimetype="image/vnd.microsoft.icon", max_age=86400
    )
