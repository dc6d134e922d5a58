"""Small read-only queries the web UI needs beyond the API's services (filter choices, previews)."""

from __future__ import annotations

import math

from webapp.extensions import db
from webapp.models import IndexedFile, Source
from webapp.services import documents, sources, status

MAX_PAGES_SCANNED = 50  # looking for the first page with a match stops here (huge documents)


def source_choices() -> list[tuple[str, str]]:
    """(id, name) of every source, ordered by name, for the search filter."""
    return [(sid, name) for sid, name in
            db.session.query(Source.id, Source.name).order_by(Source.name, Source.id)]


def document_types() -> list[str]:
    """The document types the index holds, sorted (the search filter's choices)."""
    rows = db.session.query(IndexedFile.doc_type).distinct()
    return sorted({t for (t,) in rows if t})


def document_total() -> int:
    """How many files the database records across all sources."""
    return db.session.query(IndexedFile.id).count()


def first_match_page(doc: dict, q: str) -> int:
    """The first preview page holding a match of q (1 when none is found)."""
    content = doc.get("content") or ""
    pages = max(1, math.ceil(len(content) / documents.PREVIEW_PAGE_CHARS))
    if not q.strip() or pages == 1:
        return 1
    for page in range(1, min(pages, MAX_PAGES_SCANNED) + 1):
        if documents.text_page(doc, q, page)["matches"]:
            return page
    return 1


def source_rows() -> list[dict]:
    """Per source, ordered by name: its API object ("source") and its status object ("info")."""
    by_source = sources.counts()
    rows = []
    for source in db.session.query(Source).order_by(Source.name, Source.id):
        counts = by_source.get(source.id, {})
        rows.append({"source": sources.to_json(source, counts),
                     "info": status.source_status(source, counts)})
    return rows
