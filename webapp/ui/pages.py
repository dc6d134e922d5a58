"""Pages of the web UI."""

from __future__ import annotations

from flask import render_template

from webapp.ui import bp


@bp.get("/")
def index():
    """The start page."""
    return render_template("index.html")
