"""Query text parsing, accent folding and the typo rules shared by backends and snippets."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import OSA

# Chinese, Japanese and Korean letters (Hangul jamo, kana, CJK ideographs and their
# extensions, Hangul syllables, compatibility ideographs, half-width katakana).
CJK_CHARS = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ebef"
)
# A token is a run of letters or a run of digits: `2024-invoice_acme.pdf` gives
# `2024`, `invoice`, `acme`, `pdf`, and `report2024` gives `report`, `2024`. A run of CJK
# letters is a token of its own (`PDF说明书` gives `pdf`, `说明书`).
TOKEN_PATTERN = f"[{CJK_CHARS}]+|[^\\W\\d_{CJK_CHARS}]+|\\d+"
TOKEN_RE = re.compile(TOKEN_PATTERN)
# The index splits CJK runs into single letters, so any run of them is found as a phrase of
# its letters (`说明书` in `募集说明书`); Rust regex syntax is compatible with Python's here.
INDEX_TOKEN_PATTERN = f"[{CJK_CHARS}]|[^\\W\\d_{CJK_CHARS}]+|\\d+"
CJK_RE = re.compile(f"[{CJK_CHARS}]")
_ITEM_RE = re.compile(r'"([^"]*)"?|[^\s"]+')
OR_WORD = "OR"  # upper-case only: lower-case `or` is a word

# Like Meilisearch, only the first words of a query are typo-tolerant (keeps fuzzy expansion
# bounded); the words after them, up to MAX_QUERY_WORDS, match exactly or by their stem, so a
# long question is searched whole.
MAX_TYPO_WORDS = 10
MAX_QUERY_WORDS = 100
ONE_TYPO_MIN_LENGTH = 5
TWO_TYPOS_MIN_LENGTH = 9
WHOLE_WORD_MAX = 2  # see TermMatcher.whole_words


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


def is_cjk(word: str) -> bool:
    """True for a token of CJK letters (found as a run of letters, never with typos)."""
    return bool(word) and CJK_RE.match(word) is not None


def allowed_typos(term: str) -> int:
    """Number of typos tolerated for a folded query word: 0, 1 from 5 letters, 2 from 9."""
    if is_cjk(term):
        return 0
    if len(term) >= TWO_TYPOS_MIN_LENGTH:
        return 2
    return 1 if len(term) >= ONE_TYPO_MIN_LENGTH else 0


@lru_cache(maxsize=1)
def _stemmer():
    """Tantivy's English Snowball stemmer over whitespace-separated folded words."""
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def stemmable(word: str) -> bool:
    """Words the English stemmer is used for: folded Latin letters, at least three."""
    return len(word) >= 3 and word.isascii() and word.isalpha()


def stems(words: list[str]) -> list[str]:
    """English Snowball stems of folded words, in one call (a word not stemmable is kept)."""
    todo = [w for w in words if stemmable(w)]
    if not todo:
        return list(words)
    found = _stemmer().analyze(" ".join(todo))
    if len(found) != len(todo):  # cannot happen for letter-only words; stay safe
        found = [(_stemmer().analyze(w) or [w])[0] for w in todo]
    by_word = dict(zip(todo, found, strict=True))
    return [by_word.get(w, w) for w in words]


def stem_variant(word: str, form: str) -> bool:
    """True when `form`, of the same stem as `word`, counts as a stem match: a form of the
    same length differs only in spelling (`lazi` and `lazy` both give `lazi`), which is
    what the typo rules decide, not the stemmer."""
    return len(form) != len(word)


def index_terms(text: str) -> list[str]:
    """Folded terms as the search index holds them: CJK runs split into single letters."""
    out: list[str] = []
    for token in tokens(text):
        out.extend(list(token) if is_cjk(token) else [token])
    return out


def stem_head(stem: str) -> str:
    """The beginning every word of this stem starts with (`happi` comes from `happy` too)."""
    return stem[:-1] if stem.endswith("i") else stem


def one_typo_forms(word: str) -> set[str]:
    """Every word one edit from `word` (a letter left out, added, changed, or two neighbours
    swapped: OSA distance 1, Tantivy's fuzzy distance with transpositions), over the letters
    a-z and the word's own: the forms of a typo-only match a term query can score."""
    letters = set("abcdefghijklmnopqrstuvwxyz") | set(word)
    heads_tails = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    out = {head + tail[1:] for head, tail in heads_tails if tail}
    out |= {head + tail[1] + tail[0] + tail[2:] for head, tail in heads_tails if len(tail) > 1}
    out |= {head + c + tail[1:] for head, tail in heads_tails if tail for c in letters}
    out |= {head + c + tail for head, tail in heads_tails for c in letters}
    out.discard(word)
    return out


@dataclass(frozen=True)
class QueryTerm:
    """One query word: folded text, typos allowed, and whether it also matches as a prefix."""

    text: str
    typos: int
    prefix: bool = False


class Phrase(tuple):
    """Folded words matched side by side, in order: a quoted phrase, or the parts of ONE typed
    word that the index splits (`file7` is `file` `7`; `INV-2024-001`, `v1.2.3`, an e-mail
    address). `raw` is the text as typed (an engine with its own tokenizer gets that);
    `prefix` is set when the last part is still being typed (it matches as a prefix)."""

    raw: str
    prefix: bool

    def __new__(cls, words, raw: str = "", prefix: bool = False) -> Phrase:
        self = super().__new__(cls, words)
        self.raw = raw or " ".join(self)
        self.prefix = prefix
        return self


Alternative = QueryTerm | Phrase  # a word, or a phrase (quoted, or one typed word's parts)


@dataclass(frozen=True)
class Slot:
    """One place of the query: its alternatives (`a OR b`); any one of them fills it."""

    alternatives: tuple[Alternative, ...]

    @property
    def size(self) -> int:
        """Query words this slot spends of the budget."""
        return sum(1 if isinstance(a, QueryTerm) else len(a) for a in self.alternatives)


@dataclass(frozen=True)
class ParsedQuery:
    """A query as slots in order: words and phrases, each with its `OR` alternatives."""

    slots: tuple[Slot, ...] = ()

    @property
    def terms(self) -> tuple[QueryTerm, ...]:
        """Every free word of the query, in order."""
        return tuple(a for s in self.slots for a in s.alternatives if isinstance(a, QueryTerm))

    @property
    def phrases(self) -> tuple[Phrase, ...]:
        """Every phrase of the query (quoted, or a typed word's parts), in order."""
        return tuple(a for s in self.slots for a in s.alternatives if isinstance(a, Phrase))

    @property
    def is_empty(self) -> bool:
        """True when the query has nothing to search for (placeholder search)."""
        return not self.slots


def _items(q: str) -> Iterable[tuple[str, list[Alternative]]]:
    """The query's pieces in order: ("or", []) for a literal OR, else ("text", alternatives)."""
    for m in _ITEM_RE.finditer(q):
        if m.group(1) is not None:
            phrase = tuple(tokens(m.group(1)))
            yield "text", [Phrase(phrase)] if phrase else []
        elif m.group(0) == OR_WORD:
            yield "or", []
        else:
            parts = tokens(m.group(0))
            if len(parts) == 1:
                yield "text", [QueryTerm(parts[0], allowed_typos(parts[0]))]
            else:  # one typed word the index splits: its parts side by side (no typos)
                yield "text", [Phrase(parts, m.group(0))] if parts else []


def parse_query(q: str, max_words: int = MAX_QUERY_WORDS) -> ParsedQuery:
    """Parse query text into slots; `a OR b` fills one slot; the last word is a prefix when it
    ends q (it is still being typed); only the first `max_words` words are kept."""
    slots: list[list[Alternative]] = []
    join = False
    for kind, alternatives in _items(q):
        if kind == "or":
            join = bool(slots)  # a leading OR has nothing to join
            continue
        for k, alternative in enumerate(alternatives):
            if join and k == 0:
                slots[-1].append(alternative)
            else:
                slots.append([alternative])
        join = join and not alternatives
    kept, used = [], 0
    for alternatives in slots:
        slot = Slot(tuple(alternatives))
        if used + slot.size > max_words:
            break
        if used + slot.size > MAX_TYPO_WORDS:
            slot = Slot(
                tuple(QueryTerm(a.text, 0) if isinstance(a, QueryTerm) else a for a in slot.alternatives)
            )
        kept.append(slot)
        used += slot.size
    ends_in_word = bool(q) and TOKEN_RE.fullmatch(q[-1]) is not None
    if kept and len(kept) == len(slots) and ends_in_word:
        kept[-1] = _with_prefix_last(kept[-1], q)
    return ParsedQuery(tuple(kept))


def _with_prefix_last(slot: Slot, q: str) -> Slot:
    """The slot with its last alternative matching as a prefix (a Latin word, or the last
    part of a typed word: `INV-2024-00` finds `INV-2024-001`; not a quoted phrase)."""
    last = slot.alternatives[-1]
    if isinstance(last, Phrase):
        if q.rstrip().endswith('"') or is_cjk(last[-1]):
            return slot
        return Slot(slot.alternatives[:-1] + (Phrase(last, last.raw, prefix=True),))
    if is_cjk(last.text):
        return slot
    return Slot(slot.alternatives[:-1] + (QueryTerm(last.text, last.typos, prefix=True),))


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
    _unseen: dict[int, int] = field(default_factory=dict, repr=False)  # see note_unseen
    stemmed: bool = True  # English stems match too (not for an engine's own word list)
    _stems: tuple[str | None, ...] | None = field(default=None, repr=False)

    @classmethod
    def from_query(cls, parsed: ParsedQuery) -> TermMatcher:
        """Matcher for a parsed query: free words with typo rules, phrase words exactly."""
        phrase_terms = [QueryTerm(w, 0) for p in parsed.phrases for w in p]
        return cls(tuple(parsed.terms) + tuple(phrase_terms))

    @classmethod
    def from_words(cls, words: Iterable[str]) -> TermMatcher:
        """Matcher for an explicit set of matched words (e.g. reported by the engine)."""
        return cls(tuple(QueryTerm(fold(w), 0) for w in dict.fromkeys(words) if w), stemmed=False)

    def match(self, word: str) -> int | None:
        """Index of the first query term that surface `word` matches, or None."""
        if word in self._cache:
            return self._cache[word]
        return self.match_many([word]).get(word)

    def known_forms(self) -> frozenset[str]:
        """Lower-case beginnings of the query's words and of every word matched so far, none
        the beginning of another: a token that starts with none of them was not seen to match.
        The whole_words() are among them as they are (they begin too many other words)."""
        if self._forms[0] != self._version:
            whole = self.whole_words()
            heads = {stem_head(s) for s in self.term_stems() if s and len(stem_head(s)) >= 3}
            words = sorted(
                ({t.text for t in self.terms if t.text} | heads | {w.lower() for w in self._known}) - whole
            )
            forms: list[str] = []
            for word in words:  # sorted, so a beginning comes right before the words it starts
                if not forms or not word.startswith(forms[-1]):
                    forms.append(word)
            self._forms = (self._version, frozenset(forms) | whole)
        return self._forms[1]

    def whole_words(self) -> frozenset[str]:
        """Query words of one or two characters that only a token equal to them matches (no
        typos, no prefix, no stem): `r` begins a fifth of all words, so a text is searched
        for them as whole tokens, not for the tokens they begin."""
        return frozenset(
            t.text
            for t, stem in zip(self.terms, self.term_stems(), strict=True)
            if 0 < len(t.text) <= WHOLE_WORD_MAX
            and not t.typos
            and not t.prefix
            and stem is None
            and not is_cjk(t.text)
        )

    def seen_terms(self) -> set[int]:
        """Indexes of the terms some word has matched so far."""
        return set(self._known.values())

    def note_unseen(self, indexes: set[int]) -> None:
        """Record that a text read word by word showed none of these terms."""
        for index in indexes:
            self._unseen[index] = self._unseen.get(index, 0) + 1

    def unseen_terms(self, reads: int) -> set[int]:
        """Terms that `reads` texts read word by word have not shown."""
        return {index for index, count in self._unseen.items() if count >= reads}

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
        """Bulk matching: exact words by one dictionary, prefixes by string ops, typos by
        rapidfuzz in C++, English stems by one stemmer call for the words that could share a
        query word's stem."""
        folded = _fold_all(words)
        at: dict[str, list[int]] = {}
        for j, w in enumerate(folded):
            at.setdefault(w, []).append(j)
        by_stem = self._stem_hits(folded)
        found: list[int | None] = [None] * len(words)
        for index in range(len(self.terms) - 1, -1, -1):  # first term wins: assign last
            term = self.terms[index]
            if term.typos or term.prefix:
                hits = self._term_hits(term, folded)
            else:
                hits = set(at.get(term.text, ()))
            for j in hits | by_stem.get(index, set()):
                found[j] = index
        return found

    def term_stems(self) -> tuple[str | None, ...]:
        """The English stem of each query word (None for words that are not stemmed)."""
        if self._stems is None:
            texts = [t.text for t in self.terms]
            self._stems = tuple(
                s if stemmable(t) and self.stemmed else None for t, s in zip(texts, stems(texts), strict=True)
            )
        return self._stems

    def _stem_hits(self, folded: list[str]) -> dict[int, set[int]]:
        """Query word index -> positions in `folded` of words with that word's English stem."""
        terms_of: dict[str, list[int]] = {}
        for index, stem in enumerate(self.term_stems()):
            if stem is not None:
                terms_of.setdefault(stem, []).append(index)
        if not terms_of:
            return {}
        heads = tuple({stem_head(s) for s in terms_of})
        near = [j for j, w in enumerate(folded) if w.startswith(heads) and stemmable(w)]
        out: dict[int, set[int]] = {}
        for j, stem in zip(near, stems([folded[j] for j in near]), strict=True):
            for index in terms_of.get(stem, ()):
                if stem_variant(self.terms[index].text, folded[j]):
                    out.setdefault(index, set()).add(j)
        return out

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
