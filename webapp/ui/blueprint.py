"""The UI blueprint every page module attaches its routes to, and the API reference pages."""

from __future__ import annotations

from flask import Blueprint, render_template

bp = Blueprint("ui", __name__)


@bp.get("/docs")
def swagger_ui():
    """Swagger UI over /openapi.json, served from our own static files."""
    return render_template("docs/swagger.html")


@bp.get("/redoc")
def redoc():
    """ReDoc over /openapi.json, served from our own static files."""
    return render_template("docs/redoc.html")
