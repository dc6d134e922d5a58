"""What every API blueprint shares: documented error responses and the token requirement."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from flask_jwt_extended import get_jwt_identity, jwt_required, verify_jwt_in_request
from flask_smorest import Blueprint

from webapp.api.schemas import ErrorSchema
from webapp.exceptions import Unauthorized
from webapp.ui.session import session_user

_ERROR_TEXT = {
    400: "Invalid input; `detail` names the field and the rule",
    401: "Missing, invalid, expired or revoked token",
    403: "Not allowed",
    404: "Not found",
    409: "Busy or already exists",
    422: "The file cannot be handled: an image too large, damaged or unreadable to preview",
    429: "Too many attempts; see Retry-After",
    503: "A backing service is unavailable",
}


def errors(blp: Blueprint, *codes: int) -> Callable:
    """Document the error responses of an endpoint (all share the {"detail"} body)."""

    def wrap(view):
        for code in codes:
            view = blp.alt_response(code, schema=ErrorSchema, description=_ERROR_TEXT[code])(view)
        return view

    return wrap


def authenticated(blp: Blueprint) -> Callable:
    """Require a valid access token, and say so in the OpenAPI document."""

    def wrap(view):
        view = jwt_required()(view)
        view = blp.doc(security=[{"bearerAuth": []}])(view)
        return errors(blp, 401)(view)

    return wrap


def token_or_session(blp: Blueprint) -> Callable:
    """Require an access token or the web session's cookie: for what pages load as <img>."""

    def wrap(view):
        @wraps(view)
        def checked(*args, **kwargs):
            verify_jwt_in_request(optional=True)  # a token sent but invalid is still 401
            if get_jwt_identity() is None and session_user() is None:
                raise Unauthorized("Missing token or web session")
            return view(*args, **kwargs)

        checked = blp.doc(security=[{"bearerAuth": []}])(checked)  # or the session cookie
        return errors(blp, 401)(checked)

    return wrap
