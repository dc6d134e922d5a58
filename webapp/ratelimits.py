"""The login and setup rate limits, shared by the API and the UI pages.

Both are moving windows (RATELIMIT_STRATEGY in create_app): a fixed window let 7 tries through
in 3.6 s across its boundary. One budget per client address covers login and setup together;
a second one per attempted username stops a guesser who rotates addresses.
"""

from __future__ import annotations

from flask import current_app, request

from webapp.extensions import limiter
from webapp.validation import username_key


def attempted_username() -> str:
    """The username a login form or JSON body names, lower-cased; empty when it names none."""
    name = request.form.get("username")
    if name is None and request.is_json:
        try:
            body = request.get_json(silent=True)
        except RecursionError:  # nested too deeply: the view answers 400 for it
            body = None
        name = body.get("username") if isinstance(body, dict) else None
    return username_key(name.strip())[:100] if isinstance(name, str) else ""


def _username_key() -> str:
    return "user:" + attempted_username()


per_address = limiter.shared_limit(
    lambda: current_app.config["AUTH_RATE_LIMIT"], scope="auth", methods=["POST"]
)
per_username = limiter.shared_limit(
    lambda: current_app.config["LOGIN_USER_RATE_LIMIT"],
    scope="login-user",
    key_func=_username_key,
    exempt_when=lambda: not attempted_username(),
    methods=["POST"],
)
