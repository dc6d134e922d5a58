"""Marshmallow schemas of the JSON API: request arguments, responses and the error body."""

from __future__ import annotations

import marshmallow as ma
from marshmallow import fields, validate

from webapp.indexing.runstats import RunState, SourceState
from webapp.services.search_args import SearchArgsSchema  # noqa: F401  (the API's search body)
from webapp.validation import StrictSchema


class ErrorSchema(ma.Schema):
    """The one error body of the API."""

    detail = fields.String(required=True, metadata={"example": "limit: must be between 1 and 100"})


class MessageSchema(ma.Schema):
    message = fields.String()


# --- auth ---------------------------------------------------------------------------------------


class AuthStatusSchema(ma.Schema):
    setup_required = fields.Boolean()


class CredentialsSchema(StrictSchema):
    username = fields.String(required=True)
    password = fields.String(required=True, load_only=True)


class TokenSchema(ma.Schema):
    access_token = fields.String()
    token_type = fields.String(metadata={"example": "bearer"})
    expires_in = fields.Integer(metadata={"description": "Seconds until the token expires"})


class UserSchema(ma.Schema):
    id = fields.Integer()
    username = fields.String()
    role = fields.String(metadata={"example": "user", "description": "admin or user"})
    is_admin = fields.Boolean()
    active = fields.Boolean()
    source_ids = fields.List(
        fields.String(), metadata={"description": "The sources granted (admins see every source regardless)"}
    )
    created_at = fields.String(metadata={"example": "2026-11-21T10:30:00"})
    last_login_at = fields.String(allow_none=True)


class PasswordChangeSchema(StrictSchema):
    current_password = fields.String(required=True, load_only=True)
    new_password = fields.String(required=True, load_only=True)


class UserCreateSchema(StrictSchema):
    """The rules live in services/users.py (shared with the web page)."""

    username = fields.String(required=True)
    password = fields.String(required=True, load_only=True, metadata={"description": "At least 8 characters"})
    role = fields.String(load_default="user", metadata={"description": "admin or user"})
    active = fields.Boolean(load_default=True)
    source_ids = fields.List(fields.String(), load_default=list)


class UserUpdateSchema(StrictSchema):
    """Partial: absent fields stay. A new password ends the account's sessions and tokens."""

    username = fields.String()
    password = fields.String(load_only=True)
    role = fields.String()
    active = fields.Boolean()
    source_ids = fields.List(fields.String())


class ApiTokenCreateSchema(StrictSchema):
    name = fields.String(required=True, metadata={"example": "backup script"})
    scope = fields.String(
        load_default="read", metadata={"description": "read (GET endpoints and search) or full"}
    )
    expires_in_days = fields.Integer(
        load_default=None,
        allow_none=True,
        metadata={"description": "Days until it stops working (1-3650); null: never"},
    )


class ApiTokenSchema(ma.Schema):
    id = fields.Integer()
    name = fields.String()
    scope = fields.String()
    user_id = fields.Integer()
    token = fields.String(metadata={"description": "Only in the answer to its creation"})
    created_at = fields.String()
    expires_at = fields.String(allow_none=True)
    last_used_at = fields.String(allow_none=True)


# --- sources ------------------------------------------------------------------------------------

_PATTERNS = fields.List(fields.String(), allow_none=True)


class SourceCreateSchema(StrictSchema):
    id = fields.String(
        load_default=None, allow_none=True, metadata={"description": "Optional; a slug of name when absent"}
    )
    name = fields.String(
        required=True,
        metadata={  # its rules: services.sources.valid_name
            "description": "1 to 200 characters (spaces around it are dropped), no control characters"
        },
    )
    root_path = fields.String(required=True)
    include_patterns = fields.List(fields.String(), allow_none=True, metadata={"example": ["**/*"]})
    exclude_patterns = fields.List(fields.String(), allow_none=True, metadata={"example": ["**/.git/**"]})
    scan_schedule = fields.String(allow_none=True, metadata={"example": "@daily"})
    scan_now = fields.Boolean(
        load_default=False, metadata={"description": "Queue the first scan at once (off by default)"}
    )
    watch = fields.Boolean(
        load_default=True,
        metadata={"description": "follow changes under the root and index them within seconds"},
    )
    allow_overlap = fields.Boolean(
        load_default=False,
        metadata={
            "description": "Accept a root_path that is, lies inside or holds another source's "
            "folder (refused with 409 otherwise); search shows a file once"
        },
    )
    semantic = fields.Boolean(
        load_default=True,
        metadata={"description": "embed the documents' passages so search finds them by meaning too"},
    )


class SourceUpdateSchema(StrictSchema):
    name = fields.String(metadata={"description": "as when creating"})
    root_path = fields.String()
    include_patterns = fields.List(fields.String(), allow_none=True)
    exclude_patterns = fields.List(fields.String(), allow_none=True)
    scan_schedule = fields.String(allow_none=True)
    watch = fields.Boolean()
    allow_overlap = fields.Boolean(metadata={"description": "as when creating"})
    semantic = fields.Boolean()


class SourceSchema(ma.Schema):
    id = fields.String()
    name = fields.String()
    root_path = fields.String()
    include_patterns = fields.List(fields.String())
    exclude_patterns = fields.List(fields.String())
    scan_schedule = fields.String(allow_none=True)
    watch = fields.Boolean()
    allow_overlap = fields.Boolean(metadata={"description": "as when creating"})
    semantic = fields.Boolean()
    created_at = fields.String()
    updated_at = fields.String()
    last_scan_at = fields.String(allow_none=True)
    next_scan_at = fields.String(allow_none=True)
    state = fields.String(metadata={"description": ", ".join(SourceState)})
    watch_state = fields.String(
        metadata={"description": "watching, polling, off, starting, or error: <message>"}
    )
    document_count = fields.Integer()
    failed_count = fields.Integer()


class PathTestArgsSchema(StrictSchema):
    root_path = fields.String(required=True)


class PathTestSchema(ma.Schema):
    path = fields.String()
    ok = fields.Boolean()
    visible = fields.Boolean()
    inside_allowed_roots = fields.Boolean()
    exists = fields.Boolean()
    is_directory = fields.Boolean()
    readable = fields.Boolean()
    allowed_roots = fields.List(fields.String())
    message = fields.String()
    hint = fields.String()


class ReindexArgsSchema(ma.Schema):
    full = fields.Boolean(load_default=False)
    wait = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=300, error="must be between 0 and 300")
    )


class ErrorEntrySchema(ma.Schema):
    path = fields.String()
    error = fields.String()


class ProgressSchema(ma.Schema):
    done = fields.Integer()
    total = fields.Integer()


class RunStatsSchema(ma.Schema):
    state = fields.String(metadata={"description": ", ".join(RunState)})
    started_at = fields.String(allow_none=True)
    finished_at = fields.String(allow_none=True)
    total_scanned = fields.Integer()
    new_files = fields.Integer()
    modified_files = fields.Integer()
    unchanged_files = fields.Integer()
    deleted_files = fields.Integer()
    successful = fields.Integer()
    failed = fields.Integer()
    skipped = fields.Integer()
    error_count = fields.Integer()
    errors = fields.List(fields.Nested(ErrorEntrySchema))
    progress = fields.Nested(ProgressSchema)
    current_file = fields.String(allow_none=True)
    message = fields.String(allow_none=True)


class ReindexSchema(ma.Schema):
    message = fields.String()
    job_id = fields.String()
    stats = fields.Nested(RunStatsSchema)


class RemovedSchema(ma.Schema):
    removed = fields.Integer()


# --- status -------------------------------------------------------------------------------------


class HealthSchema(ma.Schema):
    status = fields.String(metadata={"description": "ok or degraded"})
    version = fields.String()
    setup_required = fields.Boolean()
    components = fields.Dict(keys=fields.String(), values=fields.String())


class PhaseStatusSchema(ma.Schema):
    state = fields.String(
        metadata={"description": "idle, embedding (ocr: reading), off, unavailable or error"}
    )
    done = fields.Integer(metadata={"description": "documents done"})
    pending = fields.Integer(metadata={"description": "documents waiting for the phase"})
    eta_seconds = fields.Integer(
        allow_none=True, metadata={"description": "seconds left at the observed rate; null: not known yet"}
    )
    error = fields.String(
        allow_none=True,
        metadata={"description": "why the phase stopped (a full disk, an unreadable vector file)"},
    )


class SemanticStatusSchema(PhaseStatusSchema):
    waiting = fields.String(
        allow_none=True, metadata={"description": "why a queued phase waits (a scan has the worker)"}
    )


class SourceStatusSchema(ma.Schema):
    source_id = fields.String()
    source_name = fields.String()
    state = fields.String(metadata={"description": ", ".join(SourceState)})
    total_files = fields.Integer()
    successful = fields.Integer()
    failed = fields.Integer()
    skipped = fields.Integer()
    ocr_pending = fields.Integer(metadata={"description": "documents waiting for OCR"})
    ocr = fields.Nested(PhaseStatusSchema, metadata={"description": "the OCR phase of the source"})
    semantic = fields.Nested(
        SemanticStatusSchema, metadata={"description": "the embedding phase (meaning) of the source"}
    )
    last_indexed_at = fields.String(allow_none=True)
    last_scan_at = fields.String(allow_none=True)
    next_scan_at = fields.String(allow_none=True)
    last_run = fields.Nested(RunStatsSchema, allow_none=True)
    watch_state = fields.String(
        metadata={"description": "watching, polling, off, starting, or error: <message>"}
    )
    last_live_update = fields.Nested(
        RunStatsSchema,
        allow_none=True,
        metadata={"description": "the latest live update (changed paths indexed without a scan)"},
    )
    failed_files = fields.List(fields.Nested(ErrorEntrySchema))


class QueueSchema(ma.Schema):
    queued = fields.Integer()
    started = fields.Integer()
    failed = fields.Integer()
    workers = fields.Integer()


class RecentRunSchema(ma.Schema):
    source_id = fields.String()
    source_name = fields.String()
    state = fields.String(
        metadata={"description": "how the scan ended: finished, failed, cancelled or interrupted"}
    )
    started_at = fields.String(allow_none=True)
    finished_at = fields.String()
    duration_seconds = fields.Float(allow_none=True)
    message = fields.String(allow_none=True)
    total_scanned = fields.Integer()
    new_files = fields.Integer()
    modified_files = fields.Integer()
    deleted_files = fields.Integer()
    successful = fields.Integer()
    failed = fields.Integer()
    skipped = fields.Integer()


class DiskFullSchema(ma.Schema):
    error = fields.String(metadata={"description": "the error of the write that failed"})
    since = fields.Integer(metadata={"description": "Unix time of the first failure"})


class StatusSchema(ma.Schema):
    version = fields.String()
    search_backend = fields.String()
    documents = fields.Integer()
    sources = fields.List(fields.Nested(SourceStatusSchema))
    recent_runs = fields.List(
        fields.Nested(RecentRunSchema),
        metadata={"description": "The latest scans that ended, newest first (the status page's Jobs)"},
    )
    queue = fields.Nested(QueueSchema)
    disk_full = fields.Dict(
        keys=fields.String(),
        values=fields.Nested(DiskFullSchema),
        metadata={
            "description": "The parts (index, database, thumbnails) whose last write failed for "
            "want of space, until a write of that part succeeds; {} when none"
        },
    )


class FailedGroupSchema(ma.Schema):
    message = fields.String()
    count = fields.Integer(metadata={"description": "failed files with this message in all"})
    paths = fields.List(fields.String(), metadata={"description": "those on this page"})


class FailedFilesSchema(ma.Schema):
    source_id = fields.String()
    source_name = fields.String()
    total = fields.Integer()
    page = fields.Integer()
    pages = fields.Integer()
    per_page = fields.Integer()
    messages = fields.List(
        fields.Dict(),
        metadata={"description": "[{message, count}] over all failed files, most frequent first"},
    )
    groups = fields.List(fields.Nested(FailedGroupSchema))


class FailedFilesArgsSchema(ma.Schema):
    page = fields.Integer(
        load_default=1, validate=validate.Range(min=1, max=1_000_000, error="must be a page number from 1")
    )


# --- saved searches -----------------------------------------------------------------------------


class SavedSearchCreateSchema(StrictSchema):
    name = fields.String(
        required=True, metadata={"description": "1 to 100 characters, unique among the user's searches"}
    )
    q = fields.String(required=True)
    source_id = fields.String(load_default=None, allow_none=True)
    type = fields.String(load_default=None, allow_none=True)
    sort = fields.String(load_default="relevance")


class SavedSearchSchema(ma.Schema):
    id = fields.Integer()
    name = fields.String()
    q = fields.String()
    source_id = fields.String(allow_none=True)
    type = fields.String(allow_none=True)
    sort = fields.String()
    created_at = fields.String()


# --- search and documents -----------------------------------------------------------------------


class CopySchema(ma.Schema):
    id = fields.String(metadata={"description": "the copy's document id"})
    path = fields.String()


class SearchResultSchema(ma.Schema):
    id = fields.String()
    path = fields.String()
    basename = fields.String()
    source_name = fields.String()
    type = fields.String()
    size_bytes = fields.Integer()
    modified_at = fields.Integer()
    snippet = fields.String()
    score = fields.Float()
    match = fields.String(metadata={"description": "words, meaning or both: what found this document"})
    container_id = fields.String(
        allow_none=True,
        dump_default=None,
        metadata={"description": "id of the archive or e-mail holding this member; null for files"},
    )
    thumbnail_url = fields.String(
        allow_none=True,
        metadata={
            "description": "/api/documents/{id}/thumbnail (a small JPEG, same auth as the "
            "document), or null when the document has no thumbnail"
        },
    )
    copies = fields.List(
        fields.Nested(CopySchema),
        dump_default=list,
        metadata={
            "description": "the other files holding the same text (among the sources the asker "
            "may see), or []: identical texts are listed once"
        },
    )


class SearchResponseSchema(ma.Schema):
    results = fields.List(fields.Nested(SearchResultSchema))
    total = fields.Integer()
    limit = fields.Integer()
    offset = fields.Integer()
    processing_time_ms = fields.Integer()
    facet_distribution = fields.Dict(
        keys=fields.String(),
        values=fields.Dict(keys=fields.String(), values=fields.Integer()),
        metadata={"description": "Only when `facets` was asked: {facet: {value: count}} over all matches"},
    )


class SimilarArgsSchema(StrictSchema):
    limit = fields.Integer(
        load_default=10, validate=validate.Range(min=1, max=50, error="must be between 1 and 50")
    )


class SimilarSchema(ma.Schema):
    results = fields.List(fields.Nested(SearchResultSchema))


class DocumentSchema(ma.Schema):
    id = fields.String()
    source_id = fields.String()
    source_name = fields.String()
    path = fields.String()
    basename = fields.String()
    extension = fields.String()
    type = fields.String()
    size_bytes = fields.Integer()
    modified_at = fields.Integer()
    indexed_at = fields.Integer()
    content = fields.String()
    title = fields.String(allow_none=True)
    metadata = fields.Dict()
    container_id = fields.String(
        allow_none=True,
        dump_default=None,
        metadata={"description": "id of the archive or e-mail holding this member; null for files"},
    )


class PreviewArgsSchema(ma.Schema):
    q = fields.String(load_default="")
    page = fields.Integer(
        load_default=1, validate=validate.Range(min=1, max=1_000_000, error="must be a page number from 1")
    )


class DownloadLinkSchema(ma.Schema):
    url = fields.String()
    expires_in = fields.Integer()
    filename = fields.String()


class DownloadArgsSchema(ma.Schema):
    token = fields.String(load_default="")
