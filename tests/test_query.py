"""Query parsing, folding and typo rules; Python folding agrees with the Tantivy index."""

from __future__ import annotations

import random
import unicodedata

import pytest

from tests.bounded import child_output
from tests.conftest import corpus_dir
from webapp.search.query import (
    MAX_QUERY_WORDS,
    MAX_TYPO_WORDS,
    QueryTerm,
    allowed_typos,
    fold,
    index_terms,
    parse_query,
    tokens,
    typo_match,
)
from webapp.search.tantivy_text import folding

# Letter blocks whose words the folding must agree on: Latin with every extension, Greek,
# Cyrillic, Latin Extended Additional and the Latin ligatures (upper and lower case letters).
LETTER_BLOCKS = (
    (0x41, 0x5A),
    (0x61, 0x7A),
    (0xC0, 0x24F),
    (0x370, 0x3FF),
    (0x400, 0x4FF),
    (0x1E00, 0x1EFF),
    (0xFB00, 0xFB06),
)


def test_tokens_split_on_separators_and_digit_letter_boundaries():
    assert tokens("2024-invoice_acme.PDF") == ["2024", "invoice", "acme", "pdf"]
    assert tokens("report2024 v2") == ["report", "2024", "v", "2"]
    assert tokens("Straße Ærø naïve") == ["strasse", "aero", "naive"]
    assert tokens("Москва Ελλάδα") == ["москва", "ελλάδα"]  # only Latin letters are folded


def test_typo_budget_by_word_length():
    assert [allowed_typos(w) for w in ("cat", "lazy", "basil", "document", "invoicing")] == [
        0,
        0,
        1,
        1,
        2,
    ]


def test_last_word_is_prefix_only_when_it_ends_the_query():
    assert parse_query("invoi").terms == (QueryTerm("invoi", 1, prefix=True),)
    assert parse_query("invoi ").terms == (QueryTerm("invoi", 1, prefix=False),)
    assert parse_query('acme "total due"').terms == (QueryTerm("acme", 0),)
    assert parse_query('acme "total due"').phrases == (("total", "due"),)


def test_query_words_are_capped_and_only_the_first_ten_are_typo_tolerant():
    parsed = parse_query("lorem " * 150 + "lorem")
    assert len(parsed.terms) == MAX_QUERY_WORDS
    assert not parsed.terms[-1].prefix  # the query went on: the last kept word is complete
    assert [t.typos for t in parsed.terms[:MAX_TYPO_WORDS]] == [1] * MAX_TYPO_WORDS
    assert {t.typos for t in parsed.terms[MAX_TYPO_WORDS:]} == {0}


def test_punctuation_only_query_is_empty():
    assert parse_query("!!! ...").is_empty


@pytest.mark.parametrize(
    ("term", "word", "expected"),
    [
        (QueryTerm("basel", 1), "basil", True),
        (QueryTerm("basel", 1), "bsail", False),
        (QueryTerm("tomatos", 1), "tomatoes", True),
        (QueryTerm("recieved", 1), "received", True),  # a swap is one typo
        (QueryTerm("lazi", 0), "lazy", False),
        (QueryTerm("dapartmnet", 2), "department", True),
        (QueryTerm("tomat", 1, prefix=True), "tomatoes", True),
        (QueryTerm("tomaf", 1, prefix=True), "tomatoes", True),
        (QueryTerm("tom", 0, prefix=True), "tomatoes", True),
        (QueryTerm("tom", 0, prefix=False), "tomatoes", False),
    ],
)
def test_typo_match(term, word, expected):
    assert typo_match(term, word) is expected


def _natural(word: str) -> bool:
    """Words made of letters, digits and punctuation (mis-decoded bytes produce stray marks)."""
    return all(c.isascii() or c.isdecimal() or unicodedata.category(c)[0] in "LP" for c in word)


def _generated_words(count: int = 3000) -> list[str]:
    """Deterministic words of letters from LETTER_BLOCKS mixed with digits and punctuation."""
    letters = [
        chr(c)
        for lo, hi in LETTER_BLOCKS
        for c in range(lo, hi + 1)
        if unicodedata.category(chr(c)) in ("Lu", "Ll")
    ]
    marks = list("0123456789-_'.,;:!?()/")
    rng = random.Random(22)
    words: set[str] = set()
    while len(words) < count:
        words.add(
            "".join(
                rng.choice(letters) if rng.random() < 0.85 else rng.choice(marks)
                for _ in range(rng.randint(1, 12))
            )
        )
    return sorted(words)


def _corpus_words(limit: int = 20_000) -> list[str]:
    """Words of the real corpus's text files (none when the corpus is not there)."""
    corpus = corpus_dir()
    if corpus is None:
        return []
    words: set[str] = set()
    for path in sorted((corpus / "real").rglob("*")):
        if path.is_file() and path.suffix in {".txt", ".md", ".srt", ".csv", ".html", ".json"}:
            text = path.read_bytes()[:200_000].decode("utf-8", "ignore")
            words.update(w for w in text.split() if _natural(w))
        if len(words) > limit:
            break
    return sorted(words)


def test_python_folding_matches_the_index_tokenizer():
    words = (
        _corpus_words() + _generated_words() + ["Ŝtraße", "Œuvre", "Ærøskøbing", "ﬁnance", "Łódź", "Ðóttir"]
    )
    assert len(words) > 3000
    analyzer = folding()
    mismatches = [w for w in words if index_terms(w) != analyzer.analyze(w)]
    assert mismatches == []


def test_fold_is_idempotent_and_lowercases():
    assert fold("ÉCOLE") == "ecole" == fold(fold("ÉCOLE"))


def test_bulk_matcher_agrees_with_single_word_rule():
    import random

    from webapp.search.query import TermMatcher

    rng = random.Random(7)
    words = ["".join(rng.choice("abcde") for _ in range(rng.randint(1, 10))) for _ in range(3000)]
    parsed = parse_query("abcde badcab abcd")
    matcher = TermMatcher.from_query(parsed)
    bulk = matcher.match_many(words)
    for word in words:
        expected = next((i for i, t in enumerate(parsed.terms) if typo_match(t, word)), None)
        assert bulk.get(word) == expected, word


def test_bulk_matcher_takes_any_strings():
    from webapp.search.query import TermMatcher

    matcher = TermMatcher.from_query(parse_query("invoice "))  # not a prefix
    assert matcher.match_many(["x\ny", "INVOICE", "", "Invoices\n"]) == {"INVOICE": 0}
    assert matcher.match("invoice") == 0 and matcher.match("a\nb") is None


def test_a_typed_word_the_index_splits_is_one_phrase_slot():
    from webapp.search.query import Phrase

    parsed = parse_query("Canon EOS 40D invoice INV-2024-001 ")
    assert len(parsed.slots) == 5
    unit = parsed.slots[4].alternatives[0]
    assert isinstance(unit, Phrase) and tuple(unit) == ("inv", "2024", "001")
    assert unit.raw == "INV-2024-001" and not unit.prefix
    assert tuple(parsed.slots[2].alternatives[0]) == ("40", "d")
    typing = parse_query("ann.lee@exam").slots[0].alternatives[0]
    assert tuple(typing) == ("ann", "lee", "exam") and typing.prefix
    assert not parse_query('"ann lee"').slots[0].alternatives[0].prefix  # quoted: whole


def test_a_query_holding_a_long_number_is_told_exact_or_not_at_once():
    """Whether a query asks for exact words (meaning then stays out) reads each word once: the
    regex tried every digit of a number against every end, 0.09 s of a search's time for a
    query of 4,000 digits, and minutes for the longer texts that make the difference certain
    here (in a child, so a regex stuck backtracking fails the test instead of hanging it)."""
    from webapp.search.hybrid import exact_first

    assert exact_first("invoice INV-2024") and exact_first("report 2024") and exact_first("a.lee@x")
    assert not exact_first("bake bread") and not exact_first("why 2024!")
    child = "import sys; from webapp.search.hybrid import exact_first; print(exact_first(sys.stdin.read()))"
    for text, exact in (("why " + "1" * 300_000 + "!", False), ("why " + "x" * 300_000 + "1", True)):
        out = child_output(child, stdin=text, what=f"classifying a query of {len(text):,} characters")
        assert out.strip() == str(exact)
