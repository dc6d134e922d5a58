"""Meaning in search (hybrid search), the health of the embedding model, and the sources whose
vectors a request may use: those the asker sees, with `semantic` on."""

from __future__ import annotations

from webapp.extensions import db
from webapp.models import Source
from webapp.runtime import get_search, get_vectors
from webapp.search import SearchPage, SearchQuery, embedder, hybrid


def vector_sources(query: SearchQuery) -> list[str]:
    """The sources meaning may search for `query`: visible to the asker, meaning on."""
    rows = db.session.query(Source.id).filter(Source.semantic.is_(True))
    if query.source_ids is not None:
        rows = rows.filter(Source.id.in_(query.source_ids))
    if query.source_id is not None:
        rows = rows.filter(Source.id == query.source_id)
    return sorted(sid for (sid,) in rows)


def search(query: SearchQuery, ratio: float) -> SearchPage:
    """The search, with meaning when it applies: ranked by the backend itself when it can
    (Meilisearch's `hybrid`, search/meili_meaning.py), else fused by search/hybrid.py."""
    backend = get_search()
    vector, nearest = None, None
    if hybrid.uses_meaning(query, ratio):
        sources = vector_sources(query)
        if sources:
            vector = embedder.embed_query(query.syntax().text)
            if vector is not None and native(backend):
                return backend.search_hybrid(query, ratio, vector, embedder.RELATED, sources)
            store = get_vectors()
            nearest = lambda v, k: store.nearest(v, sources, k)  # noqa: E731
    return hybrid.search(backend, query, ratio, vector, nearest)


def native(backend) -> bool:
    """Whether the backend holds the vectors and ranks meaning itself (Meilisearch), rather
    than Trawl's vector store (search/vectors.py) beside it."""
    return bool(getattr(backend, "native_meaning", False))


def health() -> str:
    """`ok: <model>` or `unavailable: <why>` (search by words works either way)."""
    available, detail = embedder.status()
    return f"{'ok' if available else 'unavailable'}: {detail}"
