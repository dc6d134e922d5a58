"""Meaning behind one seam: where the passage vectors live and how a question or a document
finds its nearest documents.

Two implementations, chosen in one place (`make_meaning`, called by runtime.get_meaning from
SEARCH_BACKEND):

- `UsearchMeaning`: Trawl's own vector store beside Tantivy (search/vectors.py); a search with
  meaning fuses the engine's keyword ranking with the store's (search/hybrid.py).
- `NativeMeaning`: an engine that holds the vectors in its documents and ranks meaning itself
  (Meilisearch's `userProvided` embedder and `hybrid` search, search/meili_meaning.py).

Callers pass text: the question is embedded here (by the bundled model, search/embedder.py),
so a caller never handles a vector nor knows where vectors are kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol, runtime_checkable

import numpy as np

from webapp.search import SearchBackend, SearchPage, SearchQuery, embedder, hybrid
from webapp.search.vectors import VectorStore

Scored = list[tuple[str, float]]  # (doc id, cosine similarity), best first
CANDIDATES = hybrid.CANDIDATES
OUTLIER = 2.0  # standard deviations above the nearest's mean: similar documents' floor
MIN_SAMPLE = 20  # candidates from which their spread is read
MIN_SPREAD = 0.005  # a spread below it (near-equal similarities) is taken as this


@runtime_checkable
class MeaningIndex(Protocol):
    """What the app needs from wherever the passage vectors live."""

    ranks_natively: bool  # the engine fuses words and meaning itself (no search/hybrid.py)

    def add(self, source_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Replace the passages of these documents ({doc id: (n, 384) array}); an empty
        array removes the document's vectors."""

    def delete_ids(self, doc_ids: Iterable[str]) -> None:
        """Remove the vectors of these documents (being deleted); unknown ids are ignored."""

    def delete_source(self, source_id: str) -> None:
        """Remove every vector of a source (deleted, or meaning switched off)."""

    def nearest(self, text: str, sources: Iterable[str], k: int) -> Scored:
        """The k documents of these sources closest to a question: (doc id, similarity)."""

    def similar(self, doc_id: str, sources: Iterable[str], k: int) -> Scored:
        """The k documents of these sources closest to one document (not itself)."""

    def search(self, query: SearchQuery, ratio: float, sources: list[str]) -> SearchPage:
        """A page of `query` ranked by words and meaning; `sources`: those whose vectors the
        asker may use."""

    def vectors_of(self, doc_id: str) -> np.ndarray | None:
        """A document's passages ((n, 384) float32), or None when it has none."""

    def health(self) -> str:
        """`ok: <model>` or `unavailable: <why>` (search by words works either way)."""

    def problem(self, source_id: str) -> str | None:
        """Why the source's vectors cannot be read (it is left out of meaning), or None."""

    def check(self, source_id: str) -> str | None:
        """`problem`, with every stored byte checked (verify)."""

    def merge(self, source_id: str) -> None:
        """Housekeeping after writes (the store merges its small segments)."""

    def sweep(self) -> None:
        """Remove what killed writers left behind (temporary files), as a process starts."""

    def made_by(self) -> str:
        """What the vectors this index holds are recorded as made by (embed_phase.follow_model
        embeds everything again when the record names something else)."""


def question(text: str) -> np.ndarray | None:
    """The question's vector (None: the model is unavailable)."""
    return embedder.embed_query(text)


def judged(near: Scored) -> hybrid.Meaning:
    """What meaning says of a question from its nearest documents: those at least RELATED
    rank; those above the floor (`confident`) may be listed without a word."""
    related = {doc_id: sim for doc_id, sim in near if sim >= embedder.RELATED}
    return hybrid.Meaning(related, frozenset(confident(near)))


def confident(near: Scored, floor: float | None = None) -> list[str]:
    """The documents meaning is confident enough about to list when no word reaches them:
    those at least the model's CONFIDENT similar to the question (`floor` overrides it). A
    question of another field reaches no document that close, while a question in other
    words reaches its text (docs/relevance.md, "The floor")."""
    least = embedder.CONFIDENT if floor is None else floor
    return [doc_id for doc_id, sim in near if sim >= least]


def standing_out(near: Scored, outlier: float = OUTLIER, floor: float | None = None) -> list[str]:
    """The neighbours that stand out of the nearest: at least `outlier` standard deviations
    above their mean and at least `floor` (the model's RELATED). Similar documents use it
    (services/similar.py): it keeps hubs, short texts near everything, out of the lists. With
    fewer than MIN_SAMPLE candidates (a small collection) the floor alone decides."""
    least = embedder.RELATED if floor is None else floor
    if len(near) < MIN_SAMPLE:
        return [doc_id for doc_id, sim in near if sim >= least]
    sims = np.array([sim for _, sim in near], dtype=np.float64)
    cut = float(sims.mean()) + outlier * max(float(sims.std()), MIN_SPREAD)
    return [doc_id for doc_id, sim in near if sim >= max(cut, least)]


def centre(passages: np.ndarray) -> np.ndarray:
    """The unit mean of a document's passages: what the document is about as a whole."""
    mean = np.asarray(passages, dtype=np.float32).mean(axis=0)
    return mean / max(float(np.linalg.norm(mean)), 1e-9)


def model_health() -> str:
    """`ok: <model>` or `unavailable: <why>`."""
    available, detail = embedder.status()
    return f"{'ok' if available else 'unavailable'}: {detail}"


class UsearchMeaning:
    """Vectors in Trawl's store (a folder of usearch segments per source) beside a keyword
    engine."""

    ranks_natively = False

    def __init__(self, backend: SearchBackend, store: VectorStore) -> None:
        self.backend = backend
        self.store = store

    def add(self, source_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Replace these documents' passages (one segment); an empty array removes them."""
        self.store.add(source_id, dict(vectors))

    def delete_ids(self, doc_ids: Iterable[str]) -> None:
        """Remove these documents' passages."""
        self.store.delete_ids(doc_ids)

    def delete_source(self, source_id: str) -> None:
        """Remove the source's vector files."""
        self.store.delete_source(source_id)

    def nearest(self, text: str, sources: Iterable[str], k: int) -> Scored:
        """The store's closest documents to the question (none without the model)."""
        vector = question(text)
        return [] if vector is None else self.store.nearest(vector, list(sources), k)

    def similar(self, doc_id: str, sources: Iterable[str], k: int) -> Scored:
        """The documents whose best passage is closest to the document's centre."""
        passages = self.store.vectors_of(doc_id)
        if passages is None or not len(passages):
            return []
        return self.store.nearest(centre(passages), list(sources), k, exclude=doc_id)

    def search(self, query: SearchQuery, ratio: float, sources: list[str]) -> SearchPage:
        """The engine's keyword ranking fused with the store's (search/hybrid.py)."""
        text = query.syntax().text
        return hybrid.search(
            self.backend, query, ratio, lambda: judged(self.nearest(text, sources, CANDIDATES))
        )

    def vectors_of(self, doc_id: str) -> np.ndarray | None:
        """The document's passages in the store."""
        return self.store.vectors_of(doc_id)

    def health(self) -> str:
        """The model's health."""
        return model_health()

    def problem(self, source_id: str) -> str | None:
        """Why the source's segments cannot be read, or None."""
        return self.store.problem(source_id)

    def check(self, source_id: str) -> str | None:
        """`problem`, and every file against its checksum."""
        return self.store.check(source_id)

    def merge(self, source_id: str) -> None:
        """Merge the source's small segments (search/vectors.py)."""
        self.store.merge(source_id)

    def sweep(self) -> None:
        """Remove the temporary files of killed vector writes."""
        self.store.sweep()

    def made_by(self) -> str:
        """The model (`embedder.model_id()`): the store keeps nothing else of it."""
        return embedder.model_id()


class NativeEngine(SearchBackend, Protocol):
    """A search engine that holds the vectors itself (search/meili_backend.py)."""

    embedder_name: str  # the name the engine keeps Trawl's vectors under

    def set_vectors(self, vectors: Mapping[str, np.ndarray]) -> None: ...
    def clear_vectors(self, source_id: str) -> None: ...
    def vectors_of(self, doc_id: str) -> np.ndarray | None: ...
    def nearest(self, vector: np.ndarray, sources: list[str], k: int) -> Scored: ...
    def similar(self, doc_id: str, sources: tuple[str, ...] | None, k: int) -> Scored: ...
    def search_hybrid(
        self, query: SearchQuery, ratio: float, vector: np.ndarray, sources: list[str]
    ) -> SearchPage: ...


class NativeMeaning:
    """Vectors held in the engine's own documents (Meilisearch), which ranks meaning itself."""

    ranks_natively = True

    def __init__(self, engine: NativeEngine) -> None:
        self.engine = engine

    def add(self, source_id: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Give these documents their passages (an empty array removes them)."""
        self.engine.set_vectors(vectors)

    def delete_ids(self, doc_ids: Iterable[str]) -> None:
        """Nothing: the vectors are fields of the documents, deleted with them."""

    def delete_source(self, source_id: str) -> None:
        """Remove the vectors of the source's documents (a partial update of each: slow,
        hence run by a job when meaning is switched off; nothing left once it is deleted)."""
        self.engine.clear_vectors(source_id)

    def nearest(self, text: str, sources: Iterable[str], k: int) -> Scored:
        """The engine's pure vector search for the question."""
        vector = question(text)
        return [] if vector is None else self.engine.nearest(vector, list(sources), k)

    def similar(self, doc_id: str, sources: Iterable[str], k: int) -> Scored:
        """The engine's similar documents route."""
        return self.engine.similar(doc_id, tuple(sources), k)

    def search(self, query: SearchQuery, ratio: float, sources: list[str]) -> SearchPage:
        """The engine's own hybrid search (words alone when the model is unavailable)."""
        vector = question(query.syntax().text)
        if vector is None:
            return hybrid.words_only(self.engine, query)
        return self.engine.search_hybrid(query, ratio, vector, sources)

    def vectors_of(self, doc_id: str) -> np.ndarray | None:
        """The document's passages as the engine holds them."""
        return self.engine.vectors_of(doc_id)

    def health(self) -> str:
        """The model's health (the engine's is the search backend's)."""
        return model_health()

    def problem(self, source_id: str) -> str | None:
        """None: the engine's own files are the search backend's health."""
        return None

    def check(self, source_id: str) -> str | None:
        """None (as `problem`)."""
        return None

    def merge(self, source_id: str) -> None:
        """Nothing: the engine keeps its own files."""

    def sweep(self) -> None:
        """Nothing: the engine keeps its own files."""

    def made_by(self) -> str:
        """The model and the engine's embedder the vectors are sent to: a new name (the
        embedder was `trawl-e5` before) is an empty embedder, to be filled again."""
        return f"{embedder.model_id()} as {self.engine.embedder_name}"


def make_meaning(settings: Mapping, backend: SearchBackend, store: VectorStore) -> MeaningIndex:
    """The meaning index for SEARCH_BACKEND: the engine's own for Meilisearch, else the store."""
    if (settings.get("SEARCH_BACKEND") or "tantivy").lower() == "meilisearch":
        return NativeMeaning(backend)  # type: ignore[arg-type]
    return UsearchMeaning(backend, store)
