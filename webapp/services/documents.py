"""Documents: search (for the API, the page and the CLI), one full document, thumbnails.

The document's file (opening it, members of containers, download links) is `files.py`; what
the document page shows of it (text pages, images, PDF pages, Markdown, highlighting) is
`previews.py`.
"""

from __future__ import annotations

import os
from urllib.parse import quote

from flask import current_app
from sqlalchemy import select

from webapp.exceptions import NotFound
from webapp.extensions import db
from webapp.indexing import background, scanner, thumbstore
from webapp.indexing.runstats import FileStatus
from webapp.metrics import search_duration
from webapp.models import IndexedFile, User
from webapp.runtime import get_redis, get_search
from webapp.search import Doc, SearchPage, SearchQuery
from webapp.services import copies, meaning, search_args
from webapp.services.access import can_see, visible_sources


def search(args: dict, user: User | None) -> dict:
    """Run a search request loaded by search_args.load (or the API's schema) over the sources
    `user` may see (None: all); 400 when its query language, type or source is bad. The
    response echoes limit and offset. A container whose members match is listed as those
    members (search.folds, decided in the engine's query: total and facets count what is
    listed, and pages never repeat a hit)."""
    background.searched(get_redis())  # the background phases step aside meanwhile
    with search_duration.labels(current_app.config["SEARCH_BACKEND"]).time():
        visible = visible_sources(user)
        query: SearchQuery = search_args.to_query(args, visible)
        page: SearchPage = meaning.search(query, search_args.semantic_ratio(args))
    results = once_per_file(page.results)
    copies.attach(results, visible)
    for result in results:
        result["thumbnail_url"] = thumbnail_url(result["id"])
    out = {
        "results": results,
        "total": page.total,
        "limit": query.limit,
        "offset": query.offset,
        "processing_time_ms": page.processing_time_ms,
    }
    if query.facets:
        out["facet_distribution"] = facets = dict(page.facet_distribution or {})
        if "folder" in facets:  # relative to the sources' roots, as `path:` reads them
            shown = None if query.source_ids is None else query.source_ids
            facets["folder"] = search_args.relative_folders(facets["folder"], shown)
    return out


def once_per_file(results: list[dict]) -> list[dict]:
    """Each file once: sources allowed to overlap index the same file (the same real path:
    roots are stored resolved) under each of them; the first, best-placed hit stays."""
    seen: set[str] = set()
    kept = []
    for result in results:
        if result["path"] not in seen:
            seen.add(result["path"])
            kept.append(result)
    return kept


def get(doc_id: str, user: User | None) -> Doc:
    """The full indexed document, or 404 (also when `user` may not see its source).

    Access is decided from the id (`source--hash`, the contract's form) before anything is
    read: a hidden document's id then takes the same path, and the same time, as an id that
    never existed, so neither the answer nor its time tells whether the file is there."""
    source_id = scanner.source_of(doc_id)
    if source_id is None or not can_see(visible_sources(user), source_id):
        raise NotFound(_missing(doc_id))
    doc = get_search().get(doc_id)
    if doc is None or doc["source_id"] != source_id:
        raise NotFound(_missing(doc_id))
    return doc


def read_problem(doc: Doc) -> str | None:
    """Why the document's file was not read (its record's message: a locked PDF, a file too
    large, a timeout), or None when it was read."""
    return db.session.scalar(
        select(IndexedFile.error_message).where(
            IndexedFile.source_id == doc["source_id"],
            IndexedFile.path == doc["path"],
            IndexedFile.status != FileStatus.SUCCESS,
        )
    )


def _missing(doc_id: str) -> str:
    return f"Document '{doc_id}' not found"


# -- thumbnails ----------------------------------------------------------------------------------


def thumbnail_url(doc_id: str) -> str | None:
    """The API path of a document's thumbnail, or None when it has none."""
    if not thumbstore.exists(current_app.config["DATA_DIR"], doc_id):
        return None
    return f"/api/documents/{quote(doc_id)}/thumbnail"


def thumbnail_file(doc_id: str, user: User | None) -> str:
    """The thumbnail file of an indexed document; 404 when the document (for `user`) or its
    thumbnail is missing."""
    get(doc_id, user)
    path = thumbstore.path_for(current_app.config["DATA_DIR"], doc_id)
    if path is None or not os.path.isfile(path):
        raise NotFound("This document has no thumbnail")
    return path
