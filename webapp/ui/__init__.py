"""Server-rendered pages (Jinja + htmx): search, documents, sources, status, API reference."""

from __future__ import annotations

from flask import Blueprint, Flask, render_template

bp = Blueprint("ui", __name__)


@bp.get("/docs")
def swagger_ui():
    """Swagger UI over /openapi.json, served from our own static files."""
    return render_template("docs/swagger.html")


@bp.get("/redoc")
def redoc():
    """ReDoc over /openapi.json, served from our own static files."""
    return render_template("docs/redoc.html")


def register_ui(app: Flask) -> None:
    """Register the UI blueprint, its session handling and the page modules that extend it."""
    # account, pages, sources and status only attach their routes to bp
    from webapp.ui import account, filters, pages, session, sources, status  # noqa: F401

    session.init_app(app)
    filters.init_app(app)
    app.register_blueprint(bp)
