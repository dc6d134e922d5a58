"""Embedded Tantivy search backend: one index directory, one writer at a time across processes."""

from __future__ import annotations

import contextlib
import json
import logging
import os
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
    FOLDER_EDGE,
    MAX_FACET_VALUES,
    Doc,
    IndexRebuilding,
    SearchBackendError,
    SearchPage,
    SearchQuery,
    doc_camera,
    doc_date,
    doc_folders,
    doc_year,
    folder_edges,
    ranking,
    search_hit,
    validate_doc,
)
from webapp.search.content_store import ContentStore
from webapp.search.language import detect
from webapp.search.query import ParsedQuery, QueryTerm, TermMatcher, parse_query
from webapp.search.ranking import FIELD_WEIGHTS, STEMMED
from webapp.search.tantivy_compose import compose, folded_out
from webapp.search.tantivy_rebuild import REBUILDING, open_or_rebuild, reindex
from webapp.search.tantivy_text import (
    LANGUAGE_FIELD,
    STEM_TOKENIZER,
    TOKENIZER,
    TextQuery,
    folding,
    stemmed_text,
    stemming,
)

log = logging.getLogger(__name__)

# The newest/oldest sorts order by the document's date (doc_date: when a photo was taken).
SORT_FIELDS = {
    "modified_at:desc": ("date", Order.Desc),
    "modified_at:asc": ("date", Order.Asc),
    "size_bytes:desc": ("size_bytes", Order.Desc),
    "basename:asc": ("basename_sort", Order.Asc),
}
# A question's word in more than this share of the documents is not marked in its snippets
# (ranking is not affected): it adds little to BM25F and finding its every place in the page's
# texts was most of a question's time (the share questions once used for common words;
# docs/relevance.md).
SNIPPET_COMMON_SHARE = 0.1
# Counts of a user's documents holding a word (TextQuery.counts) kept per set of sources
# while the index does not change: a question's `the` or `of` counted among a million
# documents costs 10-20 ms each time.
COUNTS_KEPT = 10_000
# API facet name -> fast field counted by Searcher.aggregate.
FACET_FIELDS = {
    "type": "type",
    "extension": "extension",
    "source_id": "source_id",
    "year": "year",
    "camera": "camera",
}


def build_schema() -> tantivy.Schema:
    """The index schema: folded searchable text, its stemmed copies, raw filter/sort fields,
    the stored document."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", tokenizer_name="raw")
    for name in ("source_id", "type", "extension", "basename_sort", LANGUAGE_FIELD, "camera"):
        sb.add_text_field(name, tokenizer_name="raw", fast=True)
    for name in FIELD_WEIGHTS:
        sb.add_text_field(name, tokenizer_name=TOKENIZER)
    for name in STEMMED.values():  # the text's stems only score: no positions; a title's are
        # few, and its stems are near for proximity (`Signed contract` for `sign contract`)
        sb.add_text_field(
            name, tokenizer_name=STEM_TOKENIZER, index_option="position" if name == "title_stem" else "freq"
        )
    sb.add_integer_field("modified_at", indexed=True, fast=True)
    sb.add_integer_field("size_bytes", indexed=True, fast=True)
    sb.add_integer_field("date", indexed=True, fast=True)  # doc_date: sorts, `modified:`
    sb.add_integer_field("year", indexed=True, fast=True)  # of the date, UTC: the facet
    sb.add_text_field("folders", tokenizer_name="raw")  # every folder above the path: `path:`
    sb.add_text_field("folder_edges", tokenizer_name="raw")  # the `folder` facet's terms
    sb.add_text_field("camera_key", tokenizer_name="raw")  # lower case: `camera:`
    sb.add_text_field("copy", tokenizer_name="raw")  # `1` on a copy (Doc.copy): left out
    sb.add_text_field("container_id", tokenizer_name="raw", fast=True)  # a member's: folds
    sb.add_bytes_field("doc", stored=True)  # the document as upserted minus its content, JSON
    return sb.build()


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
        self._older: tantivy.Index | None = None  # the index being rebuilt, searched meanwhile
        self._reading = threading.Lock()  # reloads, and the counts kept for them
        self._reloads = 0  # how many times the searcher was reloaded
        self._counts: dict = {}  # per asker's sources: TextQuery.counts of reload _counts_at
        self._counts_at = -1
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
            index = open_or_rebuild(self.directory, self.schema, self._to_document, register)
        register(index)
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
                # the files of the segment it was writing (a full disk leaves them half
                # written): gone now rather than at the next commit that succeeds
                with contextlib.suppress(Exception):
                    writer.garbage_collect_files()
                raise
            finally:
                writer.wait_merging_threads()  # finishes merges and frees the lock
                self._seen_meta = None  # this process's next search sees the commit

    def _to_document(self, doc: Doc) -> tantivy.Document:
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
            "date": [doc_date(doc)],
            "year": [doc_year(doc_date(doc))],
            "folders": doc_folders(doc["path"]),
            "folder_edges": folder_edges(doc["path"]),
            "doc": [
                json.dumps({k: v for k, v in doc.items() if k != "content"}, ensure_ascii=False).encode()
            ],
        }
        if doc.get("copy"):
            fields["copy"] = ["1"]
        if doc.get("container_id"):
            fields["container_id"] = [doc["container_id"]]
        camera = doc_camera(doc)
        if camera:
            fields["camera"], fields["camera_key"] = [camera], [camera.casefold()]
        language = detect(doc["content"] or doc["title"])
        fields[LANGUAGE_FIELD] = [language]
        if doc["content"]:
            fields["content"] = [_nfc(doc["content"])]
            fields["content_stem"] = [stemmed_text(fields["content"][0], language)]
        if doc["title"]:
            fields["title"] = [_nfc(doc["title"])]
            fields["title_stem"] = [stemmed_text(fields["title"][0], language)]
        return tantivy.Document(**fields)

    def upsert(self, docs: list[Doc]) -> None:
        """Add or replace documents in one commit (pass large lists for bulk loads)."""
        prepared = {d["id"]: validate_doc(d) for d in docs}
        if not prepared:
            return
        with self._writer(threads=2 if len(prepared) > 2000 else 1) as writer:
            self.content.put(prepared.values())  # under the writer's lock, before the commit
            for doc in prepared.values():
                writer.delete_documents_by_term("id", doc["id"])
                writer.add_document(self._to_document(doc))

    def mark_copies(self, flags: dict[str, bool]) -> None:
        """Set `copy` on these documents ({id: flag}; unknown ids are ignored), one commit."""
        docs = [doc for doc in map(self.get, flags) if doc is not None]
        for doc in docs:
            doc["copy"] = flags[doc["id"]]
        self.upsert(docs)

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

        def renamed(doc: Doc) -> Doc:
            return {**doc, "source_name": name}

        with self._writer() as writer:
            reindex(
                searcher,
                addresses,
                self.content,
                writer,
                lambda doc: self._to_document(renamed(doc)),
                replace=True,
            )

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
        return self._searcher_at()[0]

    def _searcher_at(self) -> tuple[tantivy.Searcher, int]:
        """A searcher (see _searcher) and the number of the reload it comes from: every
        searcher of one number sees the same documents."""
        with self._reading:
            seen = self._meta_state()
            if seen is None or seen != self._seen_meta:
                self._index.reload()
                self._seen_meta = seen
                self._reloads += 1
            return self._index.searcher(), self._reloads

    def _counts_for(self, reload: int, source_ids: tuple[str, ...] | None) -> dict:
        """Counts a search of these sources' asker may reuse (TextQuery.counts), made with a
        searcher of reload number `reload`: kept until the next reload, at most COUNTS_KEPT
        per asker."""
        with self._reading:
            if reload != self._counts_at:
                self._counts = {}
                self._counts_at = reload
            counts = self._counts.setdefault(source_ids and tuple(sorted(source_ids)), {})
            if len(counts) > COUNTS_KEPT:
                counts.clear()
            return counts

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

    def get(self, doc_id: str) -> Doc | None:
        """The full document as upserted, or None for an unknown id."""
        searcher = self._searcher()
        hits = searcher.search(self._term("id", doc_id), 1, count=False).hits
        return self._with_content([_stored(searcher, hits[0][1])])[0] if hits else None

    def _with_content(self, docs: list[Doc]) -> list[Doc]:
        """The documents with their text, from the content store."""
        texts = self.content.get_many([d["id"] for d in docs])
        for doc in docs:
            doc["content"] = texts.get(doc["id"], "")
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
        """Run a query with filters, sort and pagination; exact total; snippets in <em>.
        While the index is rebuilt for a new version, the older index answers."""
        try:
            searcher, reload = self._searcher_at()
            counts = self._counts_for(reload, query.source_ids)
            builder = TextQuery(self.schema, searcher, visible=query.source_ids, counts=counts)
        except IndexRebuilding:
            builder = self._previous(query.source_ids)
            try:
                return self._search(query, builder)
            except ValueError as exc:  # a field the older index lacks (a `path:` filter)
                raise IndexRebuilding(REBUILDING) from exc
        self._older = None
        return self._search(query, builder)

    @staticmethod
    def _shown(parsed: ParsedQuery, searcher: tantivy.Searcher) -> ParsedQuery:
        """The slots snippets mark: not the words of a question in more than
        SNIPPET_COMMON_SHARE of the documents (`the` marked everywhere helps nobody, and
        finding its every place was most of a question's time), unless nothing else is left."""
        if ranking.ruled(len(parsed.slots)):
            return parsed
        limit = SNIPPET_COMMON_SHARE * searcher.num_docs
        kept = tuple(
            s
            for s in parsed.slots
            if any(
                not isinstance(a, QueryTerm) or searcher.doc_freq("content", a.text) <= limit
                for a in s.alternatives
            )
        )
        return ParsedQuery(kept) if kept else parsed

    def _previous(self, visible: tuple[str, ...] | None) -> TextQuery:
        """A query builder over the index being rebuilt, as it was (it has no stemmed fields:
        words score in the exact ones), or IndexRebuilding when it cannot be read."""
        if self.directory is None:
            raise IndexRebuilding(REBUILDING)
        try:
            if self._older is None:
                self._older = tantivy.Index.open(str(self.directory))
                register(self._older)
            older = TextQuery(self._older.schema, self._older.searcher(), stemmed=False, visible=visible)
            older.dated = False  # no `date` field: it sorts and filters by modified_at
            older.held = False  # no `container_id` field: nothing is folded meanwhile
            return older
        except ValueError as exc:
            raise IndexRebuilding(REBUILDING) from exc

    def _search(self, query: SearchQuery, builder: TextQuery) -> SearchPage:
        started = time.perf_counter()
        spec = query.syntax()
        parsed = parse_query(spec.text)
        searcher = builder.searcher
        text = builder.build(parsed, query.matching_strategy)
        limit, offset = max(0, query.limit), max(0, query.offset)
        sort = SORT_FIELDS.get(query.effective_sort())
        if sort and not builder.dated:
            sort = ("modified_at", sort[1])
        fold = folded_out(query, spec, builder, text.match)
        tquery = compose(text.scored, query, spec, builder, fold)
        kwargs = {"order_by_field": sort[0], "order": sort[1]} if sort else {}
        # limit=0 panics inside tantivy: fetch one and drop it.
        found = searcher.search(tquery, max(1, limit), count=True, offset=offset, **kwargs)
        hits, total = found.hits[:limit], found.count
        docs = [_stored(searcher, address) for _, address in hits]
        if query.snippet_length:  # 0: the ranking only, no text read (search/hybrid.py)
            docs = self._with_content(docs)
        if sort is None:
            scores = [float(key) for key, _ in hits]
        elif spec.is_filter_only:  # nothing that scores: no second search for the scores
            scores = [0.0] * len(docs)
        else:
            scores = self._scores(builder, tquery, docs, [a for _, a in hits])
        matcher = TermMatcher.from_query(self._shown(builder.parsed, searcher))
        results = [
            search_hit(doc, score, doc.get("content"), matcher, query.snippet_length)
            for doc, score in zip(docs, scores, strict=True)
        ]
        facets = None
        if query.facets:
            matched = compose(text.match, query, spec, builder, fold)
            facets = self._facets(searcher, matched, tuple(f for f in query.facets if f != "folder"))
            if "folder" in query.facets:  # (an older index being rebuilt has no folder_edges)
                parents = query.folder_facet if builder.dated else ()
                facets["folder"] = self._folders(searcher, matched, parents)
            facets = {name: facets[name] for name in query.facets}
        elapsed = int((time.perf_counter() - started) * 1000)
        return SearchPage(results=results, total=total, processing_time_ms=elapsed, facet_distribution=facets)

    def _facets(
        self, searcher: tantivy.Searcher, tquery: Query, names: tuple[str, ...]
    ) -> dict[str, dict[str, int]]:
        """Counts per value of each facet over every match (one pass over fast fields)."""
        aggs = {name: {"terms": {"field": FACET_FIELDS[name], "size": MAX_FACET_VALUES}} for name in names}
        answer = searcher.aggregate(tquery, aggs)
        return {
            name: {_facet_key(b["key"]): int(b["doc_count"]) for b in answer[name]["buckets"]}
            for name in names
        }

    @staticmethod
    def _folders(searcher: tantivy.Searcher, tquery: Query, parents: tuple[str, ...]) -> dict[str, int]:
        """Matches per direct subfolder of each of `parents` (the index's folder_edges terms
        that start with the parent: one look-up in the term dictionary each)."""
        counts: dict[str, int] = {}
        for parent in parents:
            prefix = parent + FOLDER_EDGE
            for term, count in searcher.terms_with_prefix("folder_edges", prefix, filter_query=tquery):
                if count > 0:
                    child = term[len(prefix) :]
                    counts[child] = counts.get(child, 0) + int(count)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_FACET_VALUES]
        return dict(top)

    @staticmethod
    def _scores(builder: TextQuery, tquery: Query, docs: list[Doc], addresses: list) -> list[float]:
        """Relevance scores of a field-sorted page: one scored search limited to its ids."""
        if not docs:
            return []
        searcher = builder.searcher
        ids = Query.term_set_query(builder.schema, "id", [d["id"] for d in docs])
        only_page = Query.const_score_query(ids, 0.0)  # a filter: adds nothing to scores
        scored = Query.boolean_query([(Occur.Must, tquery), (Occur.Must, only_page)])
        hits = searcher.search(scored, len(docs), count=False).hits
        by_address = {(a.segment_ord, a.doc): float(score) for score, a in hits}
        return [by_address.get((a.segment_ord, a.doc), 0.0) for a in addresses]


def _facet_key(key: object) -> str:
    """A facet bucket key as text (numbers come back as floats for some field types)."""
    if isinstance(key, float) and key.is_integer():
        return str(int(key))
    return str(key)


def register(index: tantivy.Index) -> None:
    """Our tokenizers on an index (they are not stored with it: again after every open)."""
    index.register_tokenizer(TOKENIZER, folding())
    index.register_tokenizer(STEM_TOKENIZER, stemming())


def _nfc(text: str) -> str:
    """NFC form, so decomposed accents fold like composed ones."""
    return text if text.isascii() else unicodedata.normalize("NFC", text)


def _stored(searcher: tantivy.Searcher, address: tantivy.DocAddress) -> Doc:
    """The stored JSON document at `address` (without its content)."""
    return json.loads(searcher.doc(address).get_first("doc"))
