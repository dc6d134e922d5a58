"""Query text parsing, accent folding and the typo rules shared by backends and snippets."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import OSA

# A token is a run of letters or a run of digits: `2024-invoice_acme.pdf` gives
# `2024`, `invoice`, `acme`, `pdf`, and `report2024` gives `report`, `2024`.
# The Tantivy tokenizer uses the same pattern (Rust regex syntax is compatible).
TOKEN_PATTERN = r"[^\W\d_]+|\d+"
TOKEN_RE = re.compile(TOKEN_PATTERN)
_PHRASE_RE = re.compile(r'"([^"]*)"?')

# Like Meilisearch, only the first words of a query are used (keeps fuzzy expansion bounded).
MAX_QUERY_WORDS = 10
ONE_TYPO_MIN_LENGTH = 5
TWO_TYPOS_MIN_LENGTH = 9

@lru_cache(maxsize=1)
def _char_folder():
    """Tantivy's own lower-case + ASCII-folding filters, so query words fold like index terms."""
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
        .build()
    )


@lru_cache(maxsize=8192)
def _fold_char(char: str) -> str:
    return "".join(_char_folder().analyze(char))


def fold(text: str) -> str:
    """Lower-case and ASCII-fold `text` the way the search index folds its terms."""
    if text.isascii():
        return text.lower()
    return "".join(c.lower() if c.isascii() else _fold_char(c) for c in text)


def _fold_all(words: list[str]) -> list[str]:
    """fold() of many words: one lower() call when all are ASCII (and none holds a line break)."""
    joined = "\n".join(words)
    if joined.isascii():
        folded = joined.lower().split("\n")
        if len(folded) == len(words):
            return folded
    return [fold(w) for w in words]


def tokens(text: str) -> list[str]:
    """Split text into folded index terms (letter runs and digit runs)."""
    return [fold(t) for t in TOKEN_RE.findall(unicodedata.normalize("NFC", text))]


def allowed_typos(term: str) -> int:
    """Number of typos tolerated for a folded query word: 0, 1 from 5 letters, 2 from 9."""
    if len(term) >= TWO_TYPOS_MIN_LENGTH:
        return 2
    return 1 if len(term) >= ONE_TYPO_MIN_LENGTH else 0


@dataclass(frozen=True)
class QueryTerm:
    """One query word: folded text, typos allowed, and whether it also matches as a prefix."""

    text: str
    typos: int
    prefix: bool = False


@dataclass(frozen=True)
class ParsedQuery:
    """A query split into free words (all must match) and quoted phrases (must match)."""

    terms: tuple[QueryTerm, ...] = ()
    phrases: tuple[tuple[str, ...], ...] = ()

    @property
    def is_empty(self) -> bool:
        """True when the query has nothing to search for (placeholder search)."""
        return not self.terms and not self.phrases


def parse_query(q: str, max_words: int = MAX_QUERY_WORDS) -> ParsedQuery:
    """Parse user query text into words and phrases; the last word is a prefix if it ends q."""
    phrases: list[tuple[str, ...]] = []
    words: list[str] = []
    last_end = 0
    for m in _PHRASE_RE.finditer(q):
        words.extend(tokens(q[last_end:m.start()]))
        phrase = tuple(tokens(m.group(1)))
        if phrase:
            phrases.append(phrase)
        last_end = m.end()
    tail = q[last_end:]
    tail_words = tokens(tail)
    words.extend(tail_words)
    # The last word is still being typed only when nothing follows it (no space, no quote).
    ends_in_word = bool(tail_words) and TOKEN_RE.fullmatch(tail[-1]) is not None
    budget = max(0, max_words - sum(len(p) for p in phrases))
    prefix_last = ends_in_word and len(words) <= budget
    words = words[:budget]
    terms = [QueryTerm(w, allowed_typos(w)) for w in words]
    if terms and prefix_last:
        terms[-1] = QueryTerm(terms[-1].text, terms[-1].typos, prefix=True)
    return ParsedQuery(tuple(terms), tuple(phrases))


def typo_match(term: QueryTerm, word: str) -> bool:
    """True when folded `word` matches `term` exactly, as a prefix, or within its typos."""
    text = term.text
    if word == text or (term.prefix and word.startswith(text)):
        return True
    if term.typos == 0:
        return False
    d = term.typos
    if not term.prefix:
        return abs(len(word) - len(text)) <= d and OSA.distance(text, word, score_cutoff=d) <= d
    for length in range(max(1, len(text) - d), min(len(word), len(text) + d) + 1):
        if OSA.distance(text, word[:length], score_cutoff=d) <= d:
            return True
    return False


@dataclass
class TermMatcher:
    """Decides which words of a text match a query; caches per surface form."""

    terms: tuple[QueryTerm, ...]
    _cache: dict[str, int | None] = field(default_factory=dict, repr=False)
    _known: dict[str, int] = field(default_factory=dict, repr=False)
    _version: int = field(default=0, repr=False)  # counts the changes to _known
    _forms: tuple[int, frozenset[str]] = field(default=(-1, frozenset()), repr=False)

    @classmethod
    def from_query(cls, parsed: ParsedQuery) -> TermMatcher:
        """Matcher for a parsed query: free words with typo rules, phrase words exactly."""
        phrase_terms = [QueryTerm(w, 0) for p in parsed.phrases for w in p]
        return cls(tuple(parsed.terms) + tuple(phrase_terms))

    @classmethod
    def from_words(cls, words: Iterable[str]) -> TermMatcher:
        """Matcher for an explicit set of matched words (e.g. reported by the engine)."""
        return cls(tuple(QueryTerm(fold(w), 0) for w in dict.fromkeys(words) if w))

    def match(self, word: str) -> int | None:
        """Index of the first query term that surface `word` matches, or None."""
        if word in self._cache:
            return self._cache[word]
        return self.match_many([word]).get(word)

    def known_forms(self) -> frozenset[str]:
        """Lower-case beginnings of the query's words and of every word matched so far, none
        the beginning of another: a token that starts with none of them was not seen to match."""
        if self._forms[0] != self._version:
            words = sorted({t.text for t in self.terms if t.text} | {w.lower() for w in self._known})
            forms: list[str] = []
            for word in words:  # sorted, so a beginning comes right before the words it starts
                if not forms or not word.startswith(forms[-1]):
                    forms.append(word)
            self._forms = (self._version, frozenset(forms))
        return self._forms[1]

    def seen_terms(self) -> set[int]:
        """Indexes of the terms some word has matched so far."""
        return set(self._known.values())

    def match_many(self, words: Iterable[str]) -> dict[str, int]:
        """The words (surface forms) that match, each with the index of its query term."""
        cache = self._cache
        words = words if isinstance(words, set | frozenset) else set(words)
        misses = list(words.difference(cache))
        if misses:
            if len(cache) > 200_000:
                cache.clear()
                self._known.clear()
                self._version += 1
            found = self._match_uncached(misses)
            cache.update(zip(misses, found, strict=True))
            matched = {w: i for w, i in zip(misses, found, strict=True) if i is not None}
            if matched:
                self._known.update(matched)
                self._version += 1
        known = self._known
        return {w: known[w] for w in words.intersection(known)}

    def _match_uncached(self, words: list[str]) -> list[int | None]:
        """Bulk matching: exact and prefix by string ops, typos by rapidfuzz in C++."""
        folded = _fold_all(words)
        found: list[int | None] = [None] * len(words)
        for index in range(len(self.terms) - 1, -1, -1):  # first term wins: assign last
            for j in self._term_hits(self.terms[index], folded):
                found[j] = index
        return found

    @staticmethod
    def _term_hits(term: QueryTerm, folded: list[str]) -> set[int]:
        """Positions in `folded` that match one term (words of impossible lengths skipped)."""
        text, d, n = term.text, term.typos, len(term.text)
        shortest = max(1, n - d)
        if term.prefix:
            near = [j for j, w in enumerate(folded) if len(w) >= shortest]
        else:
            near = [j for j, w in enumerate(folded) if shortest <= len(w) <= n + d]
        if not d:  # exact or prefix only
            if term.prefix:
                return {j for j in near if folded[j].startswith(text)}
            return {j for j in near if folded[j] == text}
        words = [folded[j] for j in near]
        if term.prefix:  # within d typos of some head of the word: every head length at once
            words = [w[:size] for size in range(shortest, n + d + 1) for w in words]
        found = process.extract(text, words, scorer=OSA.distance, score_cutoff=d, limit=None)
        return {near[k % len(near)] for _, _, k in found}
