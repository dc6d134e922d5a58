"""Saved search endpoints: the logged-in user's searches kept under a name."""

from __future__ import annotations

from flask.views import MethodView

from webapp.api.common import Blueprint, authenticated, errors, requester
from webapp.api.schemas import SavedSearchCreateSchema, SavedSearchSchema
from webapp.services import saved_searches

blp = Blueprint(
    "saved-searches",
    __name__,
    url_prefix="/api/saved-searches",
    description="Searches kept under a name, per user",
)


@blp.route("")
class SavedSearches(MethodView):
    @authenticated(blp)
    @blp.response(200, SavedSearchSchema(many=True))
    def get(self):
        """Your saved searches, by name."""
        return saved_searches.list_json(requester())

    @authenticated(blp)
    @blp.arguments(SavedSearchCreateSchema)
    @blp.response(201, SavedSearchSchema)
    @errors(blp, 400, 409)
    def post(self, body):
        """Save a search (query, source, type, sort) under a name of your own."""
        return saved_searches.to_json(saved_searches.create(requester(), body))


@blp.route("/<int:saved_id>")
class SavedSearchItem(MethodView):
    @authenticated(blp)
    @blp.response(204)
    @errors(blp, 404)
    def delete(self, saved_id):
        """Delete one of your saved searches."""
        saved_searches.delete(requester(), saved_id)
