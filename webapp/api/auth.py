"""Authentication endpoints: first-run setup, login, current user, password, logout."""

from __future__ import annotations

from flask.views import MethodView

from webapp import ratelimits
from webapp.api.common import Blueprint, authenticated, caller, errors, requester
from webapp.api.schemas import (
    AuthStatusSchema,
    CredentialsSchema,
    MessageSchema,
    PasswordChangeSchema,
    TokenSchema,
    UserSchema,
)
from webapp.services import auth

blp = Blueprint("auth", __name__, url_prefix="/api/auth", description="Setup, login and tokens")


@blp.route("/status")
class AuthStatus(MethodView):
    @blp.response(200, AuthStatusSchema)
    def get(self):
        """Whether first-run setup is still required (public)."""
        return {"setup_required": auth.setup_required()}


@blp.route("/setup")
class Setup(MethodView):
    decorators = [ratelimits.per_address]

    @blp.arguments(CredentialsSchema)
    @blp.response(201, TokenSchema)
    @errors(blp, 400, 409, 429)
    def post(self, body):
        """Create the first admin account and log it in (public, first run only)."""
        return auth.issue_token(auth.setup(body["username"], body["password"]))


@blp.route("/login")
class Login(MethodView):
    decorators = [ratelimits.per_address, ratelimits.per_username]

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
        """The user the token belongs to, with its role and granted sources."""
        return auth.user_json(requester())


@blp.route("/password")
class Password(MethodView):
    @authenticated(blp)
    @blp.arguments(PasswordChangeSchema)
    @blp.response(200, TokenSchema)
    @errors(blp, 400)
    def put(self, body):
        """Change your password. Every session, access token, API token and download link of
        the account ends; the answer is a new access token for this client."""
        return auth.change_own_password(requester(), body["current_password"], body["new_password"])


@blp.route("/logout")
class Logout(MethodView):
    @authenticated(blp)
    @blp.response(200, MessageSchema)
    def post(self):
        """Revoke the token used for this request (an API token is deleted)."""
        caller().end()
        return {"message": "Logged out"}
