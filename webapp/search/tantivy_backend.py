"""Embedded Tantivy search backend: one index directory, one writer at a time across processes."""

from __future__ import annotations

import json
import threading
import time
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
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
from webapp.search.query import TOKEN_PATTERN, ParsedQuery, QueryTerm, TermMatcher, parse_query
from webapp.search.snippets import build_snippet
from webapp.search.syntax import QuerySpec, Range
from webapp.search.tantivy_rebuild import open_or_rebuild

TOKENIZER = "trawl_fold"
# Searchable fields and their weight: a match in the title or file name counts more.
FIELD_WEIGHTS = {"title": 3.0, "basename": 3.0, "path": 1.5, "content": 1.0}
# Constant scores per matched word, multiplied by the field weight. Exact beats prefix
# beats typo: a word found exactly anywhere (>= 10) outranks typo matches in every field
# together (<= 8.5), so the exact document comes first, as Meilisearch's `typo` rule does.
EXACT_SCORE, PREFIX_SCORE, TYPO_SCORE = 10.0, 5.0, 1.0
SORT_FIELDS = {
    "modified_at:desc": ("modified_at", Order.Desc),
    "modified_at:asc": ("modified_at", Order.Asc),
    "size_bytes:desc": ("size_bytes", Order.Desc),
    "basename:asc": ("basename_sort", Order.Asc),
}
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
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(TOKEN_PATTERN))
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
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
        self.content = ContentStore(self.directory)  # the text: see content_store.py
        try:
            self._opened = self._open()
        except IndexRebuilding:  # an older index: rebuilt in the background, opened when done
            pass

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
        """A searcher that sees every commit made so far, by any process (reload is ~15 us)."""
        self._index.reload()
        return self._index.searcher()

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
        tquery = self._with_syntax(self._build_query(parsed, query), spec)
        searcher = self._searcher()
        limit, offset = max(0, query.limit), max(0, query.offset)
        sort = SORT_FIELDS.get(query.effective_sort())
        kwargs = {"order_by_field": sort[0], "order": sort[1]} if sort else {}
        # limit=0 panics inside tantivy: fetch one and drop it.
        result = searcher.search(tquery, max(1, limit), count=True, offset=offset, **kwargs)
        hits = result.hits[:limit]
        docs = self._with_content([_stored(searcher, address) for _, address in hits])
        if sort is None:
            scores = [float(key) for key, _ in hits]
        else:
            scores = self._scores(searcher, tquery, docs, [a for _, a in hits])
        matcher = TermMatcher.from_query(parsed)
        results = [
            _result(doc, score, matcher, query.snippet_length)
            for doc, score in zip(docs, scores, strict=True)
        ]
        facets = self._facets(searcher, tquery, query.facets) if query.facets else None
        elapsed = int((time.perf_counter() - started) * 1000)
        return SearchPage(results=results, total=result.count, processing_time_ms=elapsed,
                          facet_distribution=facets)

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

    def _build_query(self, parsed: ParsedQuery, query: SearchQuery) -> Query:
        """All words and phrases must match (each in any searchable field), plus filters."""
        must = [self._word_query(t) for t in parsed.terms]
        must += [self._phrase_query(p) for p in parsed.phrases]
        if query.source_id is not None:
            must.append(self._term("source_id", query.source_id))
        if query.type is not None:
            must.append(self._term("type", query.type))
        if parsed.is_empty:
            must.append(Query.all_query())  # placeholder search: everything, like Meilisearch
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
            if len(words) == 1:
                inner = self._term(field, words[0])
            else:
                inner = Query.phrase_query(self.schema, field, list(words))
            clauses.append((Occur.Should, Query.boost_query(inner, FIELD_WEIGHTS[field])))
        return Query.boolean_query(clauses)

    def _word_query(self, term: QueryTerm) -> Query:
        """One word in any field: exact (BM25 + tier), prefix tier, typo tier."""
        clauses = []
        for field, weight in FIELD_WEIGHTS.items():
            exact = self._term(field, term.text)
            clauses.append(Query.boost_query(exact, weight))
            clauses.append(Query.const_score_query(exact, EXACT_SCORE * weight))
            if term.prefix:
                prefix = Query.fuzzy_term_query(self.schema, field, term.text, 0, True, True)
                clauses.append(Query.const_score_query(prefix, PREFIX_SCORE * weight))
            if term.typos:
                fuzzy = Query.fuzzy_term_query(
                    self.schema, field, term.text, term.typos, True, term.prefix
                )
                clauses.append(Query.const_score_query(fuzzy, TYPO_SCORE * weight))
        return Query.boolean_query([(Occur.Should, c) for c in clauses])

    def _phrase_query(self, words: tuple[str, ...]) -> Query:
        """A quoted phrase: the words in order, exactly, in any one field."""
        clauses = []
        for field, weight in FIELD_WEIGHTS.items():
            if len(words) == 1:
                inner = self._term(field, words[0])
            else:
                inner = Query.phrase_query(self.schema, field, list(words))
            clauses.append(Query.boost_query(inner, weight))
            clauses.append(Query.const_score_query(inner, EXACT_SCORE * weight * len(words)))
        return Query.boolean_query([(Occur.Should, c) for c in clauses])


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
    )
    return {
        "id": doc["id"], "path": doc["path"], "basename": doc["basename"],
        "source_name": doc["source_name"], "type": doc["type"],
        "size_bytes": doc["size_bytes"], "modified_at": doc["modified_at"],
        "snippet": snippet, "score": score,
    }
