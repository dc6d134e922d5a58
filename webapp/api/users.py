"""User endpoints (admins only): accounts, their roles, state and granted sources."""

from __future__ import annotations

from flask.views import MethodView

from webapp.api.common import Blueprint, authenticated, errors
from webapp.api.schemas import UserCreateSchema, UserSchema, UserUpdateSchema
from webapp.services import auth, users

blp = Blueprint(
    "users",
    __name__,
    url_prefix="/api/users",
    description="Accounts and the sources they may see (admins only)",
)


@blp.route("")
class Users(MethodView):
    @authenticated(blp, admin=True)
    @blp.response(200, UserSchema(many=True))
    def get(self):
        """Every account, by username."""
        return users.list_json()

    @authenticated(blp, admin=True)
    @blp.arguments(UserCreateSchema)
    @blp.response(201, UserSchema)
    @errors(blp, 400, 409)
    def post(self, body):
        """Create an account (role `user` with no sources unless given)."""
        return auth.user_json(users.create(body))


@blp.route("/<int:user_id>")
class UserItem(MethodView):
    @authenticated(blp, admin=True)
    @blp.response(200, UserSchema)
    @errors(blp, 404)
    def get(self, user_id):
        """One account."""
        return auth.user_json(users.get(user_id))

    @authenticated(blp, admin=True)
    @blp.arguments(UserUpdateSchema)
    @blp.response(200, UserSchema)
    @errors(blp, 400, 404, 409)
    def put(self, body, user_id):
        """Partial update. Disabling ends the account's sessions and tokens at once; the last
        active admin cannot be disabled or demoted (409)."""
        return auth.user_json(users.update(user_id, body))

    @authenticated(blp, admin=True)
    @blp.response(204)
    @errors(blp, 404, 409)
    def delete(self, user_id):
        """Delete an account with its grants and tokens (not the last active admin: 409)."""
        users.delete(user_id)
