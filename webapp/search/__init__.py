"""Search backend protocol, query/result types and the one function that picks the backend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from webapp.search.syntax import QuerySpec, parse_syntax

SORTS = ("relevance", "modified_at:desc", "modified_at:asc", "size_bytes:desc", "basename:asc")
BACKENDS = ("tantivy", "meilisearch")
# Meilisearch's names: `all` words must match; `last` drops words from the end, `frequency`
# the most common first, when too few documents match them all. The default is the one the
# relevance benchmark found best (docs/relevance.md).
MATCHING_STRATEGIES = ("all", "last", "frequency")
DEFAULT_MATCHING_STRATEGY = "frequency"
FACETS = ("type", "extension", "source_id", "year")  # `year` of modified_at, UTC
MAX_FACET_VALUES = 100  # per facet, the most frequent first (as Meilisearch's default)
# Keys every upserted document carries (title may be None, metadata may be {}; container_id,
# the id of the archive or e-mail holding a member, is None or absent for plain files).
DOC_FIELDS = (
    "id",
    "source_id",
    "source_name",
    "path",
    "basename",
    "extension",
    "type",
    "size_bytes",
    "modified_at",
    "indexed_at",
    "content",
    "title",
    "metadata",
    "container_id",
)
# Keys of one search result.
RESULT_FIELDS = (
    "id",
    "path",
    "basename",
    "source_name",
    "type",
    "size_bytes",
    "modified_at",
    "snippet",
    "score",
    "container_id",
)


class SearchBackendError(RuntimeError):
    """The search engine failed or could not be reached (maps to 500 / degraded health)."""


class IndexRebuilding(SearchBackendError):
    """The index is being rewritten for a new schema in the background (maps to 503)."""


@dataclass
class SearchQuery:
    """One validated search request (the API layer checks ranges and the sort name)."""

    q: str
    source_id: str | None = None
    type: str | None = None
    limit: int = 20
    offset: int = 0
    sort: str = "relevance"
    snippet_length: int = 300  # 0 (internal): no snippet, the text is not read
    matching_strategy: str = DEFAULT_MATCHING_STRATEGY
    facets: tuple[str, ...] = ()
    # The sources the asker may see, filtered inside the query (None: every source; empty:
    # nothing). Results, total, facets and snippets all come from within them.
    source_ids: tuple[str, ...] | None = None
    spec: QuerySpec | None = None  # q's syntax, paths resolved; parsed from q when None
    # Only these documents (None: no such limit): meaning's candidates, checked against the
    # query's filters and the asker's sources by the backend (search/hybrid.py).
    within_ids: tuple[str, ...] | None = None

    def syntax(self) -> QuerySpec:
        """The query language terms of `q` (see search/syntax.py)."""
        if self.spec is None:
            self.spec = parse_syntax(self.q)
        return self.spec

    def effective_sort(self) -> str:
        """The sort to use: a query of only filters lists the newest documents first."""
        if self.sort == "relevance" and self.syntax().is_filter_only:
            return "modified_at:desc"
        return self.sort


@dataclass
class SearchPage:
    """One page of results with the exact total number of matches."""

    results: list[dict]
    total: int
    processing_time_ms: int
    facet_distribution: dict[str, dict[str, int]] | None = None  # over all matches


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

    def disk_bytes(self) -> int:
        """Size of the index on disk, in bytes (the engine's whole database for a server)."""

    def clear(self) -> None:
        """Remove every document."""


def validate_doc(doc: Mapping) -> dict:
    """A copy of `doc` with every field present; raises ValueError naming a missing field."""
    missing = [k for k in DOC_FIELDS if k not in doc and k not in ("title", "metadata", "container_id")]
    if missing:
        raise ValueError(f"document {doc.get('id', '?')!r} lacks fields: {', '.join(missing)}")
    out = dict(doc)
    out["title"] = doc.get("title") or None
    out["metadata"] = dict(doc.get("metadata") or {})
    out["content"] = doc.get("content") or ""
    return out


def doc_folders(path: str) -> list[str]:
    """Every folder above a document's path (an archive counts as one), for `path:` filters."""
    parts = path.split("/")
    folders = ["/"] if path.startswith("/") else []
    for end in range(1, len(parts)):
        folder = "/".join(parts[:end])
        if folder:
            folders.append(folder)
            if folder.endswith("!"):  # `a.zip!/member`: the archive holds the member too
                folders.append(folder[:-1])
    return folders


def doc_year(modified_at: int) -> int:
    """The UTC year of a modification time (Unix seconds), for the `year` facet."""
    return datetime.fromtimestamp(int(modified_at), tz=UTC).year


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
