"""More like this: the documents closest in meaning to one document, among those the asker may
see (GET /api/documents/<id>/similar and the document page)."""

from __future__ import annotations

from webapp.models import User
from webapp.runtime import get_meaning, get_search
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
    found = get_meaning().similar(doc_id, sources, limit)
    near = {i: sim for i, sim in found if sim >= embedder.RELATED}
    if not near:
        return {"results": []}
    check = SearchQuery(
        q="", limit=len(near), snippet_length=200, within_ids=tuple(near), source_ids=query.source_ids
    )
    results = [
        dict(r, score=near[r["id"]], match=hybrid.MEANING, thumbnail_url=documents.thumbnail_url(r["id"]))
        for r in get_search().search(check).results
    ]
    ranked = sorted(results, key=lambda r: -r["score"])
    return {"results": copies.listed_once(ranked, visible, besides=doc)}  # each text once
