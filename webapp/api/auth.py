"""Authentication endpoints: first-run setup, login, current user, logout."""

from __future__ import annotations

from flask import current_app
from flask.views import MethodView
from flask_jwt_extended import current_user, get_jwt
from flask_smorest import Blueprint

from webapp.api import authenticated, errors
from webapp.api.schemas import (
    AuthStatusSchema,
    CredentialsSchema,
    MessageSchema,
    TokenSchema,
    UserSchema,
)
from webapp.extensions import limiter
from webapp.services import auth

blp = Blueprint("auth", __name__, url_prefix="/api/auth", description="Setup, login and tokens")
_auth_limit = limiter.shared_limit(lambda: current_app.config["AUTH_RATE_LIMIT"], scope="auth")


@blp.route("/status")
class AuthStatus(MethodView):
    @blp.response(200, AuthStatusSchema)
    def get(self):
        """Whether first-run setup is still required (public)."""
        return {"setup_required": auth.setup_required()}


@blp.route("/setup")
class Setup(MethodView):
    decorators = [_auth_limit]

    @blp.arguments(CredentialsSchema)
    @blp.response(201, TokenSchema)
    @errors(blp, 400, 409, 429)
    def post(self, body):
        """Create the first admin account and log it in (public, first run only)."""
        return auth.issue_token(auth.setup(body["username"], body["password"]))


@blp.route("/login")
class Login(MethodView):
    decorators = [_auth_limit]

    @blp.arguments(CredentialsSchema)
    @blp.response(200, TokenSchema)
    @errors(blp, 400, 401, 429)
    def post(self, body):
        """Exchange username and password for a bearer token (public, rate-limited)."""
        return auth.issue_token(auth.authenticate(body["username"], body["password"]))


@blp.route("/me")
class Me(MethodView):
    @authenticated(blp)
    @blp.response(200, UserSchema)
    def get(self):
        """The user the token belongs to."""
        return auth.user_json(current_user)


@blp.route("/logout")
class Logout(MethodView):
    @authenticated(blp)
    @blp.response(200, MessageSchema)
    def post(self):
        """Revoke the token used for this request."""
        auth.revoke(get_jwt())
        return {"message": "Logged out"}
