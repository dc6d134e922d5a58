"""Server-rendered pages (Jinja + htmx): search, documents, sources, status, API reference."""

from __future__ import annotations

from flask import Flask

# the page modules attach their routes to bp when imported
from webapp.ui import account, filters, pages, session, sources, status, users  # noqa: F401
from webapp.ui.blueprint import bp


def register_ui(app: Flask) -> None:
    """Register the UI blueprint, its session handling and the page modules that extend it."""
    session.init_app(app)
    filters.init_app(app)
    app.register_blueprint(bp)
