"""Search endpoint: typo-tolerant full text with filters, sorts and highlighted snippets."""

from __future__ import annotations

from flask.views import MethodView

from webapp.api.common import Blueprint, authenticated, errors, requester
from webapp.api.schemas import SearchArgsSchema, SearchResponseSchema
from webapp.services import documents

blp = Blueprint("search", __name__, url_prefix="/api", description="Full-text search")


@blp.route("/search")
class Search(MethodView):
    @authenticated(blp, reads=True)
    @blp.arguments(SearchArgsSchema)
    @blp.response(200, SearchResponseSchema)
    @errors(blp, 400)
    def post(self, body):
        """Search every source you may see (or one), best matches first unless another sort
        is asked."""
        return documents.search(body, requester())
