"""Authentication endpoints: first-run setup, login, current user, logout."""

from __future__ import annotations

from flask.views import MethodView
from flask_jwt_extended import current_user, get_jwt
from flask_smorest import Blueprint

from webapp import ratelimits
from webapp.api.common import authenticated, errors
from webapp.api.schemas import (
    AuthStatusSchema,
    CredentialsSchema,
    MessageSchema,
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
