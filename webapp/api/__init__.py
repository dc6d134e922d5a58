"""The JSON API: one flask-smorest blueprint per resource, all under /api."""

from __future__ import annotations

import threading

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


class DocumentedOnRead(Api):
    """flask-smorest's Api, writing each blueprint's part of the OpenAPI document when the
    document is first read (`/openapi.json`, `/docs`, `flask openapi`) instead of as the
    blueprint is registered: most apps never read it (workers, the command line, the tests'
    apps), and writing it was 30 of `create_app`'s 78 ms (docs/architecture.md)."""

    _pending: list[tuple]  # (blueprint, name, parameters) not yet in the document

    @property
    def spec(self):
        with _documenting:
            pending, self._pending = self._pending, []
            for blp, name, parameters in pending:
                blp.register_views_in_doc(self, self._app, self._spec, name=name, parameters=parameters)
                self._spec.tag({"name": name, "description": blp.description})
        return self._spec

    @spec.setter
    def spec(self, value) -> None:  # None at first, then a new document each time an app is bound
        self._spec, self._pending = value, []

    def register_blueprint(self, blp, *, parameters=None, **options) -> None:
        """flask-smorest's, the documenting left to the first read of `spec`."""
        name = options.get("name", blp.name)
        self._app.extensions["flask-smorest"]["blp_name_to_api"][name] = self
        self._app.register_blueprint(blp, **options)
        self._pending.append((blp, name, parameters))


_documenting = threading.Lock()  # a web process's threads may read the document together
api = DocumentedOnRead()  # unbound; create_app binds it (the command-line app never imports flask-smorest)


def register_api(app: Flask) -> None:
    """Register every API blueprint on the app's flask-smorest Api."""
    for module in (auth, users, tokens, sources, search, saved_searches, documents, status, metrics):
        api.register_blueprint(module.blp)
