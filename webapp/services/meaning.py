"""Meaning in search (hybrid search), the health of the embedding model, and the sources whose
vectors a request may use: those the asker sees, with `semantic` on."""

from __future__ import annotations

from webapp.extensions import db
from webapp.models import Source
from webapp.runtime import get_meaning, get_search
from webapp.search import SearchPage, SearchQuery, hybrid


def vector_sources(query: SearchQuery) -> list[str]:
    """The sources meaning may search for `query`: visible to the asker, meaning on."""
    rows = db.session.query(Source.id).filter(Source.semantic.is_(True))
    if query.source_ids is not None:
        rows = rows.filter(Source.id.in_(query.source_ids))
    if query.source_id is not None:
        rows = rows.filter(Source.id == query.source_id)
    return sorted(sid for (sid,) in rows)


def search(query: SearchQuery, ratio: float) -> SearchPage:
    """The search, with meaning when it applies (search/meaning_index.py ranks it: fused by
    search/hybrid.py, or by the engine itself)."""
    if hybrid.uses_meaning(query, ratio):
        sources = vector_sources(query)
        if sources:
            return get_meaning().search(query, ratio, sources)
    return hybrid.words_only(get_search(), query)


def health() -> str:
    """`ok: <model>` or `unavailable: <why>` (search by words works either way)."""
    return get_meaning().health()
