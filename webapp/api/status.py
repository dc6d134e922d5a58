"""Status endpoints: public health, overall status and per-source status."""

from __future__ import annotations

from flask.views import MethodView

from webapp.api.common import Blueprint, authenticated, errors, requester
from webapp.api.schemas import (
    FailedFilesArgsSchema,
    FailedFilesSchema,
    HealthSchema,
    SourceStatusSchema,
    StatusSchema,
)
from webapp.services import status

blp = Blueprint("status", __name__, url_prefix="/api", description="Health and indexing status")


@blp.route("/health")
class Health(MethodView):
    @blp.response(200, HealthSchema)
    @blp.alt_response(503, schema=HealthSchema, description="A component is not ok")
    def get(self):
        """Health of the database, Redis and the search engine (public)."""
        return status.health()


@blp.route("/status")
class Status(MethodView):
    @authenticated(blp)
    @blp.response(200, StatusSchema)
    def get(self):
        """Documents, sources, queue and workers (the sources you may see)."""
        return status.overall(requester())


@blp.route("/status/<string:source_id>")
class SourceStatus(MethodView):
    @authenticated(blp)
    @blp.response(200, SourceStatusSchema)
    @errors(blp, 404)
    def get(self, source_id):
        """Counts, latest run and failed files of one source."""
        return status.one(source_id, requester())


@blp.route("/status/<string:source_id>/failed")
class FailedFiles(MethodView):
    @authenticated(blp)
    @blp.arguments(FailedFilesArgsSchema, location="query")
    @blp.response(200, FailedFilesSchema)
    @errors(blp, 400, 404)
    def get(self, args, source_id):
        """A page of the source's failed files (50), grouped by message; past the end, the last."""
        return status.failed_files(source_id, args["page"], requester())
