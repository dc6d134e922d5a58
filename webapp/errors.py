"""The one place that turns exceptions into API JSON ({"detail": ...}) or UI HTML."""

from __future__ import annotations

import logging
import math
import time

import redis
from flask import Flask, current_app, jsonify, render_template, request
from flask_limiter.errors import RateLimitExceeded
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException, InternalServerError, RequestedRangeNotSatisfiable

from webapp.exceptions import TrawlError
from webapp.extensions import jwt, limiter
from webapp.indexing import diskfull
from webapp.rqdash import answers_json
from webapp.runtime import get_redis
from webapp.search import IndexRebuilding
from webapp.validation import validation_detail

log = logging.getLogger(__name__)

_STATUS_DETAIL = {
    400: "Bad request",
    401: "Authentication required",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Request body is too large (limit 1 MiB)",
    415: "Unsupported media type",
    416: "Requested range not satisfiable",
    500: "Internal server error",
    503: "Service unavailable",
}


def wants_json() -> bool:
    """API paths (and /metrics), the dashboard's data and action routes answer JSON; pages HTML."""
    path = request.path
    if path.startswith("/api/") or path in ("/api", "/metrics"):
        return True
    return answers_json(path, request.method)


def error_response(status: int, detail: str, headers: dict | None = None):
    """The single error body of the API, or the UI's error page."""
    if wants_json():
        resp = jsonify(detail=detail)
    else:
        resp = current_app.make_response(
            (render_template("error.html", status=status, detail=detail), status)
        )
    resp.status_code = status
    for key, value in (headers or {}).items():
        resp.headers[key] = value
    return resp


def _retry_after() -> int:
    """Seconds until the breached rate limit window resets."""
    current = limiter.current_limit
    if current is None:
        return 60
    return max(1, math.ceil(current.reset_at - time.time()))


def handle_http_exception(error: HTTPException):
    """Every HTTP error (404, 405, 413, 422, 429 ...) becomes one body shape."""
    if isinstance(error, RateLimitExceeded):
        wait = _retry_after()
        return error_response(
            429, f"Too many login attempts, try again in {wait} seconds", {"Retry-After": str(wait)}
        )
    code = error.code or 500
    data = getattr(error, "data", None) or {}
    if code == 422 or "messages" in data or "errors" in data:
        detail = validation_detail(data.get("messages") or data.get("errors") or error.description)
        return error_response(400, detail)
    if code >= 500:
        if isinstance(error, InternalServerError) and error.original_exception:
            log.exception("Unhandled error", exc_info=error.original_exception)
        return error_response(code, _STATUS_DETAIL.get(code, "Server error"))
    detail = data.get("message") or _STATUS_DETAIL.get(code) or error.description or error.name
    headers = dict(data.get("headers") or {})
    if isinstance(error, RequestedRangeNotSatisfiable) and error.length is not None:
        headers["Content-Range"] = f"bytes */{error.length}"  # the size, for the next try
    return error_response(code, detail, headers)


def handle_trawl_error(error: TrawlError):
    """Domain errors carry their own status and message."""
    return error_response(error.status, error.detail)


def handle_unexpected(error: Exception):
    """Anything else is a logged 500; the message never leaks internals."""
    if isinstance(error, HTTPException):
        return handle_http_exception(error)
    log.exception("Unhandled error on %s %s", request.method, request.path)
    return error_response(500, "Internal server error")


def handle_recursion(error: RecursionError):
    """A JSON body nested past the parser's depth (`[` x 100000) is the client's error: 400."""
    if request.is_json:
        return error_response(400, "Invalid JSON body: nested too deeply")
    return handle_unexpected(error)


def handle_unavailable(error: Exception):
    """Redis or the database cannot be reached: 503, logged once with the cause."""
    if isinstance(error, OperationalError) and diskfull.no_space(error):
        diskfull.record(get_redis(), diskfull.DATABASE, error)
        return error_response(503, "The database's disk is full: nothing can be saved until space is freed")
    log.error("Backing service unavailable on %s: %s", request.path, error)
    what = "Redis" if isinstance(error, redis.RedisError) else "The database"
    return error_response(503, f"{what} is unavailable; try again shortly")


def handle_rebuilding(error: Exception):
    """The search index is being rewritten for a new schema: 503 until it is done."""
    return error_response(503, str(error), {"Retry-After": "60"})


def _jwt_401(detail: str):
    return jsonify(detail=detail), 401


def register(app: Flask) -> None:
    """Install the handlers on the app and the JWT extension (after flask-smorest's own)."""
    app.register_error_handler(HTTPException, handle_http_exception)
    app.register_error_handler(TrawlError, handle_trawl_error)
    app.register_error_handler(IndexRebuilding, handle_rebuilding)
    app.register_error_handler(redis.RedisError, handle_unavailable)
    app.register_error_handler(OperationalError, handle_unavailable)
    app.register_error_handler(RecursionError, handle_recursion)
    app.register_error_handler(Exception, handle_unexpected)
    jwt.unauthorized_loader(lambda reason: _jwt_401("Missing or invalid authentication token"))
    jwt.invalid_token_loader(lambda reason: _jwt_401("Invalid authentication token"))
    jwt.expired_token_loader(lambda header, payload: _jwt_401("Authentication token has expired"))
    jwt.revoked_token_loader(lambda header, payload: _jwt_401("Authentication token has been revoked"))
    jwt.needs_fresh_token_loader(lambda header, payload: _jwt_401("Fresh token required"))
    jwt.user_lookup_error_loader(lambda header, payload: _jwt_401("User no longer exists"))
    jwt.token_verification_failed_loader(lambda header, payload: _jwt_401("Invalid authentication token"))
