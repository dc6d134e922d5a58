"""Source endpoints: list, create, read, update, delete, path test, reindex, clear-stale."""

from __future__ import annotations

from flask.views import MethodView

from webapp.api.common import Blueprint, authenticated, errors, requester
from webapp.api.schemas import (
    PathTestArgsSchema,
    PathTestSchema,
    ReindexArgsSchema,
    ReindexSchema,
    RemovedSchema,
    SourceCreateSchema,
    SourceSchema,
    SourceUpdateSchema,
)
from webapp.services import access, scans, sources

blp = Blueprint(
    "sources",
    __name__,
    url_prefix="/api/sources",
    description="Folders to index, their patterns and schedules",
)


@blp.route("")
class Sources(MethodView):
    @authenticated(blp)
    @blp.response(200, SourceSchema(many=True))
    def get(self):
        """All sources you may see, with their state and counts."""
        return sources.list_json(access.visible_sources(requester()))

    @authenticated(blp, admin=True)
    @blp.arguments(SourceCreateSchema)
    @blp.response(201, SourceSchema)
    @errors(blp, 400, 409)
    def post(self, body):
        """Create a source; the id is a slug of the name unless given; scan_now queues its scan."""
        scan_now = body.pop("scan_now")
        return sources.to_json(sources.create(body, scan_now=scan_now))


@blp.route("/test-path")
class TestPath(MethodView):
    @authenticated(blp, admin=True)
    @blp.arguments(PathTestArgsSchema)
    @blp.response(200, PathTestSchema)
    @errors(blp, 400)
    def post(self, body):
        """Report whether a folder can be a source root (creates nothing)."""
        return sources.diagnose_path(body["root_path"])


@blp.route("/<string:source_id>")
class SourceItem(MethodView):
    @authenticated(blp)
    @blp.response(200, SourceSchema)
    @errors(blp, 404)
    def get(self, source_id):
        """One source (404 for one you were not granted)."""
        return sources.to_json(access.source_for(requester(), source_id))

    @authenticated(blp, admin=True)
    @blp.arguments(SourceUpdateSchema)
    @blp.response(200, SourceSchema)
    @errors(blp, 400, 404, 409)
    def put(self, body, source_id):
        """Partial update; null patterns reset to the defaults, a null schedule means manual."""
        return sources.to_json(sources.update(source_id, body))

    @authenticated(blp, admin=True)
    @blp.response(204)
    @errors(blp, 404)
    def delete(self, source_id):
        """Delete a source, its records and its documents (files on disk are never touched)."""
        sources.delete(source_id)


@blp.route("/<string:source_id>/reindex")
class Reindex(MethodView):
    @authenticated(blp, admin=True)
    @blp.arguments(ReindexArgsSchema, location="query")
    @blp.response(200, ReindexSchema)
    @errors(blp, 400, 404, 409)
    def post(self, args, source_id):
        """Queue a scan (full=true rebuilds every file); wait=N blocks up to N seconds."""
        return scans.request_scan(source_id, full=args["full"], wait=args["wait"])


@blp.route("/<string:source_id>/clear-stale")
class ClearStale(MethodView):
    @authenticated(blp, admin=True)
    @blp.response(200, RemovedSchema)
    @errors(blp, 404, 409)
    def post(self, source_id):
        """Remove the failed-file records so the next scan retries them."""
        return {"removed": scans.clear_stale(source_id)}
