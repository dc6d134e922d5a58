"""More like this: the documents closest in meaning to one document, among those the asker may
see (GET /api/documents/<id>/similar and the document page)."""

from __future__ import annotations

import numpy as np

from webapp.models import User
from webapp.runtime import get_search, get_vectors
from webapp.search import SearchQuery, embedder, hybrid
from webapp.services import copies, documents, meaning
from webapp.services.access import visible_sources


def similar(doc_id: str, user: User | None, limit: int = 10) -> dict:
    """{"results": [search result...]} closest first; 404 for a document `user` may not see;
    an empty list while the document has no vectors (not embedded yet, or meaning off)."""
    doc = documents.get(doc_id, user)  # 404 unless visible
    visible = visible_sources(user)
    query = SearchQuery(
        q="", limit=limit, snippet_length=200, source_ids=None if visible is None else tuple(sorted(visible))
    )
    sources = meaning.vector_sources(query)
    if not sources:
        return {"results": []}
    near = {i: sim for i, sim in _nearest(doc_id, sources, limit) if sim >= embedder.RELATED}
    if not near:
        return {"results": []}
    check = SearchQuery(
        q="", limit=len(near), snippet_length=200, within_ids=tuple(near), source_ids=query.source_ids
    )
    found = get_search().search(check).results
    for result in found:
        result["score"] = near[result["id"]]
        result["match"] = hybrid.MEANING
        result["thumbnail_url"] = documents.thumbnail_url(result["id"])
    ranked = sorted(found, key=lambda r: -r["score"])
    return {"results": copies.listed_once(ranked, visible, besides=doc)}  # each text once


def _nearest(doc_id: str, sources: list[str], limit: int) -> list[tuple[str, float]]:
    """(doc id, similarity) of the documents closest to `doc_id` among these sources: from
    Meilisearch's similar documents route when it holds the vectors, else from the vector
    store (the mean of the document's passages against each one's closest passage)."""
    backend = get_search()
    if meaning.native(backend):
        return backend.similar(doc_id, tuple(sources), limit)
    passages = get_vectors().vectors_of(doc_id)
    if passages is None:
        return []
    centre = passages.mean(axis=0)
    centre /= max(float(np.linalg.norm(centre)), 1e-9)
    return get_vectors().nearest(centre, sources, limit, exclude=doc_id)
