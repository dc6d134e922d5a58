"""The free-text part of a Tantivy search: which documents match and the declared ranking.

Every query word (slot) is searched in the exact fields (the form typed, and as a prefix or
with typos where its rules allow) and in the stemmed fields (every form of its stem, written
at index time). A query of up to ranking.RULED_MAX_WORDS words scores each document as a
mixed-radix number of the rule counts of ranking.RULES (words, typo, proximity, attribute,
exactness) over its BM25F score; a longer one (a pasted question) by BM25F alone.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

import tantivy
from tantivy import Occur, Query

from webapp.search import ranking
from webapp.search.language import DEFAULT, FUNCTION_WORDS
from webapp.search.query import (
    INDEX_TOKEN_PATTERN,
    ParsedQuery,
    Phrase,
    QueryTerm,
    Slot,
    is_cjk,
    one_typo_forms,
)
from webapp.search.ranking import FIELD_WEIGHTS, NAME_FIELDS, STEMMED

TOKENIZER = "trawl_fold"
STEM_TOKENIZER = "trawl_stem"  # TOKENIZER's terms, English Snowball stems
MAX_TERM_BYTES = 255  # longer tokens (base64, hashes glued together) are not indexed
LANGUAGE_FIELD = "lang"
LANGUAGES = tuple(FUNCTION_WORDS)
# Fields a word's prefix and typo forms are searched in: not the path, whose words are its
# folders' names and the file name again (an automaton per field and kind of form).
FORMS_FIELDS = ("title", "basename", "content")


def folding(stemmer: str | None = None) -> tantivy.TextAnalyzer:
    """Letter-run / digit-run tokens, lower-cased and ASCII-folded (`Résumé` -> `resume`),
    then stemmed by one Snowball language when named."""
    return _fold(tantivy.Tokenizer.regex(INDEX_TOKEN_PATTERN), stemmer)


def stemming() -> tantivy.TextAnalyzer:
    """The stemmed fields' analyzer: Tantivy's `simple` tokenizer (alphanumeric runs: half
    the time of our regex one, docs/performance.md), folded, English stems. It keeps
    `report2024` whole, which only the exact fields need to split (a stem only scores)."""
    return _fold(tantivy.Tokenizer.simple(), DEFAULT)


def _fold(tokenizer: tantivy.Tokenizer, stemmer: str | None) -> tantivy.TextAnalyzer:
    builder = (
        tantivy.TextAnalyzerBuilder(tokenizer)
        .filter(tantivy.Filter.remove_long(MAX_TERM_BYTES))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.ascii_fold())
    )
    if stemmer:
        builder = builder.filter(tantivy.Filter.stemmer(stemmer))
    return builder.build()


@lru_cache(maxsize=len(LANGUAGES))
def analyzer(language: str) -> tantivy.TextAnalyzer:
    """The stemming analyzer of one language (cached: building one costs)."""
    return folding(language)


def stemmed_text(text: str, language: str) -> str:
    """What a document of `language` writes to a stemmed field: English text as it is (the
    field's analyzer stems it); another language's words stemmed by its own stemmer first.
    The field's English stemmer then runs over those too, and query_stem() does the same."""
    if language == DEFAULT:
        return text
    return " ".join(analyzer(language).analyze(text))


@lru_cache(maxsize=4096)
def query_stem(word: str, language: str = DEFAULT) -> str:
    """The stemmed-field term of a folded query word for documents of `language`."""
    if language != DEFAULT:
        word = (analyzer(language).analyze(word) or [word])[0]
    return (analyzer(DEFAULT).analyze(word) or [word])[0]


@dataclass(frozen=True)
class Text:
    """The free-text part of a search."""

    scored: Query  # the documents it matches, scored by the declared ranking
    match: Query  # the same documents, unscored (facets)


@dataclass
class _Slot:
    """One query word's clauses, by kind of match."""

    exact: list[Query]  # the form typed, in any field
    named: list[Query]  # the form typed or its stem, in a name field
    stem: list[Query]  # any form of its stem
    prefix: list[Query]
    typo1: list[Query]  # within one typo (or fewer)
    typo2: list[Query]  # within two typos (or fewer)
    score: list[Query]  # BM25F parts
    typo_named: list[Query] = dataclasses.field(default_factory=list)  # typo forms in a name field
    typo_score: list[Query] = dataclasses.field(default_factory=list)  # BM25F of held one-typo forms

    def where(self) -> Query:
        """Every document the word matches (two typos' forms hold one typo's)."""
        return _any(self.exact + self.stem + self.prefix + (self.typo2 or self.typo1))


class TextQuery:
    """Builds the text query of one search over one searcher."""

    def __init__(
        self,
        schema: tantivy.Schema,
        searcher: tantivy.Searcher,
        stemmed: bool = True,
        visible: tuple[str, ...] | None = None,
        counts: dict | None = None,
    ) -> None:
        self.schema = schema
        self.searcher = searcher
        self.stemmed = stemmed  # False: an index of an older version, without stemmed fields
        # Counts among the asker's documents, which the backend may keep between searches
        # while the index does not change: `None` the documents they may see, (field, term)
        # those of them holding the term.
        self.counts = {} if counts is None else counts
        # The asker's sources, None when they may see every document (an admin, or a user
        # granted every source that holds any): then nothing is counted nor filtered.
        self.visible = visible
        if visible is not None and self._visible() == searcher.num_docs:
            self.visible = None
        self._languages: list[str] | None = None
        self.parsed = ParsedQuery()
        self.dated = True  # False: an index of an older version, without the `date` field
        self.held = True  # False: an index of an older version, without `container_id`

    def term(self, field: str, value: str) -> Query:
        return Query.term_query(self.schema, field, value)

    def build(self, parsed: ParsedQuery, strategy: str) -> Text:
        """The text query of `parsed` with matching strategy `all`, `last` or `frequency`."""
        if parsed.is_empty:  # placeholder search: everything, like Meilisearch
            return Text(Query.all_query(), Query.all_query())
        if not ranking.ruled(len(parsed.slots)):
            parsed = self._as_scored(parsed)
        self.parsed = parsed  # as searched: what snippets mark
        slots = [self._slot(s.alternatives) for s in parsed.slots]
        where = [s.where() for s in slots]
        every = strategy == "all"
        clauses: list[tuple[Occur, Query]] = []
        if ranking.ruled(len(slots)):
            clauses += self._rules(parsed, slots, where, strategy)
        elif every:
            clauses += [(Occur.Must, _unscored(w)) for w in where]
        else:  # a match by prefix or typo only counts too (below every scored match)
            others = [q for s in slots for q in s.prefix + (s.typo2 or s.typo1)]
            clauses += [(Occur.Should, _unscored(_any(others)))] if others else []
        clauses += [(Occur.Should, q) for s in slots for q in s.score]
        match = (
            where[0]
            if len(where) == 1
            else Query.boolean_query([(Occur.Must if every else Occur.Should, w) for w in where])
        )
        return Text(Query.boolean_query(clauses), _unscored(match))

    def _rules(
        self, parsed: ParsedQuery, slots: list[_Slot], where: list[Query], strategy: str
    ) -> list[tuple[Occur, Query]]:
        """Constant-score clauses adding each rule's count times its unit (ranking.units);
        with strategy `all` every word's clause is required, else any one makes a match.

        A word's `words`, `typo` and `exactness` counts come from one dis_max over its kinds
        of match (each posting list read once): as typed, by stem or prefix, within one typo,
        within two."""
        unit = ranking.units(len(slots))
        occur = Occur.Must if strategy == "all" else Occur.Should
        out = []
        for i, slot in enumerate(slots):
            words = unit.words
            if strategy == "last" and i:  # the leading words held: `a b c` drops `c` first
                lead = Query.boolean_query([(Occur.Must, w) for w in where[: i + 1]])
                out.append((Occur.Should, Query.const_score_query(lead, unit.words)))
                words = 0.0
            kinds = [
                (slot.exact, words + 2 * unit.typo + unit.exactness),
                (slot.stem + slot.prefix, words + 2 * unit.typo),
                (slot.typo1, words + unit.typo),
                (slot.typo2, words),
            ]
            best = [Query.const_score_query(_any(q), value) for q, value in kinds if q]
            out.append((occur, best[0] if len(best) == 1 else Query.disjunction_max_query(best)))
            if slot.named:
                out.append((Occur.Should, Query.const_score_query(_any(slot.named), unit.attribute)))
            out += _typo_only(slot, unit.attribute)
        out += [(Occur.Should, Query.const_score_query(q, unit.proximity)) for q in self._proximity(parsed)]
        return out

    def _as_scored(self, parsed: ParsedQuery) -> ParsedQuery:
        """A longer query (ranked by BM25F alone) as it is searched.

        A word the index holds (as typed or by its stem) gets no typo or prefix forms: under
        BM25F such a match would only come after every match of the word itself, and their
        automata over four fields were most of a question's time. A word the index lacks
        keeps them (no empty results).

        A word held by more than ranking.COMMON_WORD_SHARE of the texts is left out while
        another word of the query is held (ranking.py says why).

        Only the documents the asker may see count: a word held by a hidden source alone must
        not change what they find (nor, measurably, how long it takes)."""
        slots = [Slot(tuple(self._as_held(a) for a in s.alternatives)) for s in parsed.slots]
        common = [self._common(s) for s in slots]
        rest = [s for s, c in zip(slots, common, strict=True) if not c]
        if any(common) and any(self._held(a) for s in rest for a in s.alternatives):
            slots = rest
        return ParsedQuery(tuple(slots))

    def _as_held(self, alternative):
        """A word without its typo and prefix forms when the index holds it."""
        if not isinstance(alternative, QueryTerm) or not (alternative.typos or alternative.prefix):
            return alternative
        return QueryTerm(alternative.text, 0, False) if self._held(alternative) else alternative

    def _held(self, alternative) -> bool:
        """Whether a document the asker may see holds a word (as typed or by its stem); a
        phrase counts as held (its words are looked up by the phrase query itself)."""
        if not isinstance(alternative, QueryTerm):
            return True
        text = alternative.text
        return any(self._holds(f, text, 0) for f in FIELD_WEIGHTS) or (
            self.stemmed and self._holds("content_stem", query_stem(text), 0)
        )

    def _common(self, slot: Slot) -> bool:
        """Whether each of a slot's words is held by more than ranking.COMMON_WORD_SHARE of
        the texts the asker may see (by its stem: the form BM25F scores)."""
        field, form = ("content_stem", query_stem) if self.stemmed else ("content", str)
        most = ranking.COMMON_WORD_SHARE * self._visible()
        return all(
            isinstance(a, QueryTerm) and not is_cjk(a.text) and self._holds(field, form(a.text), most)
            for a in slot.alternatives
        )

    def _holds(self, field: str, text: str, more_than: float) -> bool:
        """Whether more than `more_than` documents the asker may see hold `text` in `field`.
        The index-wide count (a dictionary look-up) bounds theirs and answers for an admin:
        only a word that could hold that many of theirs is counted among them."""
        everywhere = self.searcher.doc_freq(field, text)
        if everywhere <= more_than or self.visible is None:
            return everywhere > more_than
        if (field, text) not in self.counts:
            seen = Query.boolean_query([(Occur.Must, self.term(field, text)), (Occur.Must, self.granted())])
            self.counts[field, text] = self.searcher.search(seen, 1, count=True).count
        return self.counts[field, text] > more_than

    def _visible(self) -> int:
        """How many documents the asker may see."""
        if self.visible is None:
            return self.searcher.num_docs
        if None not in self.counts:
            self.counts[None] = self.searcher.search(self.granted(), 1, count=True).count
        return self.counts[None]

    def granted(self) -> Query:
        """The asker's sources, as a filter."""
        return Query.term_set_query(self.schema, "source_id", list(self.visible or ()))

    def _slot(self, alternatives: tuple) -> _Slot:
        """The clauses of one slot (any of its alternatives fills it)."""
        slot = _Slot([], [], [], [], [], [], [])
        for alternative in alternatives:
            if isinstance(alternative, QueryTerm):
                self._word(alternative, slot)
            else:
                self._phrase(alternative, slot)
        return slot

    def _word(self, word: QueryTerm, slot: _Slot) -> None:
        """One word: BM25F of every form of its stem (of the form typed in a file name or
        path); the form typed, its prefix and typo forms count for the rules."""
        text = word.text
        if is_cjk(text):  # a run of CJK letters: a phrase of its letters
            self._phrase(Phrase((text,)), slot)
            return
        for field, weight in FIELD_WEIGHTS.items():
            exact = self.term(field, text)
            slot.exact.append(exact)
            if field not in STEMMED or not self.stemmed:
                slot.score.append(Query.boost_query(exact, weight))
            if field in NAME_FIELDS:
                slot.named.append(exact)
            if field not in FORMS_FIELDS or not (word.prefix or word.typos):
                continue
            if field == "content" and self._holds("content", text, ranking.TYPED_RIGHT_DOCS):
                continue  # typed as the texts hold it: neither typos nor a prefix there
            if word.prefix:
                slot.prefix.append(Query.fuzzy_term_query(self.schema, field, text, 0, True, True))
            if word.typos >= 1:
                slot.typo1.append(Query.fuzzy_term_query(self.schema, field, text, 1, True, word.prefix))
                slot.typo_score += self._held_forms(field, text)
            if word.typos >= 2:
                slot.typo2.append(Query.fuzzy_term_query(self.schema, field, text, 2, True, word.prefix))
            if word.typos and field in NAME_FIELDS:
                slot.typo_named.append((slot.typo2 or slot.typo1)[-1])
        for field, stemmed in STEMMED.items() if self.stemmed else ():
            for stem in self._stems(stemmed, text):
                slot.stem.append(stem)
                slot.score.append(Query.boost_query(stem, FIELD_WEIGHTS[field]))
                if field in NAME_FIELDS:
                    slot.named.append(stem)

    def _held_forms(self, field: str, text: str) -> list[Query]:
        """BM25 of the one-typo forms of `text` the field holds (a dictionary look-up each):
        a fuzzy query scores every match alike, so typo-only hits would tie."""
        held = [form for form in one_typo_forms(text) if self.searcher.doc_freq(field, form)]
        return [Query.boost_query(self.term(field, form), FIELD_WEIGHTS[field]) for form in sorted(held)]

    def _stems(self, field: str, word: str) -> list[Query]:
        """The stemmed-field terms of `word`: its English stem in every document, and the stem
        of each other language found in the index, in that language's documents only."""
        english = query_stem(word)
        out = [self.term(field, english)]
        if self._languages is None:  # the other languages the index holds documents of
            self._languages = [
                language for language in LANGUAGES[1:] if self.searcher.doc_freq(LANGUAGE_FIELD, language)
            ]
        for language in self._languages:
            stem = query_stem(word, language)
            if stem == english or not self.searcher.doc_freq(field, stem):
                continue
            only = Query.const_score_query(self.term(LANGUAGE_FIELD, language), 0.0)
            held = Query.boolean_query([(Occur.Must, self.term(field, stem)), (Occur.Must, only)])
            # only where a document of that language holds it (a look-up of a few hundredths
            # of a millisecond): in the text's union such a clause costs ~0.45 ms at a million
            # documents even when it finds only a few
            if self.searcher.search(held, 1).hits:
                out.append(held)
        return out

    def _phrase(self, words: Phrase, slot: _Slot) -> None:
        """A phrase (quoted, or one typed word's parts) in the exact fields, side by side."""
        indexed = index_words(words)
        for field, weight in FIELD_WEIGHTS.items():
            if len(indexed) == 1:
                query = self.term(field, indexed[0])
            elif words.prefix:
                query = Query.phrase_prefix_query(self.schema, field, indexed)
            else:
                query = Query.phrase_query(self.schema, field, indexed)
            (slot.prefix if words.prefix else slot.exact).append(query)
            slot.score.append(Query.boost_query(query, weight))
            if field in NAME_FIELDS:
                slot.named.append(query)

    def _proximity(self, parsed: ParsedQuery) -> list[Query]:
        """Neighbouring single-word slots found within PROXIMITY_SLOP words of each other."""
        words = [
            s.alternatives[0].text
            if len(s.alternatives) == 1
            and isinstance(s.alternatives[0], QueryTerm)
            and not is_cjk(s.alternatives[0].text)
            else None
            for s in parsed.slots
        ]
        out = []
        for a, b in zip(words, words[1:], strict=False):
            if a and b and a != b:
                near = [
                    Query.phrase_query(self.schema, field, [a, b], ranking.PROXIMITY_SLOP)
                    for field in ranking.PROXIMITY_FIELDS
                ]
                if self.stemmed:  # a title's other forms too (its stems have positions)
                    near.append(
                        Query.phrase_query(
                            self.schema, "title_stem", [query_stem(a), query_stem(b)], ranking.PROXIMITY_SLOP
                        )
                    )
                out.append(_any(near))
        return out

    def words_in(self, words: tuple[str, ...], fields: tuple[str, ...]) -> Query:
        """A word (or the words as a phrase) in any of `fields`, weighted like the text (the
        query language's `title:` and `-exclusions`)."""
        indexed = index_words(words)
        clauses = []
        for field in fields:
            inner = (
                self.term(field, indexed[0])
                if len(indexed) == 1
                else Query.phrase_query(self.schema, field, indexed)
            )
            clauses.append((Occur.Should, Query.boost_query(inner, FIELD_WEIGHTS[field])))
        return Query.boolean_query(clauses)


def _typo_only(slot: _Slot, attribute: float) -> list[tuple[Occur, Query]]:
    """The attribute and score of a word matched by a typo form only (neither as typed, by
    stem nor as a prefix): a typo in a title counts as a name match, and the held one-typo
    forms' BM25F orders the texts; a document that has the word itself keeps its own."""
    if not (slot.typo_named or slot.typo_score):
        return []
    typed = _any(slot.exact + slot.stem + slot.prefix)

    def only(query: Query) -> Query:
        return Query.boolean_query([(Occur.Must, query), (Occur.MustNot, typed)])

    out = []
    if slot.typo_named:
        out.append((Occur.Should, Query.const_score_query(only(_any(slot.typo_named)), attribute)))
    if slot.typo_score:
        out.append((Occur.Should, only(_any(slot.typo_score))))
    return out


def _any(queries: list[Query]) -> Query:
    """A query matching what any of `queries` matches."""
    if len(queries) == 1:
        return queries[0]
    return Query.boolean_query([(Occur.Should, q) for q in queries])


def _unscored(query: Query) -> Query:
    return Query.const_score_query(query, 0.0)


def index_words(words: tuple[str, ...] | list[str]) -> list[str]:
    """Query words as the index holds them: CJK runs split into single letters."""
    out: list[str] = []
    for word in words:
        out.extend(list(word) if is_cjk(word) else [word])
    return out
