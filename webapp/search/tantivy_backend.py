"""Embedded Tantivy search backend: one index directory, one writer at a time across processes."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import unicodedata
from collections.abc import Callable, Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import tantivy
from tantivy import Occur, Order, Query

from webapp.memtune import PageOut
from webapp.search import (
    MAX_FACET_VALUES,
    IndexRebuilding,
    SearchBackendError,
    SearchPage,
    SearchQuery,
    doc_folders,
    doc_year,
    validate_doc,
)
from webapp.search.content_store import ContentStore
from webapp.search.query import (
    CJK_CHARS,
    INDEX_TOKEN_PATTERN,
    Alternative,
    ParsedQuery,
    QueryTerm,
    Slot,
    TermMatcher,
    is_cjk,
    parse_query,
    stem_head,
    stem_variant,
    stemmable,
    stems,
)
from webapp.search.snippets import build_snippet
from webapp.search.syntax import QuerySpec, Range
from webapp.search.tantivy_rebuild import open_or_rebuild

log = logging.getLogger(__name__)

TOKENIZER = "trawl_fold"
# Searchable fields and their weight: a match in the title or file name counts more. (Titles
# often stand in the text too, so a title word already counts twice: a larger weight lowered
# nDCG@10 on the relevance benchmark, docs/relevance.md.)
FIELD_WEIGHTS = {"title": 1.5, "basename": 1.5, "path": 1.2, "content": 1.0}
# Ranking (see _text_query and docs/relevance.md). In a query of up to STRICT_MAX_SLOTS
# words every matched slot scores BUCKET, so a document matching more query words ranks
# above one matching fewer: BUCKET exceeds what all the rest can add. Below it: `last`'s
# preference for earlier words (steps of PREFERENCE_STEP, at most 45 of them), then the kind
# of match (TIER_SCORES), then BM25 and proximity. A longer query (a question pasted whole)
# scores BM25 plus LONG_BUCKET per matched word: strict word counting there ranked worse
# than plain BM25 on the benchmark, and kinds of match, proximity and common words
# (_common_slots) added nothing to it but time.
STRICT_MAX_SLOTS = 10
BUCKET = 100_000.0
PREFERENCE_STEP = 1_000.0
# `named`: the exact word in the title or file name (Meilisearch's `attribute` rule).
TIER_SCORES = {"named": 350.0, "exact": 300.0, "stem": 200.0, "prefix": 100.0, "typo": 0.0}
LONG_BUCKET = 1.0
NAME_FIELDS = ("title", "basename")
STEM_FIELDS = ("title", "content")  # file names and paths match exact forms only
STEM_WEIGHT = 0.7  # BM25 of another form of the word's stem, relative to the exact form
PROXIMITY_FIELDS = ("title", "content")
PROXIMITY_SLOP = 2  # neighbouring query words at most this many words apart earn the bonus
PROXIMITY_WEIGHT = 0.3
# In an index of COMMON_MIN_DOCS documents or more, a word found in more than COMMON_SHARE
# of them does not by itself make a document a match (see _common_slots).
COMMON_MIN_DOCS = 1_000
COMMON_SHARE = 0.2
# In a query of MANY_SLOTS slots or more (a question), a word in more than MANY_COMMON_SHARE
# is common: the more words a query has, the less a frequent one tells documents apart.
MANY_SLOTS = 5
MANY_COMMON_SHARE = 0.1
# A common word in more than MATCH_ONLY_SHARE of the documents only counts as a matched word:
# its BM25 (next to no weight there) was a posting list to seek through for every match.
MATCH_ONLY_SHARE = 0.5
# A word whose exact form is in at least AS_WRITTEN_DOCS documents is spelled, and typed in
# full, as the files have it: it gets no typo forms (like Typesense's typo_tokens_threshold)
# and, as the last word, no prefix forms. Their posting lists were most of the time of a
# search, and they only ranked below its own matches (which fill the first page).
AS_WRITTEN_DOCS = 50
# A relevance-ranked query of PRUNE_MIN_SLOTS to STRICT_MAX_SLOTS slots is counted unscored;
# when more than PRUNE_MIN_MATCHES documents match, its page is found scoring only some of
# them (see _top). (Two words rarely fill a page together: trying first made them slower.)
PRUNE_MIN_SLOTS = 3
PRUNE_MIN_MATCHES = 10_000
PRUNE_MAX_MISSING = 2
# In a query of two or more words that are not common, a stem form in more than STEM_SHARE
# of a large index's documents is left out (see _stem_cap): at a million files the union of
# such forms was most of a two-word query's matches, and time (docs/relevance.md).
STEM_SHARE = 0.05
MIN_STEM_HEAD = 3  # shorter stems are not expanded (too many unrelated words share them)
MAX_STEM_SCAN = 400  # dictionary words read per field for a stem (the most frequent first)
MAX_STEM_FORMS = 8
SORT_FIELDS = {
    "modified_at:desc": ("modified_at", Order.Desc),
    "modified_at:asc": ("modified_at", Order.Asc),
    "size_bytes:desc": ("size_bytes", Order.Desc),
    "basename:asc": ("basename_sort", Order.Asc),
}
# The tokenizer's version, kept in ANALYZER_FILE in the index folder (see _upgrade_analyzer).
ANALYZER_VERSION = 2
ANALYZER_FILE = "trawl-analyzer.json"
OLD_CJK_TERM = f"(.*[{CJK_CHARS}].+)|(.+[{CJK_CHARS}].*)"  # a term an older tokenizer made
# API facet name -> fast field counted by Searcher.aggregate.
FACET_FIELDS = {"type": "type", "extension": "extension", "source_id": "source_id", "year": "year"}
RENAME_CHUNK = 500  # documents whose texts a rename reads at once
MAX_TERM_BYTES = 255  # longer tokens (base64, hashes glued together) are not indexed


def build_schema() -> tantivy.Schema:
    """The index schema: folded searchable text, raw filter/sort fields, the stored document."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", tokenizer_name="raw")
    for name in ("source_id", "type", "extension", "basename_sort"):
        sb.add_text_field(name, tokenizer_name="raw", fast=True)
    for name in FIELD_WEIGHTS:
        sb.add_text_field(name, tokenizer_name=TOKENIZER)
    sb.add_integer_field("modified_at", indexed=True, fast=True)
    sb.add_integer_field("size_bytes", indexed=True, fast=True)
    sb.add_integer_field("year", indexed=True, fast=True)  # of modified_at, UTC: the facet
    sb.add_text_field("folders", tokenizer_name="raw")  # every folder above the path: `path:`
    sb.add_bytes_field("doc", stored=True)  # the document as upserted minus its content, JSON
    return sb.build()


def build_analyzer() -> tantivy.TextAnalyzer:
    """Letter-run / digit-run tokens, lower-cased and ASCII-folded (`Résumé` -> `resume`)."""
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(INDEX_TOKEN_PATTERN))
        .filter(tantivy.Filter.remove_long(MAX_TERM_BYTES))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


class TantivyBackend:
    """SearchBackend over a Tantivy index in `directory` (in memory when None)."""

    def __init__(
        self, directory: str | Path | None, writer_timeout: float = 60.0, writer_heap_mb: int = 128
    ) -> None:
        self.schema = build_schema()
        self.directory = Path(directory) if directory else None
        self.writer_timeout = writer_timeout
        self.writer_heap = max(32, writer_heap_mb) * 1_000_000
        self._lock = threading.Lock()
        self._opened: tantivy.Index | None = None
        self._seen_meta: tuple | None = None  # the meta.json the searcher was reloaded at
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.content = ContentStore(self.directory)  # the text: see content_store.py
        try:
            self._opened = self._open()
        except IndexRebuilding:  # an older index: rebuilt in the background, opened when done
            pass
        if self._opened is not None and self.directory is not None:
            self._upgrade_analyzer()

    @property
    def _index(self) -> tantivy.Index:
        """The open index (IndexRebuilding while an older one is being rewritten)."""
        if self._opened is None:
            self._opened = self._open()
        return self._opened

    def _open(self) -> tantivy.Index:
        """Open or create the index and register the tokenizer (it is not stored on disk)."""
        if self.directory is None:
            index = tantivy.Index(self.schema)
        else:
            # An index of an older schema is re-indexed from its stored documents first.
            index = open_or_rebuild(self.directory, self.schema, self._to_document, _register)
        _register(index)
        return index

    def _upgrade_analyzer(self) -> None:
        """Re-index, once per index, the documents an older tokenizer wrote differently.

        Tokenizers are not stored with the index. Up to analyzer version 1 a run of CJK
        letters was one term; now each letter is one (so any run is found as a phrase).
        Latin text is tokenized as before, so only documents holding a term with a CJK
        letter and more than one character are rewritten, from their stored copy.
        """
        marker = self.directory / ANALYZER_FILE
        if _analyzer_version(marker) == ANALYZER_VERSION:
            return
        searcher = self._searcher()
        stale = Query.boolean_query([
            (Occur.Should, Query.regex_query(self.schema, field, OLD_CJK_TERM))
            for field in FIELD_WEIGHTS])
        total = searcher.search(stale, 1, count=True).count if searcher.num_docs else 0
        if total:
            log.warning("search index: re-indexing %d documents with CJK text written by an "
                        "older tokenizer (once)", total)
            try:
                self._reindex_stored(searcher, stale, total)
            except SearchBackendError as exc:  # writer busy: the next start tries again
                log.warning("search index: re-indexing postponed: %s", exc)
                return
        marker.write_text(json.dumps({"analyzer": ANALYZER_VERSION}) + "\n")

    def _reindex_stored(self, searcher: tantivy.Searcher, query: Query, total: int) -> None:
        """Write the documents matching `query` again from their stored copies (one commit)."""
        addresses = [address for _, address in searcher.search(query, total, count=False).hits]
        with self._writer() as writer:
            for first in range(0, len(addresses), RENAME_CHUNK):
                docs = [_stored(searcher, a) for a in addresses[first:first + RENAME_CHUNK]]
                for doc in self._with_content(docs):
                    writer.delete_documents_by_term("id", doc["id"])
                    writer.add_document(self._to_document(doc))

    # --- writing -------------------------------------------------------------------------

    def _acquire_writer(self, threads: int) -> tantivy.IndexWriter:
        """Take the index writer, waiting with backoff while another process holds it."""
        deadline = time.monotonic() + self.writer_timeout
        delay = 0.02
        while True:
            try:
                return self._index.writer(self.writer_heap, threads)
            except ValueError as exc:
                if "LockBusy" not in str(exc):
                    raise SearchBackendError(f"tantivy writer: {exc}") from exc
                if time.monotonic() >= deadline:
                    raise SearchBackendError(
                        f"tantivy index busy: no writer after {self.writer_timeout:.0f} s"
                    ) from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    @contextmanager
    def _writer(self, threads: int = 1) -> Iterator[tantivy.IndexWriter]:
        """A writer for one batch: committed (durable) on success, rolled back on error."""
        with self._lock, PageOut(str(self.directory) if self.directory else None):
            writer = self._acquire_writer(threads)
            try:
                yield writer
                writer.commit()
            except BaseException:
                writer.rollback()
                raise
            finally:
                writer.wait_merging_threads()  # finishes merges and frees the lock
                self._seen_meta = None  # this process's next search sees the commit

    def _to_document(self, doc: dict) -> tantivy.Document:
        """Index fields of one validated document."""
        fields: dict[str, list] = {
            "id": [doc["id"]],
            "source_id": [doc["source_id"]],
            "type": [doc["type"]],
            "extension": [(doc["extension"] or "").lower()],
            "basename_sort": [doc["basename"].lower()],
            "basename": [_nfc(doc["basename"])],
            "path": [_nfc(doc["path"])],
            "modified_at": [int(doc["modified_at"])],
            "size_bytes": [int(doc["size_bytes"])],
            "year": [doc_year(doc["modified_at"])],
            "folders": doc_folders(doc["path"]),
            "doc": [json.dumps({k: v for k, v in doc.items() if k != "content"},
                               ensure_ascii=False).encode()],
        }
        if doc["content"]:
            fields["content"] = [_nfc(doc["content"])]
        if doc["title"]:
            fields["title"] = [_nfc(doc["title"])]
        return tantivy.Document(**fields)

    def upsert(self, docs: list[dict]) -> None:
        """Add or replace documents in one commit (pass large lists for bulk loads)."""
        prepared = {d["id"]: validate_doc(d) for d in docs}
        if not prepared:
            return
        with self._writer(threads=2 if len(prepared) > 2000 else 1) as writer:
            self.content.put(prepared.values())  # under the writer's lock, before the commit
            for doc in prepared.values():
                writer.delete_documents_by_term("id", doc["id"])
                writer.add_document(self._to_document(doc))

    def delete_ids(self, ids: list[str]) -> None:
        """Remove documents by id (unknown ids are ignored)."""
        if not ids:
            return
        with self._writer() as writer:
            for doc_id in ids:
                writer.delete_documents_by_term("id", doc_id)
        self.content.delete_ids(ids)

    def delete_source(self, source_id: str) -> None:
        """Remove every document of a source."""
        with self._writer() as writer:
            writer.delete_documents_by_term("source_id", source_id)
        self.content.delete_source(source_id)

    def rename_source(self, source_id: str, name: str) -> None:
        """Rewrite the source's documents with the new `source_name` (one commit)."""
        searcher = self._searcher()
        query = self._term("source_id", source_id)
        total = searcher.search(query, 1, count=True).count
        if not total:
            return
        addresses = [address for _, address in searcher.search(query, total, count=False).hits]
        with self._writer() as writer:
            for first in range(0, len(addresses), RENAME_CHUNK):  # texts read a chunk at a time
                docs = [_stored(searcher, a) for a in addresses[first:first + RENAME_CHUNK]]
                moved = [d for d in docs if "content" in d]  # older layout: text in the JSON
                for doc in self._with_content(docs):  # re-indexed whole
                    doc["source_name"] = name
                    writer.delete_documents_by_term("id", doc["id"])
                    writer.add_document(self._to_document(doc))
                self.content.put(moved)  # their text moves to the content store

    def clear(self) -> None:
        """Remove every document."""
        with self._writer() as writer:
            writer.delete_all_documents()
        self.content.clear()

    # --- reading -------------------------------------------------------------------------

    def _searcher(self) -> tantivy.Searcher:
        """A searcher that sees every commit made so far, by any process: reloaded when the
        index's meta.json was replaced (every commit and merge writes a new one; a reload of
        a million-document index costs ~0.4 ms, a stat ~2 us)."""
        seen = self._meta_state()
        if seen is None or seen != self._seen_meta:
            self._index.reload()
            self._seen_meta = seen
        return self._index.searcher()

    def _meta_state(self) -> tuple | None:
        """Identity of the index's meta.json (None in memory or when unreadable)."""
        if self.directory is None:
            return None
        try:
            st = os.stat(self.directory / "meta.json")
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns, st.st_size, st.st_ctime_ns

    def _term(self, field: str, value: str) -> Query:
        return Query.term_query(self.schema, field, value)

    def get(self, doc_id: str) -> dict | None:
        """The full document as upserted, or None for an unknown id."""
        searcher = self._searcher()
        hits = searcher.search(self._term("id", doc_id), 1, count=False).hits
        return self._with_content([_stored(searcher, hits[0][1])])[0] if hits else None

    def _with_content(self, docs: list[dict]) -> list[dict]:
        """The documents with their text (indexes written before the content store have it
        in the stored JSON already)."""
        texts = self.content.get_many([d["id"] for d in docs if "content" not in d])
        for doc in docs:
            doc.setdefault("content", texts.get(doc["id"], ""))
        return docs

    def count(self, source_id: str | None = None) -> int:
        """Number of documents, overall or of one source."""
        searcher = self._searcher()
        if source_id is None:
            return searcher.num_docs
        return searcher.search(self._term("source_id", source_id), 1, count=True).count

    def ids(self, source_id: str) -> set[str]:
        """All document ids of a source, read from the term dictionary (no stored docs)."""
        searcher = self._searcher()
        only_source = self._term("source_id", source_id)
        terms = searcher.terms_with_prefix("id", "", filter_query=only_source)
        return {term for term, freq in terms if freq > 0}

    def disk_bytes(self) -> int:
        """Bytes of the index folder's files (the content store included); 0 in memory."""
        if self.directory is None:
            return 0
        total = 0
        for path in self.directory.rglob("*"):
            try:
                total += path.stat().st_size if path.is_file() else 0
            except OSError:  # a segment merged away while we looked
                continue
        return total

    def health(self) -> str:
        """'ok' when the index opens and answers, else a short error."""
        try:
            self._searcher().num_docs  # noqa: B018 - touching the reader is the check
        except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
            return f"tantivy: {exc}"[:200]
        return "ok"

    def search(self, query: SearchQuery) -> SearchPage:
        """Run a query with filters, sort and pagination; exact total; snippets in <em>."""
        started = time.perf_counter()
        spec = query.syntax()
        parsed = parse_query(spec.text)
        searcher = self._searcher()
        parsed = self._as_written(parsed, searcher)
        common = self._common_slots(parsed, query.matching_strategy, searcher)
        cap = self._stem_cap(parsed, query.matching_strategy, searcher, common)
        limit, offset = max(0, query.limit), max(0, query.offset)
        sort = SORT_FIELDS.get(query.effective_sort())

        def narrowed(text_query: Query) -> Query:
            return self._with_syntax(self._build_query(text_query, query), spec)

        while True:
            text = self._text_query(parsed, query.matching_strategy, searcher, common, cap)
            tquery, hits, total = self._find(searcher, text, narrowed, limit, offset, sort)
            if total or not (common or cap):
                break
            common, cap = {}, None  # only common words or forms occur: search them all
        docs = [_stored(searcher, address) for _, address in hits]
        if query.snippet_length:  # 0: the ranking only, no text read (search/hybrid.py)
            docs = self._with_content(docs)
        if sort is None:
            scores = [float(key) for key, _ in hits]
        else:
            scores = self._scores(searcher, tquery, docs, [a for _, a in hits])
        # Snippets show the other words (`the` marked everywhere helps nobody, and costs).
        shown = ParsedQuery(tuple(s for i, s in enumerate(parsed.slots) if i not in common))
        matcher = TermMatcher.from_query(shown)
        results = [
            _result(doc, score, matcher, query.snippet_length)
            for doc, score in zip(docs, scores, strict=True)
        ]
        facets = (self._facets(searcher, narrowed(text.match), query.facets)
                  if query.facets else None)
        elapsed = int((time.perf_counter() - started) * 1000)
        return SearchPage(results=results, total=total, processing_time_ms=elapsed,
                          facet_distribution=facets)

    def _find(self, searcher: tantivy.Searcher, text: _Text, narrowed: Callable[[Query], Query],
              limit: int, offset: int, sort: tuple[str, Order] | None
              ) -> tuple[Query, list, int]:
        """The whole query, the page's (key, address) hits and the exact total.

        Ranked by relevance, a query of PRUNE_MIN_SLOTS to STRICT_MAX_SLOTS slots is counted
        apart (unscored), and when many documents match, its page is found without scoring
        every match (see _top): that was most of a question's time.
        """
        tquery = narrowed(text.scored)
        if sort is None and text.strict and len(text.slots) >= PRUNE_MIN_SLOTS:
            total = searcher.search(narrowed(text.match), 1, count=True,
                                    order_by_field="modified_at").count
            if not limit or not total:
                return tquery, [], total
            hits = (self._top(searcher, text, tquery, limit, offset)
                    if total > PRUNE_MIN_MATCHES else None)
            if hits is None:
                hits = searcher.search(tquery, limit, count=False, offset=offset).hits
            return tquery, hits, total
        kwargs = {"order_by_field": sort[0], "order": sort[1]} if sort else {}
        # limit=0 panics inside tantivy: fetch one and drop it.
        result = searcher.search(tquery, max(1, limit), count=True, offset=offset, **kwargs)
        return tquery, result.hits[:limit], result.count

    @staticmethod
    def _top(searcher: tantivy.Searcher, text: _Text, tquery: Query, limit: int,
             offset: int) -> list | None:
        """The page of `tquery` among the documents matching all the query's slots, else all
        but one, ... (up to PRUNE_MAX_MISSING missing); None when none of those fills it.

        Exact: every matched slot scores BUCKET, more than all else can add (see
        _text_query), so once the documents matching at least k slots fill the page, no
        document matching fewer can rank on it. Each set is a union of intersections, each
        led by its rarest word, and the few documents in it are scored.
        """
        slots = text.slots
        for missing in range(PRUNE_MAX_MISSING + 1):
            size = len(slots) - missing
            if size < 2:
                break
            groups = [Query.boolean_query([(Occur.Must, s) for s in group])
                      for group in combinations(slots, size)]
            within = Query.boolean_query(
                [(Occur.Must, tquery), (Occur.Must, Query.const_score_query(_any(groups), 0.0))])
            hits = searcher.search(within, limit, count=False, offset=offset).hits
            if len(hits) == limit:
                return hits
        return None

    def _facets(
        self, searcher: tantivy.Searcher, tquery: Query, names: tuple[str, ...]
    ) -> dict[str, dict[str, int]]:
        """Counts per value of each facet over every match (one pass over fast fields)."""
        aggs = {name: {"terms": {"field": FACET_FIELDS[name], "size": MAX_FACET_VALUES}}
                for name in names}
        answer = searcher.aggregate(tquery, aggs)
        return {name: {_facet_key(b["key"]): int(b["doc_count"])
                       for b in answer[name]["buckets"]} for name in names}

    def _scores(
        self, searcher: tantivy.Searcher, tquery: Query, docs: list[dict], addresses: list
    ) -> list[float]:
        """Relevance scores of a field-sorted page: one scored search limited to its ids."""
        if not docs:
            return []
        ids = Query.term_set_query(self.schema, "id", [d["id"] for d in docs])
        only_page = Query.const_score_query(ids, 0.0)  # a filter: adds nothing to scores
        scored = Query.boolean_query([(Occur.Must, tquery), (Occur.Must, only_page)])
        hits = searcher.search(scored, len(docs), count=False).hits
        by_address = {(a.segment_ord, a.doc): float(score) for score, a in hits}
        return [by_address.get((a.segment_ord, a.doc), 0.0) for a in addresses]

    # --- query building ------------------------------------------------------------------

    def _build_query(self, text_query: Query, query: SearchQuery) -> Query:
        """The text part (see _text_query) AND the request's filters, the access filter first."""
        must = [text_query]
        if query.source_ids is not None:  # the sources the asker may see: scored 0
            granted = Query.term_set_query(self.schema, "source_id", list(query.source_ids))
            must.append(Query.const_score_query(granted, 0.0))
        if query.source_id is not None:
            must.append(Query.const_score_query(self._term("source_id", query.source_id), 0.0))
        if query.type is not None:
            must.append(Query.const_score_query(self._term("type", query.type), 0.0))
        if query.within_ids is not None:  # meaning's candidates (search/hybrid.py)
            ids = Query.term_set_query(self.schema, "id", list(query.within_ids))
            must.append(Query.const_score_query(ids, 0.0))
        return Query.boolean_query([(Occur.Must, q) for q in must])

    def _with_syntax(self, text_query: Query, spec: QuerySpec) -> Query:
        """The text query narrowed by the query language's filters and exclusions."""
        clauses = self._syntax_clauses(spec)
        if not clauses:
            return text_query
        return Query.boolean_query([(Occur.Must, text_query), *clauses])

    def _syntax_clauses(self, spec: QuerySpec) -> list[tuple[Occur, Query]]:
        """Filters (scored 0), title: terms (scored) and -exclusions of a parsed query."""
        filters = [
            Query.term_set_query(self.schema, field, list(values))
            for field, values in (("type", spec.types), ("extension", spec.extensions),
                                  ("source_id", spec.sources), ("folders", spec.paths))
            if values
        ]
        filters += [self._range("modified_at", r) for r in spec.modified]
        filters += [self._range("size_bytes", r) for r in spec.size]
        clauses = [(Occur.Must, Query.const_score_query(f, 0.0)) for f in filters]
        clauses += [(Occur.Must, self._words_in(words, ("title", "basename")))
                    for words in spec.title]
        clauses += [(Occur.MustNot, self._words_in(words, tuple(FIELD_WEIGHTS)))
                    for words in spec.excluded]
        return clauses

    def _range(self, field: str, bounds: Range) -> Query:
        """Integers of `field` within [low, high)."""
        return Query.range_query(
            self.schema, field, tantivy.FieldType.Integer, bounds.low, bounds.high,
            include_lower=True, include_upper=bounds.high is None,
        )

    def _words_in(self, words: tuple[str, ...], fields: tuple[str, ...]) -> Query:
        """A word (or the words as a phrase) in any of `fields`, weighted like the text."""
        clauses = []
        for field in fields:
            inner = self._words_query(field, list(words))
            clauses.append((Occur.Should, Query.boost_query(inner, FIELD_WEIGHTS[field])))
        return Query.boolean_query(clauses)

    def _text_query(self, parsed: ParsedQuery, strategy: str, searcher: tantivy.Searcher,
                    common: dict[int, int], stem_cap: float | None = None) -> _Text:
        """The free-text part of a search: which documents match and how they score.

        Each slot (a word, a phrase, or `a OR b`) scores BUCKET when it matches, so more
        matched slots always rank first; then the strategy's preference among slots (earlier
        words for `last`, rarer for `frequency`); then the best kind of match (exact > stem >
        prefix > typo); then BM25 of the exact and stem forms per field, and a bonus for
        neighbouring query words found close together. In a longer query a matched slot
        scores LONG_BUCKET plus its BM25, and common words score nothing.
        """
        if parsed.is_empty:  # placeholder search: everything, like Meilisearch
            return _Text(Query.all_query(), Query.all_query(), (), False)
        strict = len(parsed.slots) <= STRICT_MAX_SLOTS
        order = _slot_order(parsed, strategy if strict else "all")
        bucket = BUCKET if strict else LONG_BUCKET
        unranked = MATCH_ONLY_SHARE * searcher.num_docs
        built = [self._common_slot(s, bucket + order[i], common[i] <= unranked)
                 if i in common else
                 self._slot_query(s, searcher, bucket + order[i], strict, stem_cap)
                 for i, s in enumerate(parsed.slots)]
        bonus = [(Occur.Should, q) for q in self._proximity(parsed, common)] if strict else []
        if strategy == "all":
            scored = Query.boolean_query([(Occur.Must, b.scored) for b in built] + bonus)
            return _Text(scored, scored, (), False)
        # a document matching any slot is found (and ranks by how many it matches)
        drivers = [b.scored for i, b in enumerate(built) if i not in common]
        match = Query.boolean_query([(Occur.Should, q) for q in drivers],
                                    minimum_number_should_match=1)
        # A common word counts as a matched word in a query of up to STRICT_MAX_SLOTS slots
        # (in a longer one it is in most documents, and CISI ranks better without it).
        # Each part is optional at a level of its own: one optional posting list is skipped
        # through to the matches, while optional parts side by side form a union that reads
        # every posting of `the`.
        for i in sorted(common) if strict else ():
            for part in built[i].parts:
                match = Query.boolean_query([(Occur.Must, match), (Occur.Should, part)])
        scored = Query.boolean_query([(Occur.Must, match)] + bonus)
        unscored = _any([b.where for i, b in enumerate(built) if i not in common])
        return _Text(scored, unscored, tuple(b.where for b in built), strict)

    def _common_slot(self, slot: Slot, base: float, ranked: bool = True) -> _Slot:
        """A common word (see _common_slots), scored in parts of one posting list each: it
        counts as a matched word (an exact match where it is in the text), plus, when
        `ranked`, its BM25 in the text."""
        terms = [self._term("content", a.text) for a in slot.alternatives]
        where = _any(terms)
        parts = [Query.const_score_query(where, base + TIER_SCORES["exact"])]
        if ranked:
            parts += terms
        return _Slot(Query.all_query(), where, tuple(parts))

    def _as_written(self, parsed: ParsedQuery, searcher: tantivy.Searcher) -> ParsedQuery:
        """The query without typo and prefix forms for words found as written in
        AS_WRITTEN_DOCS documents or more (in any searchable field)."""
        def settled(alt: Alternative) -> Alternative:
            if isinstance(alt, QueryTerm) and (alt.typos or alt.prefix) and any(
                    searcher.doc_freq(field, alt.text) >= AS_WRITTEN_DOCS
                    for field in FIELD_WEIGHTS):
                return QueryTerm(alt.text, 0, False)
            return alt

        return ParsedQuery(tuple(Slot(tuple(settled(a) for a in slot.alternatives))
                                 for slot in parsed.slots))

    def _common_slots(self, parsed: ParsedQuery, strategy: str,
                      searcher: tantivy.Searcher) -> dict[int, int]:
        """Slots whose every word is in more than COMMON_SHARE of a large index's documents
        (MANY_COMMON_SHARE in a query of MANY_SLOTS or more), with the number of documents of
        their most frequent word.

        They do not by themselves make a document a match and get no typo or prefix forms;
        in a query of up to STRICT_MAX_SLOTS slots they still count as matched words (see
        _text_query). In a question most documents hold
        `the` or `information`, and scoring all of them is what made long questions slow.
        (When the other words find nothing, search() runs the query again without this.)
        When every word is that common, the rarest one leads: the matches are the documents
        holding it (as Meilisearch's `frequency` drops the most frequent words first), not a
        union of posting lists that covers the whole index.
        """
        total = searcher.num_docs
        if total < COMMON_MIN_DOCS or strategy == "all":
            return {}
        limit = _common_share(parsed) * total
        freq = {
            i: max(searcher.doc_freq("content", a.text) for a in slot.alternatives)
            for i, slot in enumerate(parsed.slots)
            if all(isinstance(a, QueryTerm) and not is_cjk(a.text) for a in slot.alternatives)
        }
        common = {i: n for i, n in freq.items() if n > limit}
        if common and len(common) == len(parsed.slots):
            del common[min(common, key=lambda i: (freq[i], i))]
        return common

    def _stem_cap(self, parsed: ParsedQuery, strategy: str, searcher: tantivy.Searcher,
                  common: dict[int, int]) -> float | None:
        """The most documents a stem form may be in to be searched (STEM_SHARE of them),
        when the query has two or more words that are not common (see _common_slots) in a
        large index: `tests` (in most documents of a code share) found for `tested` made
        nearly every document a match of a question, all of them scored, while the query's
        other words find the documents it is about. A one-word query keeps every stem form."""
        total = searcher.num_docs
        if total < COMMON_MIN_DOCS or strategy == "all" or len(parsed.slots) - len(common) < 2:
            return None
        return STEM_SHARE * total

    def _slot_query(self, slot: Slot, searcher: tantivy.Searcher, base: float,
                    strict: bool, stem_cap: float | None = None) -> _Slot:
        """One slot: its tier (dis_max of match kinds, each a constant; in a long query one
        constant for any match) plus BM25 parts."""
        tiers: dict[str, list[Query]] = {kind: [] for kind in TIER_SCORES}
        relevance: list[Query] = []
        for alternative in slot.alternatives:
            if isinstance(alternative, QueryTerm):
                self._word_parts(alternative, searcher, tiers, relevance, stem_cap)
            else:
                for field, weight in FIELD_WEIGHTS.items():
                    inner = self._words_query(field, list(alternative))
                    tiers["named" if field in NAME_FIELDS else "exact"].append(inner)
                    relevance.append(Query.boost_query(inner, weight))
        where = _any([q for queries in tiers.values() for q in queries])
        if strict:
            kind = Query.disjunction_max_query(
                [Query.const_score_query(_any(queries), base + TIER_SCORES[kind])
                 for kind, queries in tiers.items() if queries])
        else:
            kind = Query.const_score_query(where, base)
        scored = Query.boolean_query([(Occur.Should, q) for q in (kind, *relevance)])
        return _Slot(scored, where)

    def _word_parts(self, term: QueryTerm, searcher: tantivy.Searcher,
                    tiers: dict[str, list[Query]], relevance: list[Query],
                    stem_cap: float | None = None) -> None:
        """Clauses of one word: exact and stem forms score BM25; prefix and typo only a tier.
        With a `stem_cap`, only the stem forms in at most that many documents (see
        _stem_cap)."""
        forms = self._stem_forms(term.text, searcher)
        if stem_cap is not None:
            forms = [f for f in forms if searcher.doc_freq("content", f) <= stem_cap]
        for field, weight in FIELD_WEIGHTS.items():
            exact = self._words_query(field, [term.text])
            tiers["named" if field in NAME_FIELDS else "exact"].append(exact)
            relevance.append(Query.boost_query(exact, weight))
            for form in forms if field in STEM_FIELDS else ():  # (term_set_query is slower)
                stemmed = self._term(field, form)
                tiers["stem"].append(stemmed)
                relevance.append(Query.boost_query(stemmed, weight * STEM_WEIGHT))
            if term.prefix:
                tiers["prefix"].append(
                    Query.fuzzy_term_query(self.schema, field, term.text, 0, True, True))
            if term.typos:
                tiers["typo"].append(Query.fuzzy_term_query(
                    self.schema, field, term.text, term.typos, True, term.prefix))

    def _stem_forms(self, word: str, searcher: tantivy.Searcher) -> list[str]:
        """Other words of the index with the English stem of `word` (`connected` for
        `connections`), read from the term dictionaries of the searchable fields."""
        if not stemmable(word):
            return []
        stem = stems([word])[0]
        head = stem_head(stem)
        if len(head) < MIN_STEM_HEAD:
            return []
        candidates = {t for field in STEM_FIELDS
                      for t, _ in searcher.terms_with_prefix(field, head, limit=MAX_STEM_SCAN)}
        candidates = sorted(c for c in candidates if stem_variant(word, c) and stemmable(c))
        found = [c for c, s in zip(candidates, stems(candidates), strict=True) if s == stem]
        if len(found) > MAX_STEM_FORMS:  # the most frequent forms (each one is a posting list)
            found = sorted(found, key=lambda f: -searcher.doc_freq("content", f))
        return found[:MAX_STEM_FORMS]

    def _words_query(self, field: str, words: list[str]) -> Query:
        """Folded query words in one field: a term, or a phrase (CJK runs are letter phrases)."""
        indexed = _index_words(words)
        if len(indexed) == 1:
            return self._term(field, indexed[0])
        return Query.phrase_query(self.schema, field, indexed)

    def _proximity(self, parsed: ParsedQuery, common: Container[int]) -> list[Query]:
        """Sloppy two-word phrases of neighbouring single-word slots, in title and content
        (none with a common word: `of the` is near in every text)."""
        words = [s.alternatives[0].text if len(s.alternatives) == 1 and i not in common
                 and isinstance(s.alternatives[0], QueryTerm)
                 and not is_cjk(s.alternatives[0].text) else None
                 for i, s in enumerate(parsed.slots)]
        out = []
        for a, b in zip(words, words[1:], strict=False):
            if a and b and a != b:
                for field in PROXIMITY_FIELDS:
                    pair = Query.phrase_query(self.schema, field, [a, b], PROXIMITY_SLOP)
                    out.append(Query.boost_query(pair, PROXIMITY_WEIGHT * FIELD_WEIGHTS[field]))
        return out


@dataclass(frozen=True)
class _Slot:
    """One slot of a query as built (see TantivyBackend._slot_query)."""

    scored: Query
    where: Query  # unscored: the documents where it counts as a matched word
    parts: tuple[Query, ...] = ()  # a common word's optional parts (see _common_slot)


@dataclass(frozen=True)
class _Text:
    """The free-text part of a search (see TantivyBackend._text_query)."""

    scored: Query  # the documents it matches, scored
    match: Query  # the same documents, unscored (counted and faceted without scoring)
    slots: tuple[Query, ...]  # the documents where each slot counts as a matched word
    strict: bool  # a matched slot outranks all else (see BUCKET)


def _common_share(parsed: ParsedQuery) -> float:
    """The share of documents above which a word of this query is common (see _common_slots)."""
    return COMMON_SHARE if len(parsed.slots) < MANY_SLOTS else MANY_COMMON_SHARE


def _any(queries: list[Query]) -> Query:
    """A query matching what any of `queries` matches."""
    if len(queries) == 1:
        return queries[0]
    return Query.boolean_query([(Occur.Should, q) for q in queries])


def _index_words(words: list[str]) -> list[str]:
    """Query words as the index holds them: CJK runs split into single letters."""
    out: list[str] = []
    for word in words:
        out.extend(list(word) if is_cjk(word) else [word])
    return out


def _slot_order(parsed: ParsedQuery, strategy: str) -> list[float]:
    """Each slot's preference: `last` prefers documents matching earlier words (it drops
    words from the end). `frequency` needs none: among documents matching as many words,
    BM25's inverse document frequency already puts the rarer words first."""
    n = len(parsed.slots)
    if strategy != "last":
        return [0.0] * n
    return [PREFERENCE_STEP * (n - 1 - i) for i in range(n)]


def _analyzer_version(marker: Path) -> int:
    """The analyzer version written in an index folder (1 when it has no marker yet)."""
    try:
        return int(json.loads(marker.read_text()).get("analyzer", 1))
    except (OSError, ValueError, AttributeError):
        return 1


def _facet_key(key: object) -> str:
    """A facet bucket key as text (numbers come back as floats for some field types)."""
    if isinstance(key, float) and key.is_integer():
        return str(int(key))
    return str(key)


def _register(index: tantivy.Index) -> None:
    """Our tokenizer on an index (it is not stored with the index: again after every open)."""
    index.register_tokenizer(TOKENIZER, build_analyzer())


def _nfc(text: str) -> str:
    """NFC form, so decomposed accents fold like composed ones."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _stored(searcher: tantivy.Searcher, address: tantivy.DocAddress) -> dict:
    """The stored JSON document at `address`."""
    return json.loads(searcher.doc(address).get_first("doc"))




def _result(doc: dict, score: float, matcher: TermMatcher, snippet_length: int) -> dict:
    """One search result with its snippet."""
    snippet = build_snippet(
        doc.get("content"), matcher, snippet_length,
        fallbacks=(doc.get("title"), doc.get("basename"), doc.get("path")),
    ) if snippet_length else ""  # 0: a ranking only (search/hybrid.py)
    return {
        "id": doc["id"], "path": doc["path"], "basename": doc["basename"],
        "source_name": doc["source_name"], "type": doc["type"],
        "size_bytes": doc["size_bytes"], "modified_at": doc["modified_at"],
        "snippet": snippet, "score": score,
        "container_id": doc.get("container_id"),
    }
