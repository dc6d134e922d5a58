"""Meilisearch search backend (official client).

Long contents: Meilisearch indexes at most 65,535 word positions per attribute and silently
ignores words past that (a hard separator such as `.` counts 8 positions). We split the
content of a document into chunks whose estimated position count stays under 60,000, store
each chunk as its own Meilisearch document (`uid` = `<id>_c<n>`, the other fields copied),
and collapse chunks with `distinctAttribute: id`, so a word anywhere in a long file is found
and results and totals count documents, not chunks. `get` joins the chunks back in order.

Meaning (hybrid search, similar documents): Trawl's passage vectors go to Meilisearch as a
`userProvided` embedder and searches use its own `hybrid` parameter; what is sent and what
is derived from the answers is in search/meili_meaning.py.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator

import meilisearch
import numpy as np
from meilisearch.errors import MeilisearchError

from webapp.search import (
    FOLDED_TYPES,
    MAX_FACET_VALUES,
    Doc,
    Hit,
    SearchBackendError,
    SearchPage,
    SearchQuery,
    disk_folders,
    doc_camera,
    doc_date,
    doc_folders,
    doc_year,
    embedder,
    folded,
    folds,
    ranking,
    search_hit,
    subfolders,
    validate_doc,
)
from webapp.search import meili_meaning as meaning
from webapp.search.hybrid import CANDIDATES
from webapp.search.meaning_index import confident
from webapp.search.meili_query import any_of, meili_filters, meili_q, quote
from webapp.search.query import TOKEN_RE, ParsedQuery, TermMatcher, parse_query

MAX_POSITIONS = 60_000  # below the engine's 65,535 limit, with margin for our estimate
HARD_SEPARATOR_COST = 8
_HARD_SEPARATORS = re.compile(r"[.!?;:\n]")
_WORD_RE = re.compile(r"\S+\s*|\s+")
PAGE = 1000  # documents per page when listing, per batch when writing
# Containers matching one query that are checked for matching members (search.folds): the
# index's maxValuesPerFacet, so the `container_id` facet counts every one of them.
FOLDED_LIMIT = 1000
SORTS = {  # newest/oldest: by the document's date (doc_date: when a photo was taken)
    "modified_at:desc": "date:desc",
    "modified_at:asc": "date:asc",
    "size_bytes:desc": "size_bytes:desc",
    "basename:asc": "basename_sort:asc",
}
RESULT_ATTRIBUTES = [
    "id",
    "path",
    "basename",
    "source_name",
    "type",
    "size_bytes",
    "modified_at",
    "title",
    "container_id",
    "date",
]
INDEX_SETTINGS = {
    "searchableAttributes": ["title", "basename", "path", "content"],  # order = weight
    "filterableAttributes": [
        "id",
        "source_id",
        "type",
        "extension",
        "modified_at",
        "size_bytes",
        "year",
        "folders",
        "chunk",
        "date",
        "camera",
        "dirs",
        "copy",
        "container_id",  # a member's container: a container and its members listed once
    ],
    "sortableAttributes": ["modified_at", "size_bytes", "basename_sort", "date"],
    # The `folder` facet keeps the subfolders of the folder asked from every folder counted:
    # enough values, the most frequent first (a subfolder counts at least its own subfolders).
    "faceting": {"maxValuesPerFacet": 1000, "sortFacetValuesBy": {"*": "count"}},
    "distinctAttribute": "id",
    # `sort` first: an explicit sort orders the whole result set, not only ties; then the
    # declared rules (search/ranking.py) by their Meilisearch names.
    "rankingRules": ["sort"] + [ranking.MEILI_RULES[r] for r in ranking.RULES if r in ranking.MEILI_RULES],
    "typoTolerance": {"enabled": True, "minWordSizeForTypos": {"oneTypo": 5, "twoTypos": 9}},
    # No localizedAttributes: the engine detects the language of each text (its Chinese and
    # Japanese segmenters then find `说明书` in `募集说明书`); naming locales would turn
    # detection off for every language not named. Meilisearch does not stem English words.
    "pagination": {"maxTotalHits": 100_000},
    "embedders": meaning.EMBEDDERS,  # meaning: Trawl's own vectors (meili_meaning.py)
}


def split_content(text: str, max_positions: int = MAX_POSITIONS) -> list[str]:
    """Cut text at word boundaries into chunks of at most `max_positions` estimated positions.

    "".join(chunks) == text, so nothing is lost and the original can be rebuilt.
    """
    chunks, start, positions = [], 0, 0
    for m in _WORD_RE.finditer(text):
        word = m.group(0)
        cost = len(TOKEN_RE.findall(word)) + HARD_SEPARATOR_COST * len(_HARD_SEPARATORS.findall(word))
        if positions + cost > max_positions and m.start() > start:
            chunks.append(text[start : m.start()])
            start, positions = m.start(), 0
        positions += cost
    chunks.append(text[start:])
    return chunks


class MeiliBackend:
    """SearchBackend over one Meilisearch index; writes wait for their tasks."""

    embedder_name = meaning.EMBEDDER

    def __init__(
        self, url: str, api_key: str | None, index: str = "trawl", task_timeout: float = 300.0
    ) -> None:
        self.client = meilisearch.Client(url, api_key, timeout=30)
        self.uid = index
        self.index = self.client.index(index)
        self.task_timeout_ms = int(task_timeout * 1000)
        self._ready = False

    # --- plumbing ------------------------------------------------------------------------

    def _wait(self, task_info) -> None:
        """Block until a task is done; a failed task raises."""
        task = self.client.wait_for_task(
            task_info.task_uid, timeout_in_ms=self.task_timeout_ms, interval_in_ms=50
        )
        if task.status != "succeeded":
            raise SearchBackendError(f"meilisearch task {task.uid} {task.status}: {task.error}")

    def ensure_index(self) -> None:
        """Create the index (if missing) and apply the settings, once per backend object."""
        if self._ready:
            return
        try:
            self._wait(self.client.create_index(self.uid, {"primaryKey": "uid"}))
        except SearchBackendError as exc:
            if "index_already_exists" not in str(exc):
                raise
        present = self.index.get_settings().get("embedders") or {}
        self._wait(self.index.update_settings({**INDEX_SETTINGS, "embedders": meaning.embedders(present)}))
        self._ready = True

    def _call(self, fn, *args, **kwargs):
        """Run a client call, mapping client errors to SearchBackendError."""
        try:
            self.ensure_index()
            return fn(*args, **kwargs)
        except MeilisearchError as exc:
            raise SearchBackendError(f"meilisearch: {exc}") from exc

    def _list(self, filter_: str, fields: list[str] | None = None) -> Iterator[dict]:
        """Every stored chunk matching a filter, page by page."""
        offset = 0
        while True:
            params = {"filter": filter_, "limit": PAGE, "offset": offset}
            if fields:
                params["fields"] = fields
            page = self._call(self.index.get_documents, params)
            for doc in page.results:
                yield dict(doc)
            offset += PAGE
            if offset >= page.total:
                return

    # --- writing -------------------------------------------------------------------------

    @staticmethod
    def _chunks(doc: Doc) -> list[dict]:
        """The Meilisearch documents of one document: one per content chunk."""
        base = {k: v for k, v in doc.items() if k != "content"}
        base["basename_sort"] = doc["basename"].lower()
        base["date"] = doc_date(doc)
        base["year"] = doc_year(base["date"])
        base["folders"] = doc_folders(doc["path"])
        base["dirs"] = disk_folders(doc["path"])  # the `folder` facet
        base["camera"] = doc_camera(doc)
        out = []
        for n, part in enumerate(split_content(doc["content"])):
            chunk = dict(base, uid=f"{doc['id']}_c{n}", chunk=n, content=part)
            if n:
                chunk["metadata"] = {}
            out.append(chunk)
        return out

    def _delete_filter(self, filter_: str) -> None:
        self._wait(self._call(self.index.delete_documents, filter=filter_))

    def upsert(self, docs: list[Doc]) -> None:
        """Replace documents: old chunks removed, new chunks added; waits for both tasks."""
        prepared = {d["id"]: validate_doc(d) for d in docs}
        ids = list(prepared)
        for i in range(0, len(ids), PAGE):
            batch = ids[i : i + PAGE]
            self._delete_filter(any_of("id", batch))
            chunks = [c for x in batch for c in self._chunks(prepared[x])]
            self._wait(self._call(self.index.add_documents, chunks, "uid"))

    def mark_copies(self, flags: dict[str, bool]) -> None:
        """Set `copy` on these documents ({id: flag}) and every chunk of them: a partial
        update, so their vectors stay."""
        ids = list(flags)
        for i in range(0, len(ids), PAGE):
            filter_ = any_of("id", ids[i : i + PAGE])
            updates = [{"uid": c["uid"], "copy": flags[c["id"]]} for c in self._list(filter_, ["uid", "id"])]
            if updates:
                self._wait(self._call(self.index.update_documents, updates, "uid"))

    def delete_ids(self, ids: list[str]) -> None:
        """Remove documents (all their chunks) by id."""
        for i in range(0, len(ids), PAGE):
            batch = ids[i : i + PAGE]
            self._delete_filter(any_of("id", batch))

    def delete_source(self, source_id: str) -> None:
        """Remove every document of a source."""
        self._delete_filter(f"source_id = {quote(source_id)}")

    def rename_source(self, source_id: str, name: str) -> None:
        """Partial update of `source_name` on every chunk of the source."""
        uids = [d["uid"] for d in self._list(f"source_id = {quote(source_id)}", ["uid"])]
        for i in range(0, len(uids), PAGE):
            updates = [{"uid": u, "source_name": name} for u in uids[i : i + PAGE]]
            self._wait(self._call(self.index.update_documents, updates, "uid"))

    def clear(self) -> None:
        """Remove every document."""
        self._wait(self._call(self.index.delete_all_documents))

    # --- reading -------------------------------------------------------------------------

    def get(self, doc_id: str) -> Doc | None:
        """The full document, chunks joined back in order, or None."""
        chunks = sorted(self._list(f"id = {quote(doc_id)}"), key=lambda c: c["chunk"])
        if not chunks:
            return None
        derived = ("uid", "chunk", "basename_sort", "year", "folders", "date", "dirs", "camera")
        doc = {k: v for k, v in chunks[0].items() if k not in derived}
        doc["content"] = "".join(c.get("content") or "" for c in chunks)
        return doc

    def count(self, source_id: str | None = None) -> int:
        """Number of documents (first chunks), overall or of one source."""
        filter_ = "chunk = 0"
        if source_id is not None:
            filter_ += f" AND source_id = {quote(source_id)}"
        return self._call(self.index.get_documents, {"filter": filter_, "limit": 1}).total

    def ids(self, source_id: str) -> set[str]:
        """All document ids of a source."""
        filter_ = f"source_id = {quote(source_id)} AND chunk = 0"
        return {d["id"] for d in self._list(filter_, ["id"])}

    def disk_bytes(self) -> int:
        """Size of Meilisearch's database (every index of that server), as it reports it."""
        return int(self._call(self.client.get_all_stats).get("databaseSize") or 0)

    def health(self) -> str:
        """'ok' when the server answers healthy, else a short error."""
        try:
            status = self.client.health().get("status")
        except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
            return f"meilisearch: {exc}"[:200]
        return "ok" if status == "available" else f"meilisearch: {status}"

    def _queries(self, query: SearchQuery) -> tuple[dict, list[dict], ParsedQuery, str | None]:
        """The hits query and the count queries of a search (page mode: the total and facets,
        then the folder facet's when asked), its parsed text and its filter expression."""
        spec = query.syntax()
        parsed = parse_query(spec.text)
        filters = meili_filters(query, spec) + self._folded_out(query, meili_q(spec, parsed))
        common: dict = {
            "indexUid": self.uid,
            "q": meili_q(spec, parsed),
            "matchingStrategy": query.matching_strategy,
        }
        filter_ = " AND ".join(filters) if filters else None
        if filter_:
            common["filter"] = filter_
        if query.effective_sort() in SORTS:
            common["sort"] = [SORTS[query.effective_sort()]]
        hits_query = dict(
            common,
            limit=max(0, query.limit),
            offset=max(0, query.offset),
            attributesToRetrieve=RESULT_ATTRIBUTES,
            attributesToCrop=["content"],
            cropLength=max(10, query.snippet_length // 4),
            cropMarker="…",
            showRankingScore=True,
        )
        count_query = dict(common, hitsPerPage=1, page=1, attributesToRetrieve=["id"])
        counted_facets = [f for f in query.facets if f != "folder"]
        if counted_facets:  # counted after `distinct`, so per document, not per chunk
            count_query["facets"] = counted_facets
        counts = [count_query]
        if "folder" in query.facets:  # the folders under the asked ones
            under = ", ".join(quote(f) for f in query.folder_facet) or '""'
            counts.append(
                dict(
                    common,
                    hitsPerPage=1,
                    page=1,
                    attributesToRetrieve=["id"],
                    facets=["dirs"],
                    filter=" AND ".join([*filters, f"dirs IN [{under}]"]),
                )
            )
        return hits_query, counts, parsed, filter_

    def _folded_out(self, query: SearchQuery, q: str) -> list[str]:
        """The filter leaving out the containers whose members answer (search.folds): of the
        first FOLDED_LIMIT containers (FOLDED_TYPES) the words match, those the query does not
        name (search.folded) that hold a matching member (counted by the `container_id`
        facet). Meaning's candidates (`within_ids`) limit the containers, not their members."""
        if not folds(query):
            return []
        spec = query.syntax()
        asked = {"indexUid": self.uid, "q": q, "matchingStrategy": query.matching_strategy}
        boxes = " AND ".join([*meili_filters(query, spec), any_of("type", FOLDED_TYPES)])
        found = self._one(
            dict(asked, filter=boxes, limit=FOLDED_LIMIT, attributesToRetrieve=["id", "basename"])
        )
        ids = [h["id"] for h in found["hits"] if folded(query, h["basename"])]
        if not ids:
            return []
        whole = meili_filters(dataclasses.replace(query, within_ids=None, with_copies=True), spec)
        members = " AND ".join([*whole, any_of("container_id", ids)])
        counted = self._one(dict(asked, filter=members, hitsPerPage=1, page=1, facets=["container_id"]))
        held = (counted.get("facetDistribution") or {}).get("container_id") or {}
        out = [i for i in ids if held.get(i)]
        return [f"NOT {any_of('id', out)}"] if out else []

    def _one(self, request: dict) -> dict:
        """The answer to one search request."""
        return self._call(self.client.multi_search, [request])["results"][0]

    def _facets(self, query: SearchQuery, counted: list[dict]) -> dict | None:
        """The facets of a search from its count queries' answers (`_queries`)."""
        if not query.facets:
            return None
        found = dict(counted[0].get("facetDistribution") or {})
        if "folder" in query.facets:
            dirs = (counted[1].get("facetDistribution") or {}).get("dirs") or {}
            found["folder"] = subfolders(dirs, query.folder_facet)
        return {name: _top(found.get(name) or {}) for name in query.facets}

    def search(self, query: SearchQuery) -> SearchPage:
        """Run a query; a second (page-mode) query gives the exact total (a third the
        folder facet's subfolders)."""
        started = time.perf_counter()
        hits_query, counts, parsed, _ = self._queries(query)
        hits, *counted = self._call(self.client.multi_search, [hits_query, *counts])["results"]
        matcher = TermMatcher.from_query(parsed)
        results = [_hit(h, matcher, query.snippet_length) for h in hits["hits"]]
        elapsed = int((time.perf_counter() - started) * 1000)
        return SearchPage(results, int(counted[0]["totalHits"]), elapsed, self._facets(query, counted))

    # --- meaning -------------------------------------------------------------------------

    def _uids(self, doc_ids: list[str]) -> dict[str, list[str]]:
        """{doc id: its chunks' uids}."""
        filter_ = any_of("id", doc_ids)
        out: dict[str, list[str]] = {}
        for chunk in self._list(filter_, ["uid", "id"]):
            out.setdefault(chunk["id"], []).append(chunk["uid"])
        return out

    def set_vectors(self, vectors: dict[str, np.ndarray]) -> None:
        """Give documents their passage vectors ({doc id: (n, 384) array}; an empty array
        removes them); every chunk of a document carries them. Unknown ids are ignored."""
        ids = list(vectors)
        for i in range(0, len(ids), PAGE // 10):  # 100 documents, up to 800 vectors a task
            batch = ids[i : i + PAGE // 10]
            updates = meaning.vector_updates(self._uids(batch), {x: vectors[x] for x in batch})
            if updates:
                self._wait(self._call(self.index.update_documents, updates, "uid"))

    def clear_vectors(self, source_id: str) -> None:
        """Remove the vectors of a source's documents (meaning switched off)."""
        uids = [d["uid"] for d in self._list(f"source_id = {quote(source_id)}", ["uid"])]
        for i in range(0, len(uids), PAGE):
            updates = [{"uid": u, "_vectors": meaning.vectors_field(None)} for u in uids[i : i + PAGE]]
            self._wait(self._call(self.index.update_documents, updates, "uid"))

    def vectors_of(self, doc_id: str) -> np.ndarray | None:
        """The passages of one document as Meilisearch holds them, or None."""
        try:
            params = {"fields": ["id", "_vectors"], "retrieveVectors": "true"}
            doc = self._call(self.index.get_document, f"{doc_id}_c0", params)
        except SearchBackendError as exc:
            if "document_not_found" in str(exc):
                return None
            raise
        return meaning.passages_of(dict(doc))

    def hybrid_queries(
        self, query: SearchQuery, ratio: float, vector: np.ndarray, sources: list[str], window: int
    ) -> tuple[list[dict], ParsedQuery]:
        """The three queries of a search with meaning (one multi-search): the first `window`
        hits ranked by Meilisearch's `hybrid`, the keyword count (and facets), and the
        CANDIDATES documents closest to the question (pure vector search, same filters,
        `sources`: those with meaning on)."""
        window_query = dataclasses.replace(query, offset=0, limit=window)
        hits_query, counts, parsed, filter_ = self._queries(window_query)
        hits_query.update(meaning.hybrid_params(vector, ratio))
        near = meaning.related_query(self.uid, vector, filter_, sources, CANDIDATES)
        return [hits_query, *counts, near], parsed

    def nearest(self, vector: np.ndarray, sources: list[str], k: int) -> list[tuple[str, float]]:
        """The k documents of these sources closest to a question's vector (a pure vector
        search): (doc id, cosine similarity of its closest passage), best first."""
        near = meaning.related_query(self.uid, vector, None, sources, k)
        hits = self._call(self.client.multi_search, [near])["results"][0]["hits"]
        return list(meaning.related(hits, vector, -1.0).items())

    def search_hybrid(
        self, query: SearchQuery, ratio: float, vector: np.ndarray, sources: list[str]
    ) -> SearchPage:
        """A search with meaning, ranked by Meilisearch's `hybrid` (meili_meaning.py says
        what is sent and how each hit's `match`, the total and the facets are derived);
        `sources`: those whose documents meaning may bring (the asker's, with meaning on).
        The hits are read from the first one and those neither words nor above the floor
        left out before the page is cut, so pages follow each other; the window doubles
        while it holds too few."""
        started = time.perf_counter()
        want = max(0, query.offset) + max(0, query.limit)
        window = max(2 * want, meaning.MIN_WINDOW)
        queries, parsed = self.hybrid_queries(query, ratio, vector, sources, window)
        hits, *counted, nearest = self._call(self.client.multi_search, queries)["results"]
        near = meaning.related(nearest["hits"], vector, -1.0)
        candidates = {i: s for i, s in near.items() if s >= embedder.RELATED}
        sure = confident(list(near.items()))
        while True:
            found = hits["hits"]
            ids = list(dict.fromkeys([h["id"] for h in found] + sure))
            by_words = self._matching_words(query, ids)
            kept = meaning.classify(found, by_words, candidates, sure)
            if len(kept) >= want or len(found) < window or window >= want + meaning.MAX_EXTRA:
                break
            window = min(2 * window, want + meaning.MAX_EXTRA)
            hits = self._call(self.client.multi_search, [dict(queries[0], limit=window)])["results"][0]
        matcher = TermMatcher.from_query(parsed)
        results = [
            Hit(**{**_hit(hit, matcher, query.snippet_length), "match": match})
            for hit, match in kept[max(0, query.offset) : want]
        ]
        only = [i for i in sure if i not in by_words]
        total, facets = int(counted[0]["totalHits"]), self._facets(query, counted)
        if only:
            floor = meaning.floor_score(nearest["hits"], sure)
            extra, extra_facets = self._meaning_counts(query, vector, only, floor)
            total, facets = total + extra, _added(facets, extra_facets)
        elapsed = int((time.perf_counter() - started) * 1000)
        return SearchPage(results, total, elapsed, facets)

    def _meaning_counts(
        self, query: SearchQuery, vector: np.ndarray, ids: list[str], floor: float
    ) -> tuple[int, dict | None]:
        """The count and facets of meaning's documents no word finds, by Meilisearch: its
        count queries limited to them, as a vector search with `rankingScoreThreshold`."""
        limited, counts = self.meaning_count_queries(query, vector, ids, floor)
        counted = self._call(self.client.multi_search, counts)["results"]
        return int(counted[0]["totalHits"]), self._facets(limited, counted)

    def meaning_count_queries(
        self, query: SearchQuery, vector: np.ndarray, ids: list[str], floor: float
    ) -> tuple[SearchQuery, list[dict]]:
        """The count queries (total, facets) of these documents only meaning found: the
        query's filters and facets, no words, a vector search at the floor."""
        spec = dataclasses.replace(query.syntax(), text="")
        limited = dataclasses.replace(query, q="", spec=spec, within_ids=tuple(ids), also_ids=())
        _, counts, _, _ = self._queries(limited)
        for count in counts:
            count.update(meaning.floor_params(vector, floor))
        return limited, counts

    def _matching_words(self, query: SearchQuery, doc_ids: list[str]) -> set[str]:
        """Those of these documents that the query's words find (a keyword query, no hybrid)."""
        if not doc_ids:
            return set()
        check = SearchQuery(
            q=query.q,
            spec=query.spec,
            source_ids=query.source_ids,
            source_id=query.source_id,
            type=query.type,
            matching_strategy=query.matching_strategy,
            within_ids=tuple(doc_ids),
            limit=len(doc_ids),
            snippet_length=0,
        )
        hits_query, _, _, _ = self._queries(check)
        hits_query.update(attributesToRetrieve=["id"], attributesToCrop=[], showRankingScore=False)
        hits_query.pop("cropLength", None)
        hits_query.pop("cropMarker", None)
        answer = self._call(self.client.multi_search, [hits_query])
        return {h["id"] for h in answer["results"][0]["hits"]}

    def similar(self, doc_id: str, source_ids: tuple[str, ...] | None, limit: int) -> list[tuple[str, float]]:
        """The documents closest in meaning to one document, through Meilisearch's similar
        documents route: (doc id, cosine similarity of the closest passages), best first;
        [] when the document has no vectors. `source_ids`: the sources the asker sees."""
        own = self.vectors_of(doc_id)
        if own is None:
            return []
        centre = own.mean(axis=0)
        centre /= max(float(np.linalg.norm(centre)), 1e-9)
        filters = ["chunk = 0", f"id != {quote(doc_id)}"]
        if source_ids is not None:
            filters.append(any_of("source_id", source_ids))
        body = {
            "id": f"{doc_id}_c0",
            "embedder": meaning.EMBEDDER,
            "filter": " AND ".join(filters),
            "limit": limit,
            "attributesToRetrieve": ["id", "_vectors"],
            "retrieveVectors": True,
        }
        answer = self._call(self.index.get_similar_documents, body)
        scored = [(h["id"], meaning.similarity(centre, meaning.passages_of(h))) for h in answer["hits"]]
        return sorted(((i, s) for i, s in scored if s is not None), key=lambda item: -item[1])


def _added(facets: dict | None, more: dict | None) -> dict | None:
    """Two facet distributions of disjoint sets of documents, added."""
    if facets is None or more is None:
        return facets
    out = {}
    for name, counts in facets.items():
        both = dict(counts)
        for value, n in (more.get(name) or {}).items():
            both[value] = both.get(value, 0) + int(n)
        out[name] = _top(both)
    return out


def _top(counts: dict) -> dict[str, int]:
    """The MAX_FACET_VALUES most frequent values of one facet."""
    ranked = sorted(counts.items(), key=lambda kv: (-int(kv[1]), str(kv[0])))
    return {str(k): int(v) for k, v in ranked[:MAX_FACET_VALUES]}


def _hit(hit: dict, matcher: TermMatcher, snippet_length: int) -> Hit:
    """One search result of a Meilisearch hit; the snippet is ours, cut from the content
    Meilisearch cropped around the matches."""
    cropped = (hit.get("_formatted") or {}).get("content") or ""
    return search_hit(hit, float(hit.get("_rankingScore", 0.0)), cropped, matcher, snippet_length)
