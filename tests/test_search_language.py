"""The query language and facets, as contract tests run against every search backend."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.test_search_backend import backend, make_doc  # noqa: F401 - the backend fixture
from webapp.search import SearchQuery
from webapp.search.syntax import parse_syntax

MB = 1024**2


def ts(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp())


def doc(key: str, content: str, basename: str, folder: str = "", **extra) -> dict:
    """A document under /data/<source>/<folder>/<basename>."""
    d = make_doc(key, content, basename, **extra)
    d["path"] = "/".join(p for p in (f"/data/{d['source_id']}", folder, basename) if p)
    return d


LIBRARY = [
    doc(
        "plan24",
        "The budget plan for the new office.",
        "plan.pdf",
        "projects/2024",
        type="pdf",
        modified_at=ts(2024, 3, 15, 10),
        size_bytes=2 * MB,
    ),
    doc(
        "plan23",
        "Last year's budget plan, a draft.",
        "plan-old.pdf",
        "projects/2023",
        type="pdf",
        modified_at=ts(2023, 6, 1),
        size_bytes=300 * 1024,
    ),
    doc(
        "letter",
        "A budget letter to the bank about the office loan.",
        "letter.docx",
        "letters",
        type="docx",
        modified_at=ts(2024, 1, 1),
        size_bytes=40 * 1024,
    ),
    doc(
        "sheet",
        "Budget numbers, final version.",
        "numbers.xlsx",
        type="xlsx",
        title="Annual budget",
        modified_at=ts(2024, 12, 31, 23, 59),
        size_bytes=12 * MB,
    ),
    doc(
        "minutes",
        "Meeting minutes: the budget was approved.",
        "minutes.txt",
        source_id="other",
        modified_at=ts(2022, 5, 5),
        size_bytes=800,
    ),
    doc(
        "member",
        "Quarterly budget inside an archive.",
        "q1.txt",
        "backup.zip!/reports",
        modified_at=ts(2021, 2, 2),
        size_bytes=1000,
    ),
]


@pytest.fixture
def library(backend):  # noqa: F811 - the imported fixture
    backend.upsert(LIBRARY)
    return backend


def run(engine, q: str, **kw):
    return engine.search(SearchQuery(q=q, limit=kw.pop("limit", 20), **kw))


def keys(engine, q: str, **kw) -> list[str]:
    return [r["id"].split("--", 1)[1] for r in run(engine, q, **kw).results]


def test_excluded_word_and_phrase_leave_documents_out(library):
    assert sorted(keys(library, "budget -draft")) == ["letter", "member", "minutes", "plan24", "sheet"]
    assert sorted(keys(library, 'budget -"office loan" -archive')) == ["minutes", "plan23", "plan24", "sheet"]
    # an excluded word in the file name counts too
    assert "sheet" not in keys(library, "budget -numbers")


def test_snippets_do_not_mark_excluded_words(library):
    assert keys(library, "plan -draft -office") == []  # plan23 says draft, plan24 office
    page = run(library, "budget -loan")
    for result in page.results:
        assert "<em>budget</em>" in result["snippet"].lower() or "budget" not in result["snippet"]
        assert "<em>loan</em>" not in result["snippet"]
    letter = run(library, "budget office -plan")
    snippet = letter.results[0]["snippet"]
    assert "<em>office</em>" in snippet and "<em>bank</em>" not in snippet


def test_type_ext_and_source_filters_or_within_a_field(library):
    assert sorted(keys(library, "budget type:pdf")) == ["plan23", "plan24"]
    assert sorted(keys(library, "budget type:pdf type:docx")) == ["letter", "plan23", "plan24"]
    assert keys(library, "budget ext:xlsx") == ["sheet"]
    assert sorted(keys(library, "budget ext:XLSX ext:.docx")) == ["letter", "sheet"]
    assert keys(library, "budget source:other") == ["minutes"]
    assert keys(library, "budget type:pdf source:other") == []  # fields AND together


def test_request_type_and_source_id_combine_with_the_query(library):
    assert keys(library, "budget type:pdf", source_id="other") == []
    assert keys(library, "budget ext:pdf", type="pdf", sort="modified_at:desc") == ["plan24", "plan23"]


def test_path_filter_takes_the_folder_and_everything_below(library):
    assert keys(library, "budget path:/data/docs/projects/2024") == ["plan24"]
    assert sorted(keys(library, "budget path:/data/docs/projects")) == ["plan23", "plan24"]
    assert sorted(keys(library, "budget path:/data/docs/projects/ path:/data/docs/letters")) == [
        "letter",
        "plan23",
        "plan24",
    ]
    assert keys(library, "budget path:/data/docs/proj") == []  # whole folder names only
    assert keys(library, "budget path:/data/docs/backup.zip") == ["member"]  # an archive's members


def test_title_term_must_be_in_title_or_file_name(library):
    assert keys(library, "title:annual") == ["sheet"]  # the title
    assert keys(library, "title:minutes budget") == ["minutes"]  # the file name
    assert keys(library, "title:office") == []  # only in the content
    assert keys(library, 'title:"annual budget"') == ["sheet"]


def test_modified_years_months_days_and_ranges(library):
    assert sorted(keys(library, "budget modified:2024")) == ["letter", "plan24", "sheet"]
    assert keys(library, "budget modified:2024-03") == ["plan24"]
    assert keys(library, "budget modified:2024-12-31") == ["sheet"]
    assert sorted(keys(library, "budget modified:<2023")) == ["member", "minutes"]
    assert sorted(keys(library, "budget modified:>=2024-01-01 modified:<2024-06")) == ["letter", "plan24"]
    assert sorted(keys(library, "budget modified:2022..2023-06")) == ["minutes", "plan23"]
    assert keys(library, "budget modified:>2024-12-31") == []


def test_size_ranges_with_units(library):
    assert sorted(keys(library, "budget size:>1MB")) == ["plan24", "sheet"]
    assert sorted(keys(library, "budget size:<1k")) == ["member", "minutes"]
    assert keys(library, "budget size:1MB..5MB") == ["plan24"]
    assert keys(library, "budget size:<=40KB size:>=40KB") == ["letter"]


def test_unknown_field_is_searched_as_text(library):
    assert keys(library, "minutes: approved") == ["minutes"]
    # `note` is a word of the query: with every word required, nothing holds it
    assert keys(library, "note: approved", matching_strategy="all") == []
    assert keys(library, "note: approved") == ["minutes"]  # by default, the word that occurs


def test_filter_only_query_lists_every_match_newest_first(library):
    assert keys(library, "type:pdf modified:2023..2024") == ["plan24", "plan23"]
    assert keys(library, "source:docs") == ["sheet", "plan24", "letter", "plan23", "member"]
    assert keys(library, "source:docs", sort="size_bytes:desc")[:2] == ["sheet", "plan24"]
    assert keys(library, "-budget") == []
    page = run(library, "size:<1MB", limit=2)
    assert page.total == 4 and len(page.results) == 2


def test_facets_count_every_match_not_only_the_page(library):
    page = run(library, "budget", limit=1, facets=("type", "extension", "source_id", "year"))
    assert len(page.results) == 1 and page.total == 6
    assert page.facet_distribution == {
        "type": {"pdf": 2, "docx": 1, "xlsx": 1, "text": 2},
        "extension": {"pdf": 2, "docx": 1, "xlsx": 1, "txt": 2},
        "source_id": {"docs": 5, "other": 1},
        "year": {"2024": 3, "2023": 1, "2022": 1, "2021": 1},
    }


def test_facets_follow_the_filters_and_exclusions(library):
    page = run(library, "budget modified:2024 -bank", facets=("type", "year"))
    assert page.total == 2
    assert page.facet_distribution == {"type": {"pdf": 1, "xlsx": 1}, "year": {"2024": 2}}
    assert run(library, "budget").facet_distribution is None  # only when asked


def test_a_spec_given_with_the_query_wins_over_q(library):
    """The service resolves relative `path:` values and hands the backend the result."""
    spec = parse_syntax("budget path:/data/docs/letters")
    assert keys(library, "budget path:projects", spec=spec) == ["letter"]
