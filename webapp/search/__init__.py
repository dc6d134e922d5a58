"""Search backend protocol, query/result types and the one function that picks the backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

SORTS = ("relevance", "modified_at:desc", "modified_at:asc", "size_bytes:desc", "basename:asc")
BACKENDS = ("tantivy", "meilisearch")
# Meilisearch's names: `all` words must match; `last` drops words from the end, `frequency`
# the most common first, when too few documents match them all. The default is the one the
# relevance benchmark found best (docs/relevance.md).
MATCHING_STRATEGIES = ("all", "last", "frequency")
DEFAULT_MATCHING_STRATEGY = "frequency"
# Keys every upserted document carries (title may be None, metadata may be {}).
DOC_FIELDS = (
    "id", "source_id", "source_name", "path", "basename", "extension", "type",
    "size_bytes", "modified_at", "indexed_at", "content", "title", "metadata",
)
# Keys of one search result.
RESULT_FIELDS = (
    "id", "path", "basename", "source_name", "type", "size_bytes", "modified_at",
    "snippet", "score",
)


class SearchBackendError(RuntimeError):
    """The search engine failed or could not be reached (maps to 500 / degraded health)."""


@dataclass
class SearchQuery:
    """One validated search request (the API layer checks ranges and the sort name)."""

    q: str
    source_id: str | None = None
    type: str | None = None
    limit: int = 20
    offset: int = 0
    sort: str = "relevance"
    snippet_length: int = 300
    matching_strategy: str = DEFAULT_MATCHING_STRATEGY


@dataclass
class SearchPage:
    """One page of results with the exact total number of matches."""

    results: list[dict]
    total: int
    processing_time_ms: int


@runtime_checkable
class SearchBackend(Protocol):
    """What the app needs from a search engine; writes are durable when they return."""

    def upsert(self, docs: list[dict]) -> None:
        """Add or replace documents (one commit for the whole list)."""

    def delete_ids(self, ids: list[str]) -> None:
        """Remove documents by id; unknown ids are ignored."""

    def delete_source(self, source_id: str) -> None:
        """Remove every document of a source."""

    def rename_source(self, source_id: str, name: str) -> None:
        """Set `source_name` on every document of a source."""

    def get(self, doc_id: str) -> dict | None:
        """The full document as upserted, or None."""

    def search(self, query: SearchQuery) -> SearchPage:
        """Run a query: filters, sort, pagination, snippets, exact total."""

    def count(self, source_id: str | None = None) -> int:
        """Number of documents, overall or of one source."""

    def ids(self, source_id: str) -> set[str]:
        """All document ids of a source."""

    def health(self) -> str:
        """'ok' or a short error string."""

    def clear(self) -> None:
        """Remove every document."""


def validate_doc(doc: Mapping) -> dict:
    """A copy of `doc` with every field present; raises ValueError naming a missing field."""
    missing = [k for k in DOC_FIELDS if k not in doc and k not in ("title", "metadata")]
    if missing:
        raise ValueError(f"document {doc.get('id', '?')!r} lacks fields: {', '.join(missing)}")
    out = dict(doc)
    out["title"] = doc.get("title") or None
    out["metadata"] = dict(doc.get("metadata") or {})
    out["content"] = doc.get("content") or ""
    return out


def make_backend(settings: Mapping) -> SearchBackend:
    """Build the backend named by SEARCH_BACKEND from a settings mapping (e.g. app.config)."""
    name = (settings.get("SEARCH_BACKEND") or "tantivy").lower()
    if name == "tantivy":
        from webapp.search.tantivy_backend import TantivyBackend

        return TantivyBackend(
            settings.get("SEARCH_INDEX_DIR"),
            writer_timeout=float(settings.get("SEARCH_WRITER_TIMEOUT", 60)),
            writer_heap_mb=int(settings.get("SEARCH_WRITER_HEAP_MB", 128)),
        )
    if name == "meilisearch":
        from webapp.search.meili_backend import MeiliBackend

        url = settings.get("MEILI_URL")
        if not url:
            raise ValueError("MEILI_URL must be set when SEARCH_BACKEND is 'meilisearch'")
        return MeiliBackend(
            url,
            settings.get("MEILI_MASTER_KEY") or None,
            settings.get("MEILI_INDEX") or "trawl",
            task_timeout=float(settings.get("MEILI_TASK_TIMEOUT", 300)),
        )
    raise ValueError(f"SEARCH_BACKEND: must be one of {', '.join(BACKENDS)}, not {name!r}")
