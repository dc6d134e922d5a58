"""htmx helpers: is this a real htmx request, fragment-or-page rendering, client-side redirects."""

from __future__ import annotations

import htmx_flask
from flask import make_response, render_template
from werkzeug.wrappers import Response


def is_htmx() -> bool:
    """A real htmx request: not boosted and not a history restore (those want the full page)."""
    hx = htmx_flask.request.htmx
    return bool(hx) and not hx.boosted and not hx.history_restore_request


def render(page_template: str, fragment_template: str, status: int = 200, /, **context) -> Response:
    """The fragment for htmx requests, the full page otherwise; both vary on HX-Request."""
    template = fragment_template if is_htmx() else page_template
    resp = make_response(render_template(template, **context), status)
    resp.vary.add("HX-Request")
    return resp


def client_redirect(url: str, status: int = 200) -> Response:
    """Make htmx load `url` as a full page (a plain 3xx would be followed inside the swap)."""
    resp = htmx_flask.make_response("", status, redirect=url)
    resp.vary.add("HX-Request")
    return resp
