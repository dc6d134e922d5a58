"""Meaning in Meilisearch: Trawl's passage vectors sent as a `userProvided` embedder, and
what the adapter asks and derives for a hybrid search and for similar documents.

The requests follow Meilisearch's documented API (v1.13, the version docker compose runs):

- Index settings: `embedders: {"trawl": {"source": "userProvided", "dimensions": 384}}`, named
  after no model: the vectors under it are the active model's (a change of model sends them all
  again: embed_phase.follow_model, with `NativeMeaning.made_by`). Any other embedder the index
  holds (`trawl-e5`, the name before) is set to null, which deletes it and its vectors.
- A document's vectors: `_vectors: {"trawl": {"embeddings": [[...], ...], "regenerate":
  false}}`, one array per passage (Meilisearch holds several vectors per document and ranks
  a document by its closest one, as Trawl's own store does). Every content chunk of a long
  document carries them, so whichever chunk `distinctAttribute: id` keeps has them.
  `{"trawl": null}` removes them (meaning switched off for the source).
- A search: `hybrid: {"embedder": "trawl", "semanticRatio": r}` and `vector` (the
  question embedded by the same bundled model, "query: " prefix); Meilisearch merges its
  keyword and its vector ranking by their ratio-weighted scores.
- Meaning's candidates: a pure vector search (`semanticRatio: 1.0`, `q` empty, the same
  filters and the sources with meaning on) for the CANDIDATES closest documents, with
  `retrieveVectors: true` (and `_vectors` among the attributes to retrieve) so that Trawl
  computes each one's cosine similarity itself: Meilisearch's vector scores are not on the
  scale `embedder.RELATED` was measured on.
- Similar documents: `POST /indexes/{uid}/similar` with the first chunk's `uid` and the
  embedder.

What Meilisearch does not say, the adapter derives, with Tantivy's meanings (search/hybrid.py):

- Meaning's documents: the candidates whose closest passage is at least `RELATED` from the
  question rank (`both` when the words find them too); those above the floor Tantivy uses
  (meaning_index.confident: they stand out of the question's nearest) may be listed when no
  word finds them.
- `match`: `words` when a keyword query (the same `q`, no `hybrid`) limited to the hits' ids
  (`id IN [...]`) returns the hit, `meaning` when it does not and the hit is above the floor,
  `both` when a related candidate is found by words. (Meilisearch's `_rankingScoreDetails`
  name the one ranking a hit was taken from, not whether the other found it too.)
- The list: Meilisearch's hybrid order, read from the first hit, less the hits that are
  neither words nor above the floor (its vector ranking reaches every embedded document);
  the page is cut from that list, so pages follow each other without gaps or repeats.
- `total` and the facets: the keyword count's, plus those of meaning's documents no word
  finds, counted by Meilisearch itself: a vector search limited to them with
  `rankingScoreThreshold` at the floor on its own scale (the lowest `_rankingScore` of the
  candidates above Trawl's floor: `floor_score`), which leaves any other document out of
  `totalHits` and `facetDistribution`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from webapp.search.embedder import DIMENSIONS
from webapp.search.hybrid import BOTH, MEANING, WORDS
from webapp.search.meili_query import any_of

EMBEDDER = "trawl"  # named after no model: a model change re-sends the vectors under it
EMBEDDERS = {EMBEDDER: {"source": "userProvided", "dimensions": DIMENSIONS}}
MIN_WINDOW = 20  # hits read at least for a page (twice what the page reaches, at least)
MAX_EXTRA = 1000  # hits read at most beyond what the page reaches, doubling while too few


def embedders(present: Iterable[str]) -> dict:
    """The `embedders` setting for an index that holds these: ours, and null for every other
    (an older name of ours), which Meilisearch deletes with its vectors."""
    return {**{name: None for name in present if name != EMBEDDER}, **EMBEDDERS}


def vectors_field(passages: np.ndarray | None) -> dict:
    """The `_vectors` value of a Meilisearch document: its passages (rows), or null."""
    if passages is None or not len(passages):
        return {EMBEDDER: None}
    rows = np.asarray(passages, dtype=np.float32).reshape(-1, DIMENSIONS)
    return {EMBEDDER: {"embeddings": [[float(x) for x in row] for row in rows], "regenerate": False}}


def vector_updates(uids: Mapping[str, list[str]], vectors: Mapping[str, np.ndarray | None]) -> list[dict]:
    """Partial document updates (`PUT /documents`, primary key `uid`) giving every chunk of
    each document its passages ({doc id: [chunk uid...]}, {doc id: (n, 384) array})."""
    out = []
    for doc_id, matrix in vectors.items():
        field = vectors_field(matrix)
        out += [{"uid": uid, "_vectors": field} for uid in uids.get(doc_id, [])]
    return out


def hybrid_params(vector: np.ndarray, ratio: float) -> dict:
    """The search parameters that add meaning to a query."""
    return {
        "hybrid": {"embedder": EMBEDDER, "semanticRatio": float(ratio)},
        "vector": [float(x) for x in np.asarray(vector, dtype=np.float32).reshape(DIMENSIONS)],
    }


def related_query(
    index_uid: str, vector: np.ndarray, filter_: str | None, sources: Iterable[str], limit: int
) -> dict:
    """A pure vector search (no words) for the `limit` documents closest to the question,
    within the query's filter and the sources with meaning on."""
    within = any_of("source_id", sources)  # none: nothing (as grants)
    return {
        "indexUid": index_uid,
        "q": "",
        "limit": limit,
        "attributesToRetrieve": ["id", "_vectors"],
        "retrieveVectors": True,
        "showRankingScore": True,  # the floor on Meilisearch's scale (floor_score)
        "filter": f"({filter_}) AND {within}" if filter_ else within,
        **hybrid_params(vector, 1.0),
    }


def passages_of(hit: Mapping) -> np.ndarray | None:
    """The passage vectors Meilisearch returned with a hit (`retrieveVectors`), or None.
    Accepts both shapes it writes: {"embeddings": [...], "regenerate": ..} and a bare list."""
    value = (hit.get("_vectors") or {}).get(EMBEDDER)
    if isinstance(value, Mapping):
        value = value.get("embeddings")
    if not value:
        return None
    matrix = np.asarray(value, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    return matrix.reshape(-1, DIMENSIONS)


def similarity(question: np.ndarray, passages: np.ndarray | None) -> float | None:
    """Cosine similarity of the question and a document's closest passage (None: no vectors).
    Both sides are L2-normalised by the embedder; normalised again here for safety."""
    if passages is None or not len(passages):
        return None
    q = np.asarray(question, dtype=np.float32).reshape(DIMENSIONS)
    q = q / max(float(np.linalg.norm(q)), 1e-9)
    rows = passages / np.maximum(np.linalg.norm(passages, axis=1, keepdims=True), 1e-9)
    return float(np.max(rows @ q))


def related(hits: Iterable[Mapping], question: np.ndarray, min_similarity: float) -> dict[str, float]:
    """{doc id: similarity} of the hits related to the question, closest first."""
    found: dict[str, float] = {}
    for hit in hits:
        sim = similarity(question, passages_of(hit))
        if sim is not None and sim >= min_similarity and hit["id"] not in found:
            found[hit["id"]] = sim
    return dict(sorted(found.items(), key=lambda item: -item[1]))


def classify(
    hits: Iterable[Mapping], by_words: set[str], candidates: Mapping[str, float], confident: Iterable[str]
) -> list[tuple[Mapping, str]]:
    """The hits kept, in Meilisearch's order, each with its `match`: words (a keyword query
    finds it), both (words, and one of the related candidates), meaning (no word matched,
    and above the floor: `confident`), as with Tantivy (search/hybrid.py). Other hits are
    left out."""
    sure = set(confident)
    out = []
    for hit in hits:
        doc_id = hit["id"]
        if doc_id in by_words:
            out.append((hit, BOTH if doc_id in candidates else WORDS))
        elif doc_id in sure:
            out.append((hit, MEANING))
    return out


def floor_score(hits: Iterable[Mapping], confident: Iterable[str]) -> float:
    """The floor on Meilisearch's own scale: the lowest `_rankingScore` of the vector search
    among the documents above Trawl's floor (its vector score orders as the cosine does)."""
    sure = set(confident)
    scores = [float(h.get("_rankingScore", 0.0)) for h in hits if h["id"] in sure]
    return min(scores, default=1.0)


def floor_params(vector: np.ndarray, score: float) -> dict:
    """The parameters that make a query count only meaning's documents above the floor:
    a vector search (no words) with `rankingScoreThreshold`, which leaves documents under
    it out of the hits, `totalHits` and the facet distribution."""
    return {"q": "", **hybrid_params(vector, 1.0), "rankingScoreThreshold": max(0.0, min(1.0, score))}
