"""Hybrid search: the keyword backend's ranking fused with meaning (passage vectors).

Meaning (search/meaning_index.py) gives the CANDIDATES documents whose best passage is
closest to the question among the sources the asker may see with meaning on: those close
enough to rank (`Meaning.related`) reorder the documents the words found, and those meaning
is confident about (`Meaning.confident`, above the floor docs/relevance.md calibrates) may be
listed when no word reaches them. The two rankings are fused by reciprocal rank (`fuse`),
weighted by `semantic_ratio` (0: words only, 1: meaning only); docs/relevance.md says why and
what was measured.

Exact words still win where people expect them to: a query with a quoted phrase, a token with
digits or inner punctuation (an invoice number, a file name, an e-mail address) or a single
word is a search by words: its keyword matches in their keyword order, and nothing that only
looks like them (a search for `narwhal` does not list the walrus notes, an invoice number no
other invoice). A query of filters only, a sort other than relevance or a ratio of 0 is a keyword
search, and so is `matching_strategy: all` (the asker wants every word). Documents not
embedded yet are found by words as before.

At most three engine calls a page, each hit built once:
1. rank the words: the first WINDOW matches (ids and scores, no text read), the confident
   documents matching as if the words did (`SearchQuery.also_ids`, scoring 0), so `total`
   and every facet count exactly the listed set: word matches and confident meaning-only
   documents that pass the query's filters;
2. rank the meaning: only when some confident documents lie beyond that window, one call
   limited to them says which pass the filters and which the words reach (a score above 0);
3. fetch the page's hits, with snippets, `match` and `score` set as each is built.
The fused list covers the keyword window plus meaning's own documents; past it come the other
keyword matches in their keyword order, so every document has one position.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from webapp.search import Hit, SearchBackend, SearchPage, SearchQuery

DEFAULT_SEMANTIC_RATIO = 0.5  # chosen by bench/semantic.py on CISI, docs/relevance.md
CANDIDATES = 50  # documents meaning brings per query
WINDOW = 100  # keyword matches fused at least (more when a page reaches further)
# Reciprocal rank fusion's constant. Cormack et al.'s 60 fuses many deep runs; over two lists
# it made first place worth barely more than tenth (1/61 against 1/70), so a document in both
# lists at middling ranks beat the first of either: 10 is above 60 on four collections
# (docs/relevance.md, "The fusion's constant")
RRF_K = 10
WORDS, MEANING, BOTH = "words", "meaning", "both"
# a word with a digit (its first digit ends `[^\W\d]*`: `\w*\d\w*` tried every digit of a long
# number against every end, quadratic) or two words joined by a dot, `_`, `@`, `/`, `\`, `-`
_EXACT_TOKEN = re.compile(r"[^\W\d]*\d\w*|\w+[._@/\\-]\w+")


@dataclass(frozen=True)
class Meaning:
    """What meaning says of one question: {doc id: similarity} of the candidates close enough
    to rank, and those it is confident enough about to list without a word."""

    related: Mapping[str, float] = field(default_factory=dict)
    confident: frozenset[str] = frozenset()


Asked = Callable[[], Meaning]  # the question's meaning, computed when meaning takes part


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


def search(backend: SearchBackend, query: SearchQuery, ratio: float, asked: Asked | None) -> SearchPage:
    """Run `query` fused with meaning (`asked`: the question's candidates among the asker's
    sources with meaning on, search/meaning_index.py); words alone when it is None or meaning
    does not apply."""
    if asked is None or not uses_meaning(query, ratio):
        return words_only(backend, query)
    started = time.perf_counter()
    meaning = asked()
    window = max(WINDOW, query.offset + query.limit)
    ranking = dataclasses.replace(
        query, limit=window, offset=0, snippet_length=0, also_ids=tuple(sorted(meaning.confident))
    )
    words = backend.search(ranking)  # 1: the words' ranking, total and facets
    found, only = _split(words, meaning)
    unseen = [i for i in meaning.confident if i not in found and i not in only]
    if unseen and words.total > len(words.results):  # 2: confident documents past the window
        beyond = backend.search(
            dataclasses.replace(ranking, within_ids=tuple(unseen), limit=len(unseen), facets=())
        )
        only += [r["id"] for r in beyond.results if r["id"] in meaning.confident and not r["score"] > 0]
    by_meaning = sorted(
        (i for i in meaning.related if i in found or i in only), key=lambda i: -meaning.related[i]
    )
    by_meaning += sorted((i for i in only if i not in meaning.related), key=lambda i: i)
    if ratio >= 1.0:
        ranked = by_meaning + [i for i in found if i not in meaning.related]
    else:
        ranked = fuse(list(found), by_meaning, ratio)
    results = _page(backend, query, ranked[query.offset : query.offset + query.limit], found, meaning)
    elapsed = int((time.perf_counter() - started) * 1000)
    return SearchPage(results, words.total, elapsed, words.facet_distribution)


def _split(words: SearchPage, meaning: Meaning) -> tuple[dict[str, float], list[str]]:
    """The ranking's word matches ({id: keyword score}, in order) and the confident documents
    no word reaches (scoring 0 for the text: matched through `also_ids` alone)."""
    found: dict[str, float] = {}
    only: list[str] = []
    for result in words.results:
        if result["id"] in meaning.confident and not result["score"] > 0:
            only.append(result["id"])
        else:
            found[result["id"]] = result["score"]
    return found, only


def _page(
    backend: SearchBackend, query: SearchQuery, ids: list[str], found: Mapping[str, float], meaning: Meaning
) -> list[Hit]:
    """The page's hits in this order, built once (3: one call, with snippets): `match` and
    `score` (the keyword score, or the similarity of a document only meaning found)."""
    if not ids:
        return []
    alone = tuple(i for i in ids if i not in found)
    fetch = dataclasses.replace(
        query, within_ids=tuple(ids), also_ids=alone, offset=0, limit=len(ids), facets=()
    )
    hits = {r["id"]: r for r in backend.search(fetch).results}
    return [_hit(hits[i], found, meaning) for i in ids if i in hits]


def _hit(hit: Hit, found: Mapping[str, float], meaning: Meaning) -> Hit:
    """One result with how it was found."""
    doc_id = hit["id"]
    if doc_id not in found:
        return Hit(**{**hit, "match": MEANING, "score": float(meaning.related.get(doc_id, 0.0))})
    match = BOTH if doc_id in meaning.related or doc_id in meaning.confident else WORDS
    return Hit(**{**hit, "match": match, "score": found[doc_id]})
