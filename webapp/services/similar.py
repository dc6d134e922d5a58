"""More like this: the documents closest in meaning to one document, among those the asker may
see (GET /api/documents/<id>/similar and the document page's lazily loaded list).

Two rules keep the list worth opening (docs/relevance.md, "Similar documents"): the floor
search uses for documents no word reaches (meaning_index.confident: a neighbour stands out of
the document's nearest), and kinds kept apart: a text of prose lists prose, a text with
little prose (configuration, data markup, code, a photo's or a song's metadata) lists its own
kind. Short markup and metadata texts sit near everything; left beside prose they filled the
lists of long reports (hubs).
"""

from __future__ import annotations

import html

from webapp.models import User
from webapp.runtime import get_meaning, get_search
from webapp.search import Hit, SearchQuery, embedder, hybrid, meaning_index
from webapp.services import copies, documents, meaning
from webapp.services.access import visible_sources

# Types whose text is not prose: settings and data markup, code, spreadsheets' cells, the
# metadata of photos, recordings and archives (their member lists), and unread files.
LITTLE_PROSE = frozenset({"config", "code", "xlsx", "image", "raw_image", "media", "archive", "file"})
PROSE_SAMPLE = 200  # characters of a text's beginning read (a result's snippet holds as many)
PROSE_LETTERS = 0.8  # share of letters and spaces from which a text reads as prose
PROSE_WORDS = 4  # words at least in that beginning (a line of prose, not a key and a value)
# The floor: a neighbour stands out of the document's nearest (meaning_index.standing_out), at
# least the model's RELATED (search's CONFIDENT was measured for questions, not for neighbours)
SIMILAR_OUTLIER = meaning_index.OUTLIER


def prose(kind: str, text: str) -> bool:
    """Whether a document of this type whose text begins so reads as prose: not a type of
    little prose, and its beginning mostly words (not JSON, CSV or a list of numbers)."""
    if kind in LITTLE_PROSE:
        return False
    sample = " ".join(text[: PROSE_SAMPLE * 2].split())[:PROSE_SAMPLE]
    if len(sample.split()) < PROSE_WORDS:
        return False
    return sum(c.isalpha() or c == " " for c in sample) >= PROSE_LETTERS * len(sample)


def similar(doc_id: str, user: User | None, limit: int = 10) -> dict:
    """{"results": [search result...]} closest first; 404 for a document `user` may not see;
    an empty list while the document has no vectors (not embedded yet, or meaning off)."""
    doc = documents.get(doc_id, user)  # 404 unless visible
    visible = visible_sources(user)
    granted = None if visible is None else tuple(sorted(visible))
    sources = meaning.vector_sources(SearchQuery(q="", source_ids=granted))
    if not sources:
        return {"results": []}
    near = get_meaning().similar(doc_id, sources, hybrid.CANDIDATES)
    kept = meaning_index.standing_out(near, SIMILAR_OUTLIER, embedder.RELATED)
    if not kept:
        return {"results": []}
    check = SearchQuery(
        q="", limit=len(kept), snippet_length=PROSE_SAMPLE, within_ids=tuple(kept), source_ids=granted
    )
    own = prose(doc["type"], doc.get("content") or "")
    ranked = neighbours(own, get_search().search(check).results, dict(near), len(kept))
    # each text once, and not the document's own copies (services/copies.py)
    return {"results": copies.listed_once(ranked, visible, besides=doc)[:limit]}


def neighbours(own_prose: bool, hits: list[Hit], sims: dict[str, float], limit: int) -> list[Hit]:
    """The hits of the document's kind (prose or not), closest first, each built once with
    its similarity, `match` and thumbnail."""
    kind = [h for h in hits if prose(h["type"], html.unescape(_plain(h["snippet"]))) == own_prose]
    kind.sort(key=lambda h: -sims[h["id"]])
    return [
        Hit(
            **{
                **h,
                "score": sims[h["id"]],
                "match": hybrid.MEANING,
                "thumbnail_url": documents.thumbnail_url(h["id"]),
            }
        )
        for h in kind[:limit]
    ]


def _plain(snippet: str) -> str:
    """A snippet's text without its marks (`<em>`, an ellipsis)."""
    return snippet.replace("<em>", "").replace("</em>", "").strip("…")
