"""Server-rendered pages (Jinja + htmx): API reference pages now, the search UI on top."""

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
    """Register the UI blueprint (and the pages module that extends it)."""
    from webapp.ui import pages  # noqa: F401  (routes attach to bp)

    app.register_blueprint(bp)
