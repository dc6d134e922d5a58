"""API token endpoints: each user's keys for scripts (`Authorization: Bearer trawl_...`)."""

from __future__ import annotations

from flask.views import MethodView

from webapp.api.common import Blueprint, authenticated, errors, requester
from webapp.api.schemas import ApiTokenCreateSchema, ApiTokenSchema
from webapp.services import tokens

blp = Blueprint(
    "tokens",
    __name__,
    url_prefix="/api/tokens",
    description="API tokens for scripts: read or full scope, optional expiry",
)


@blp.route("")
class Tokens(MethodView):
    @authenticated(blp)
    @blp.response(200, ApiTokenSchema(many=True))
    def get(self):
        """Your tokens, newest first (an admin sees everyone's); never their secrets."""
        return tokens.list_for(requester())

    @authenticated(blp)
    @blp.arguments(ApiTokenCreateSchema)
    @blp.response(201, ApiTokenSchema)
    @errors(blp, 400)
    def post(self, body):
        """Create a token; `token` is in this answer only."""
        return tokens.create(requester(), body["name"], body["scope"], body["expires_in_days"])


@blp.route("/<int:token_id>")
class TokenItem(MethodView):
    @authenticated(blp)
    @blp.response(204)
    @errors(blp, 404)
    def delete(self, token_id):
        """Revoke a token at once (your own; an admin may revoke anyone's)."""
        tokens.delete(requester(), token_id)
