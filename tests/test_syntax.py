"""The query language parser (pure): every row of the table in docs/api.md ("Query language"),
and bad values."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from webapp.exceptions import InvalidInput, QuerySyntaxError
from webapp.search.syntax import Range, parse_syntax

KB, MB, GB = 1024, 1024**2, 1024**3


def ts(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp())


def test_words_and_phrases_stay_text():
    spec = parse_syntax('annual "two words" report')
    assert spec.text == 'annual "two words" report'
    assert not spec.has_syntax and not spec.is_filter_only


def test_excluded_words_and_phrases_leave_the_text():
    spec = parse_syntax('budget -draft -"old version" plan')
    assert spec.excluded == (("draft",), ("old", "version"))
    assert spec.text.split() == ["budget", "plan"]
    assert parse_syntax("-Résumé").excluded == (("resume",),)  # folded like the index
    # a hyphen inside a word or standing alone is not an exclusion
    assert parse_syntax("e-mail - x").text == "e-mail - x"


def test_upper_case_or_stays_lower_case_or_is_a_word():
    assert parse_syntax("cats OR dogs").text == "cats OR dogs"
    assert parse_syntax("cats or dogs").text == "cats or dogs"
    # between two filters of one field OR has nothing to join: the values already combine
    spec = parse_syntax("type:pdf OR type:docx")
    assert spec.types == ("pdf", "docx") and spec.text == "" and spec.is_filter_only


def test_type_ext_source_several_values_of_one_field():
    spec = parse_syntax("type:PDF type:docx ext:.XLSX ext:csv source:notes source:work")
    assert spec.types == ("pdf", "docx")
    assert spec.extensions == ("xlsx", "csv")
    assert spec.sources == ("notes", "work")
    assert spec.text == "" and spec.is_filter_only


def test_path_relative_absolute_and_quoted():
    spec = parse_syntax('path:projects/2024/ path://data/a path:"My Documents/taxes" report')
    assert spec.paths == ("projects/2024", "/data/a", "My Documents/taxes")
    assert parse_syntax("path:/").paths == ("/",)
    assert spec.text == "report"


def test_title_words_and_phrases():
    spec = parse_syntax('title:Budget title:"annual report" 2024')
    assert spec.title == (("budget",), ("annual", "report"))
    assert spec.text == "2024" and not spec.is_filter_only


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("modified:2024", Range(ts(2024, 1, 1), ts(2025, 1, 1))),
        ("modified:2024-02", Range(ts(2024, 2, 1), ts(2024, 3, 1))),  # a leap year
        ("modified:2023-12", Range(ts(2023, 12, 1), ts(2024, 1, 1))),
        ("modified:2024-03-15", Range(ts(2024, 3, 15), ts(2024, 3, 16))),
        ("modified:>2024-01-01", Range(ts(2024, 1, 2), None)),
        ("modified:>=2024-01-01", Range(ts(2024, 1, 1), None)),
        ("modified:<2024", Range(None, ts(2024, 1, 1))),
        ("modified:<=2023", Range(None, ts(2024, 1, 1))),
        ("modified:>2023", Range(ts(2024, 1, 1), None)),
        ("modified:2023-01..2023-06", Range(ts(2023, 1, 1), ts(2023, 7, 1))),
        ("modified:2023..", Range(ts(2023, 1, 1), None)),
        ("Modified:..2022-06-30", Range(None, ts(2022, 7, 1))),
    ],
)
def test_modified_days_months_years_and_ranges_in_utc(term, expected):
    assert parse_syntax(term).modified == (expected,)


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        ("size:>10MB", Range(10 * MB + 1, None)),
        ("size:>=10mb", Range(10 * MB, None)),
        ("size:<1k", Range(None, KB)),
        ("size:<=1KB", Range(None, KB + 1)),
        ("size:1MB..5MB", Range(MB, 5 * MB + 1)),
        ("size:1.5GB..", Range(round(1.5 * GB), None)),
        ("size:500", Range(500, 501)),
    ],
)
def test_size_ranges_with_units(term, expected):
    assert parse_syntax(term).size == (expected,)


def test_unknown_field_is_plain_text():
    for q in ("note: pay", "http://example.com/x", "c:\\temp"):
        spec = parse_syntax(q)
        assert spec.text == q and not spec.has_syntax, q


@pytest.mark.parametrize(
    ("q", "text"),
    [
        ("misc:quarterly", "misc quarterly"),
        ("note:pay report", "note pay report"),
        ("Re:meeting type:pdf", "Re meeting "),
        ("v1.2:beta", "v1.2:beta"),  # not a name followed by a colon: one typed word
    ],
)
def test_an_unknown_field_is_its_words(q, text):
    spec = parse_syntax(q)
    assert spec.text == text


@pytest.mark.parametrize(
    ("q", "detail"),
    [
        ("report modified:>zz", "q: modified:>zz is not a date (use 2024, 2024-03 or 2024-03-15)"),
        ("modified:2024-13", "q: modified:2024-13 is not a date"),
        ("modified:2023-02-29", "q: modified:2023-02-29 is not a date"),
        ("modified:..", "q: modified:.. is not a date"),
        ("modified:2024..2023", "q: modified:2024..2023 ends before it starts"),
        ("size:>big", "q: size:>big is not a size (use 500, 10k, 2MB or 1GB)"),
        ("size:10parsecs", "q: size:10parsecs is not a size"),
        ("size:>99999999999999999999TB", "q: size:>99999999999999999999TB is not a size"),
        ("modified:99999", "q: modified:99999 is not a date"),
        ("modified:0000", "q: modified:0000 is not a date"),
        ("type:", "q: type: needs a value, e.g. type:pdf"),
        ('path:""', 'q: path:"" needs a value'),
        ("title:!!!", "q: title:!!! has no word to look for"),
        ("-type:pdf", "q: -type:pdf: a filter cannot be excluded"),
    ],
)
def test_bad_values_name_the_term(q, detail):
    with pytest.raises(QuerySyntaxError) as caught:
        parse_syntax(q)
    assert caught.value.detail.startswith(detail)
    assert isinstance(caught.value, InvalidInput) and caught.value.status == 400


def test_filter_only_and_exclusion_only_queries_list_documents():
    assert parse_syntax("type:pdf modified:2024").is_filter_only
    assert parse_syntax("-draft").is_filter_only
    assert not parse_syntax("type:pdf budget").is_filter_only


def test_last_word_is_a_prefix_only_when_it_ends_the_query():
    assert parse_syntax("budg type:pdf").text == "budg "  # followed by a filter: a whole word
    assert parse_syntax("type:pdf budg").text == "budg"
    assert parse_syntax("type:pdf budg ").text == "budg "


def test_any_text_parses_or_names_a_bad_term_and_the_engine_takes_it():
    """Random queries built from the syntax's own pieces: never an unexpected error."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tests.test_search_backend import CORPUS
    from webapp.search import SearchQuery
    from webapp.search.tantivy_backend import TantivyBackend

    backend = TantivyBackend(None)
    backend.upsert(CORPUS)
    pieces = st.sampled_from(
        [
            "type:",
            "ext:",
            "source:",
            "path:",
            "title:",
            "modified:",
            "size:",
            "-",
            '"',
            "OR",
            "..",
            ">",
            "<=",
            "2024",
            "-03",
            "10MB",
            "k",
            "/",
            "pdf",
            "budget",
            "é",
            "说明",
            ":",
            " ",
        ]
    )

    @settings(max_examples=300, deadline=None)
    @given(st.lists(pieces, max_size=12).map("".join))
    def check(q: str) -> None:
        try:
            spec = parse_syntax(q)
        except QuerySyntaxError as exc:
            assert exc.detail.startswith("q: ")
            return
        backend.search(SearchQuery(q=q, spec=spec, facets=("type", "year")))

    check()
