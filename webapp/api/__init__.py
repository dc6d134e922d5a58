"""The JSON API: one flask-smorest blueprint per resource, all under /api."""

from __future__ import annotations

from flask import Flask
from flask_smorest import Api

from webapp.api import (
    auth,
    documents,
    metrics,
    saved_searches,
    search,
    sources,
    status,
    tokens,
    users,
)

api = Api()  # unbound; create_app binds it (the command-line app never imports flask-smorest)


def register_api(app: Flask) -> None:
    """Register every API blueprint on the app's flask-smorest Api."""
    for module in (auth, users, tokens, sources, search, saved_searches, documents, status, metrics):
        api.register_blueprint(module.blp)
