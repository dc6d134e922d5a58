"""Hybrid search: the keyword backend's ranking fused with meaning (passage vectors).

The backend ranks the keyword matches (its first WINDOW at least); the vector store gives the
CANDIDATES documents whose best passage is closest to the question, among the sources the
asker may see with meaning on; the backend then keeps those that pass the query's filters
(`within_ids`). The two rankings are fused by reciprocal rank (`fuse`), weighted by
`semantic_ratio` (0: words only, 1: meaning only); docs/relevance.md says why and what was
measured.

Exact words still win where people expect them to: a query with a quoted phrase, a token with
digits or inner punctuation (an invoice number, a file name, an e-mail address) or a single
word is a search by words: its keyword matches in their keyword order, and nothing that only
looks like them (a search for `narwhal` does not list the walrus notes, an invoice number no
other invoice). A query of filters only, a sort other than relevance or a ratio of 0 is a keyword
search, and so is `matching_strategy: all` (the asker wants every word). Documents not
embedded yet are found by words as before.

Pagination: the fused list covers the keyword window plus meaning's own documents (those
that do not match the words); past it come the keyword matches in their keyword order, so
every document has one position and `total` = keyword matches + meaning-only documents.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable

from webapp.search import Hit, SearchBackend, SearchPage, SearchQuery
from webapp.search.embedder import RELATED

DEFAULT_SEMANTIC_RATIO = 0.5  # chosen by bench/semantic.py on CISI, docs/relevance.md
CANDIDATES = 50  # documents meaning brings per query
WINDOW = 100  # keyword matches fused at least (more when a page reaches further)
RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al.: 60)
WORDS, MEANING, BOTH = "words", "meaning", "both"
# a word with a digit (its first digit ends `[^\W\d]*`: `\w*\d\w*` tried every digit of a long
# number against every end, quadratic) or two words joined by a dot, `_`, `@`, `/`, `\`, `-`
_EXACT_TOKEN = re.compile(r"[^\W\d]*\d\w*|\w+[._@/\\-]\w+")

Nearest = Callable[[int], list[tuple[str, float]]]  # k -> the question's k nearest (id, sim)


def exact_first(text: str) -> bool:
    """Whether a query asks for exact words: a quoted phrase, an identifier or a file name
    (a token with a digit or inner punctuation), or a single word."""
    if '"' in text:
        return True
    tokens = text.split()
    return len(tokens) == 1 or any(_EXACT_TOKEN.fullmatch(t.strip("()")) for t in tokens)


def fuse(words: list[str], meaning: list[str], ratio: float) -> list[str]:
    """Reciprocal rank fusion of two rankings, meaning weighted `ratio`, words 1 - ratio."""
    score: dict[str, float] = {}
    for weight, ranking in ((1.0 - ratio, words), (ratio, meaning)):
        for rank, doc_id in enumerate(ranking):
            score[doc_id] = score.get(doc_id, 0.0) + weight / (RRF_K + rank + 1)
    order = {doc_id: i for i, doc_id in enumerate(words)}  # ties: the keyword order
    return sorted(score, key=lambda d: (-score[d], order.get(d, len(order))))


def uses_meaning(query: SearchQuery, ratio: float) -> bool:
    """Whether meaning takes part: some ratio, free text of plain words (not exact_first),
    ranked by relevance, and not `matching_strategy: all` (every word must match)."""
    spec = query.syntax()
    return (
        ratio > 0
        and not spec.is_filter_only
        and query.effective_sort() == "relevance"
        and query.matching_strategy != "all"
        and not exact_first(spec.text)
    )


def words_only(backend: SearchBackend, query: SearchQuery) -> SearchPage:
    """The keyword search, each hit marked as found by words."""
    page = backend.search(query)
    return dataclasses.replace(page, results=[Hit(**{**r, "match": WORDS}) for r in page.results])


def search(
    backend: SearchBackend,
    query: SearchQuery,
    ratio: float,
    nearest: Nearest | None,
    min_similarity: float = RELATED,
) -> SearchPage:
    """Run `query` fused with meaning (`nearest`: the question's nearest documents among the
    asker's sources with meaning on, search/meaning_index.py); words alone when it is None
    or meaning does not apply."""
    if nearest is None or not uses_meaning(query, ratio):
        return words_only(backend, query)
    started = time.perf_counter()
    window = max(WINDOW, query.offset + query.limit)
    # the rankings without snippets (no text read); the page's results are fetched after
    words = backend.search(dataclasses.replace(query, limit=window, offset=0, snippet_length=0))
    by_id = {r["id"]: r for r in words.results}
    similar = {i: sim for i, sim in nearest(CANDIDATES) if sim >= min_similarity}
    meaning = _passing(backend, query, similar, by_id, words.total > len(words.results))
    if ratio >= 1.0:
        ranked = [r["id"] for r in meaning] + [i for i in by_id if i not in similar]
    else:
        ranked = fuse(list(by_id), [r["id"] for r in meaning], ratio)
    found = {r["id"]: r for r in meaning}
    fused = []
    for doc_id in ranked:
        result = by_id.get(doc_id) or found[doc_id]
        result["match"] = (
            BOTH if doc_id in by_id and doc_id in found else WORDS if doc_id in by_id else MEANING
        )
        fused.append(result)
    only_meaning = sum(r["match"] == MEANING for r in fused)
    results = _with_snippets(backend, query, fused[query.offset : query.offset + query.limit])
    if len(results) < query.limit and words.total > len(words.results):  # past the window
        start = len(words.results) + max(0, query.offset - len(fused))
        deeper = backend.search(
            dataclasses.replace(query, offset=start, limit=query.limit - len(results), facets=())
        )
        for result in deeper.results:
            result["match"] = WORDS
        results += deeper.results
    elapsed = int((time.perf_counter() - started) * 1000)
    return SearchPage(results, words.total + only_meaning, elapsed, words.facet_distribution)


def _passing(
    backend: SearchBackend,
    query: SearchQuery,
    similar: dict[str, float],
    by_id: dict[str, Hit],
    deeper_words: bool,
) -> list[Hit]:
    """Meaning's candidates that pass the query's filters and sources, closest first, as
    results; those matching the words below the keyword window are left to their keyword
    position (so no document is listed twice)."""
    if not similar:
        return []
    spec = dataclasses.replace(query.syntax(), text="")
    check = dataclasses.replace(
        query,
        spec=spec,
        within_ids=tuple(similar),
        offset=0,
        limit=len(similar),
        facets=(),
        sort="relevance",
        snippet_length=0,
    )
    passing = {r["id"]: r for r in backend.search(check).results}
    outside = [i for i in passing if i not in by_id]
    if deeper_words and outside:
        also = backend.search(
            dataclasses.replace(
                query, within_ids=tuple(outside), offset=0, limit=len(outside), facets=(), snippet_length=0
            )
        )
        for result in also.results:
            passing.pop(result["id"], None)
    for doc_id, result in passing.items():
        result["score"] = similar[doc_id]
    return sorted(passing.values(), key=lambda r: -similar[r["id"]])


def _with_snippets(backend: SearchBackend, query: SearchQuery, page: list[Hit]) -> list[Hit]:
    """The page's results with their snippets: the words' matches marked in keyword hits, the
    beginning of the text for documents only meaning found; order, score and match kept."""
    if not page:
        return page
    by_words = tuple(r["id"] for r in page if r["match"] != MEANING)
    by_meaning = tuple(r["id"] for r in page if r["match"] == MEANING)
    snippets: dict[str, str] = {}
    for ids, spec in ((by_words, query.syntax()), (by_meaning, dataclasses.replace(query.syntax(), text=""))):
        if ids:
            found = backend.search(
                dataclasses.replace(query, spec=spec, within_ids=ids, offset=0, limit=len(ids), facets=())
            )
            snippets.update({r["id"]: r["snippet"] for r in found.results})
    return [dict(r, snippet=snippets.get(r["id"], r["snippet"])) for r in page]
