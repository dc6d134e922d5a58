"""What every API blueprint shares: documented error responses, who is asking, and the
requirements of an endpoint (a token; an admin; a write scope)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from flask import g, request
from flask_smorest import Blueprint as SmorestBlueprint
from webargs import core
from webargs.flaskparser import FlaskParser, is_json_request

from webapp.api.schemas import ErrorSchema
from webapp.exceptions import Forbidden, InvalidInput, Unauthorized
from webapp.models import User
from webapp.services import auth
from webapp.validation import json_detail, load_json

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
READ_METHODS = {"GET", "HEAD", "OPTIONS"}


class BodyParser(FlaskParser):
    """webargs' parser reading JSON bodies with the service's one reader (`load_json`): a body
    it refuses, in syntax or in content, is a 400 naming why."""

    def _raw_load_json(self, req):
        if not is_json_request(req):
            return core.missing
        return load_json(req.get_data(cache=True))

    def _handle_invalid_json_error(self, error, req, *args, **kwargs):
        raise InvalidInput(json_detail(error))


class Blueprint(SmorestBlueprint):
    """Every API blueprint: flask-smorest's, with the body parser above."""

    ARGUMENTS_PARSER = BodyParser()


def errors(blp: Blueprint, *codes: int) -> Callable:
    """Document the error responses of an endpoint (all share the {"detail"} body)."""

    def wrap(view):
        for code in codes:
            view = blp.alt_response(code, schema=ErrorSchema, description=_ERROR_TEXT[code])(view)
        return view

    return wrap


def authenticated(blp: Blueprint, admin: bool = False, reads: bool = False) -> Callable:
    """Require a valid bearer token (an access token from login, or an API token `trawl_...`),
    and say so in the OpenAPI document. `admin`: users get 403. `reads`: a POST that only
    reads (search), open to `read`-scope API tokens like every GET; other writes are 403 for
    them."""

    def wrap(view):
        @functools.wraps(view)
        def checked(*args, **kwargs):
            check_requester(admin, reads)
            return view(*args, **kwargs)

        checked = blp.doc(security=[{"bearerAuth": []}])(checked)
        refusable = admin or not (reads or view.__name__ == "get")
        return errors(blp, 401, 403)(checked) if refusable else errors(blp, 401)(checked)

    return wrap


def check_requester(admin: bool = False, reads: bool = False) -> User:
    """The checks of `authenticated` for this request (401, or 403 for a scope or role);
    the account asking."""
    caller = g.caller = auth.bearer_caller()
    if caller.scope != "full" and not (reads or request.method in READ_METHODS):
        raise Forbidden("This API token has the read scope: it may only read and search")
    if admin and not caller.user.is_admin:
        raise Forbidden("Only an admin may do this")
    return caller.user


def caller() -> auth.Caller:
    """Who sent this request (after `authenticated` or `token_or_session`)."""
    return g.caller


def requester() -> User:
    """The account behind this request (after `authenticated`)."""
    return g.caller.user


def session_id() -> str:
    """What ends this request's credential (what a download link made with it is bound to)."""
    return g.caller.session_id


def token_or_session(blp: Blueprint) -> Callable:
    """Require a bearer token (an access token or an API token) or the web session's cookie:
    for what pages load as <img>. The account is then `requester()`."""

    def wrap(view):
        @functools.wraps(view)
        def checked(*args, **kwargs):
            if request.headers.get("Authorization"):
                g.caller = auth.bearer_caller()  # a token sent but invalid is 401, even with a session
            else:
                g.caller = auth.session_caller()
                if g.caller is None:
                    raise Unauthorized("Missing token or web session")
            return view(*args, **kwargs)

        checked = blp.doc(security=[{"bearerAuth": []}])(checked)  # or the session cookie
        return errors(blp, 401)(checked)

    return wrap
