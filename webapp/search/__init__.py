"""Search backend protocol, query/result types and the one function that picks the backend."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypedDict, cast, runtime_checkable

from webapp.search.query import TermMatcher, tokens
from webapp.search.snippets import build_snippet
from webapp.search.syntax import QuerySpec, parse_syntax

SORTS = ("relevance", "modified_at:desc", "modified_at:asc", "size_bytes:desc", "basename:asc")
BACKENDS = ("tantivy", "meilisearch")
# Meilisearch's names: `all` words must match; `last` drops words from the end, `frequency`
# the most common first, when too few documents match them all. The default is the one the
# relevance benchmark found best (docs/relevance.md).
MATCHING_STRATEGIES = ("all", "last", "frequency")
DEFAULT_MATCHING_STRATEGY = "frequency"
# `year` of the document's date (doc_date), UTC; `camera` of photos (EXIF make and model);
# `folder`: the subfolders of SearchQuery.folder_facet (relative names are the service's).
FACETS = ("type", "extension", "source_id", "year", "camera", "folder")
MAX_FACET_VALUES = 100  # per facet, the most frequent first (as Meilisearch's default)
FOLDER_EDGE = "\x1f"  # between a folder and its subfolder in the facet's index terms
_EXIF_DATE = re.compile(r"\s*(\d{4})[:\-](\d{2})[:\-](\d{2})(?:[ T](\d{2}):(\d{2})(?::(\d{2}))?)?")


class _DocFields(TypedDict):
    id: str  # `<source id>--<hash of the path>` (scanner.doc_id)
    source_id: str
    source_name: str
    path: str  # absolute; a member's is `<container path>!/<inner path>`
    basename: str
    extension: str
    type: str  # the extractor's type, `file` when none reads it
    size_bytes: int
    modified_at: int  # Unix seconds
    indexed_at: int  # Unix seconds
    content: str


class Doc(_DocFields, total=False):
    """One document as handed to `SearchBackend.upsert` and given back by `get`.

    A TypedDict, not a dataclass: a document is a JSON object at every hop (a helper's batch
    result in Redis, Tantivy's stored field, Meilisearch, the API's document), and `get`
    gives back the keys that were upserted, no more (a plain file's has no `container_id`).
    """

    title: str | None
    metadata: dict[str, Any]  # the extractor's, plus `ocr` once the OCR phase read it
    container_id: str | None  # the archive or e-mail holding a member
    # another document of its source holds the same text and is listed for both (its
    # primary: indexing/copies.py); a copy is found only where a filter could tell them apart
    copy: bool


DOC_FIELDS = tuple(Doc.__annotations__)  # every key, the required ones first


class _HitFields(TypedDict):
    id: str
    path: str
    basename: str
    source_name: str
    type: str
    size_bytes: int
    modified_at: int
    snippet: str  # HTML: escaped text, matches in <em>
    score: float
    container_id: str | None
    title: str | None  # the document's own (an e-mail's subject), None when it has none
    date: int  # doc_date: when it was sent (e-mail), taken (photo), else modified_at


class Hit(_HitFields, total=False):
    """One search result, as the API lists it (built by `search_hit` for every backend)."""

    match: str  # hybrid search only: words, meaning or both (search/hybrid.py)
    copies: list[dict[str, str]]  # the other files of the same text (services/copies.py)


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
    # These documents match as if the words did (scoring 0 for them) when they pass the
    # filters: meaning's confident documents, counted in `total` and the facets with the
    # words' matches (search/hybrid.py). Tantivy's; Meilisearch ranks meaning itself.
    also_ids: tuple[str, ...] = ()
    # The absolute folders whose direct subfolders the `folder` facet counts (the service
    # turns the asked folder, relative to the sources' roots, into these).
    folder_facet: tuple[str, ...] = ()
    # Copies match too (internal): a container's members are counted with those whose text
    # is listed under another file, their primary (search.folds).
    with_copies: bool = False

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


def collapses(query: SearchQuery) -> bool:
    """Whether the query leaves copies out (each identical text listed once, by its primary).
    Not under a filter that copies may differ on (a folder, a type or extension, a date, a
    size, a camera): the primary may be outside it while a copy is inside, so both are listed."""
    spec = query.syntax()
    return (
        not query.with_copies
        and query.type is None
        and not (spec.paths or spec.types or spec.extensions or spec.modified or spec.size or spec.cameras)
    )


# Containers whose own text is the list of what they hold (an archive's files, a mailbox's
# messages' names and subjects): where a member answers the query, it is listed, not they. A
# message's body is its own text: a message and its matching attachment are both listed.
FOLDED_TYPES = ("archive",)
# At most this many containers whose members match one query are left out (the engines'
# bucket limit); past it, the rest are listed beside their members.
MAX_FOLDED = 65_000


def folds(query: SearchQuery) -> bool:
    """Whether a container whose members match the query gives way to them (`folded`): when
    its words must match something (a listing by filters alone lists every document) and its
    type filters, if any, admit a container."""
    spec = query.syntax()
    asked = {t for t in (query.type, *spec.types) if t}
    return spec.has_positive_text and (not asked or bool(asked & set(FOLDED_TYPES)))


def naming_words(query: SearchQuery) -> list[str]:
    """The words of which one, in a container's file name, keeps it listed beside its
    matching members (`charts` finds charts.zip as well as what it holds): the query's
    words, folded as the index holds them."""
    return list(dict.fromkeys(tokens(query.syntax().text)))


def folded(query: SearchQuery, basename: str) -> bool:
    """Whether a container of FOLDED_TYPES named `basename`, which matches the query and holds
    a member that does too, is left out (its name holds none of the query's words)."""
    return not set(naming_words(query)) & set(tokens(basename))


@dataclass
class SearchPage:
    """One page of results with the exact total number of matches."""

    results: list[Hit]
    total: int
    processing_time_ms: int
    facet_distribution: dict[str, dict[str, int]] | None = None  # over all matches


@runtime_checkable
class SearchBackend(Protocol):
    """What the app needs from a search engine; writes are durable when they return."""

    def upsert(self, docs: list[Doc]) -> None:
        """Add or replace documents (one commit for the whole list)."""

    def delete_ids(self, ids: list[str]) -> None:
        """Remove documents by id; unknown ids are ignored."""

    def mark_copies(self, flags: dict[str, bool]) -> None:
        """Set `copy` ({id: flag}) on these documents, text and vectors kept."""

    def delete_source(self, source_id: str) -> None:
        """Remove every document of a source."""

    def rename_source(self, source_id: str, name: str) -> None:
        """Set `source_name` on every document of a source."""

    def get(self, doc_id: str) -> Doc | None:
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


def validate_doc(doc: Mapping[str, Any]) -> Doc:
    """A copy of `doc` with title, metadata and content set; raises ValueError naming the
    required fields it lacks."""
    missing = [k for k in DOC_FIELDS if k in Doc.__required_keys__ and k not in doc]
    if missing:
        raise ValueError(f"document {doc.get('id', '?')!r} lacks fields: {', '.join(missing)}")
    out = dict(doc)
    out["title"] = doc.get("title") or None
    out["metadata"] = dict(doc.get("metadata") or {})
    out["content"] = doc.get("content") or ""
    return cast(Doc, out)


def search_hit(
    doc: Mapping[str, Any], score: float, text: str | None, matcher: TermMatcher, snippet_length: int
) -> Hit:
    """One search result of a stored document (or a Meilisearch hit): its snippet is cut from
    `text` around the query's matches (its title, name or path when the text has none), and
    is empty with `snippet_length` 0 (a ranking only, search/hybrid.py)."""
    snippet = (
        build_snippet(
            text,
            matcher,
            snippet_length,
            fallbacks=(doc.get("title"), doc["basename"], doc["path"]),
            kind=doc["type"],
        )
        if snippet_length
        else ""
    )
    return {
        "id": doc["id"],
        "path": doc["path"],
        "basename": doc["basename"],
        "source_name": doc["source_name"],
        "type": doc["type"],
        "size_bytes": doc["size_bytes"],
        "modified_at": doc["modified_at"],
        "snippet": snippet,
        "score": score,
        "container_id": doc.get("container_id"),
        "title": doc.get("title") or None,
        # Meilisearch hands back the `date` it indexed; a stored document has its metadata
        "date": doc["date"] if isinstance(doc.get("date"), int) else doc_date(doc),
    }


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


def doc_year(when: int) -> int:
    """The UTC year of a time (Unix seconds; a document's doc_date), for the `year` facet."""
    return datetime.fromtimestamp(int(when), tz=UTC).year


def doc_date(doc: Mapping) -> int:
    """A document's date (Unix seconds) for the newest/oldest sorts, `modified:` and the
    `year` facet: when a photo was taken (EXIF DateTimeOriginal, read as UTC), when an e-mail
    was sent (its Date header), else the file's modification time."""
    meta = doc.get("metadata") or {}
    when = taken_at(meta.get("date_taken"))
    if when is None and doc.get("type") == "email":
        when = sent_at(meta.get("date"))
    return when if when is not None else int(doc["modified_at"])


def sent_at(value: object) -> int | None:
    """Unix seconds of an e-mail's sent date (ISO 8601, as the extractor writes its Date
    header; one without a zone read as UTC), None when unreadable or absurd."""
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    if when is None or not 1826 <= when.year <= 2200:
        return None
    return int((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp())


def taken_at(value: object) -> int | None:
    """Unix seconds of an EXIF date (`2019:05:03 14:30:00`), None when unreadable or absurd."""
    m = _EXIF_DATE.match(value) if isinstance(value, str) else None
    if m is None:
        return None
    try:
        parts = [int(p or 0) for p in m.groups()]
        when = datetime(*parts, tzinfo=UTC)  # type: ignore[misc]
    except ValueError:  # `0000:00:00 00:00:00`, a month 13
        return None
    return int(when.timestamp()) if 1826 <= when.year <= 2200 else None


def doc_camera(doc: Mapping) -> str | None:
    """The camera of a photo for the `camera` facet: its EXIF model, after the make unless
    the model starts with it (`Canon EOS 5D`, `NIKON D750`, `Apple iPhone 12`)."""
    meta = doc.get("metadata") or {}
    make, model = (_tag_text(meta.get(k)) for k in ("camera_make", "camera_model"))
    if not model:
        return make or None
    brand = make.split()[0].casefold() if make else ""
    if not brand or model.casefold().startswith(brand):
        return model
    return f"{make} {model}"


def _tag_text(value: object) -> str:
    if isinstance(value, list):
        value = value[0] if value else ""
    return " ".join(str(value).split())[:100] if value not in (None, "") else ""


def disk_folders(path: str) -> list[str]:
    """The folders on disk above a document (a member counts under its container's folder)."""
    outer = path.split("!/", 1)[0]
    return doc_folders(outer)


def folder_edges(path: str) -> list[str]:
    """`<folder>\x1f<subfolder>` for every folder on disk above a document and the next one
    down: the terms the `folder` facet counts a folder's subfolders by (a prefix look-up)."""
    folders = disk_folders(path)
    return [f"{a}{FOLDER_EDGE}{b}" for a, b in zip(folders, folders[1:], strict=False)]


def subfolders(counts: Mapping[str, int], parents: tuple[str, ...]) -> dict[str, int]:
    """Of folder -> count, the direct subfolders of any of `parents` (a server engine gives
    every folder; the Meilisearch backend keeps these)."""
    out: dict[str, int] = {}
    for folder, count in counts.items():
        parent = folder.rpartition("/")[0] or "/"
        if parent in parents and folder not in parents:
            out[folder] = out.get(folder, 0) + int(count)
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
