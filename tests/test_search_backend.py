"""Search contract tests, run against every backend (Meilisearch only when MEILI_URL is set)."""

from __future__ import annotations

import html
import json
import multiprocessing
import os
import re
import uuid

import pytest
import tantivy

from webapp.search import SORTS, SearchBackend, SearchBackendError, SearchQuery, make_backend
from webapp.search.syntax import parse_syntax
from webapp.search.tantivy_backend import TantivyBackend

MEILI_SKIP = "MEILI_URL not set: Meilisearch contract tests skipped"


def meili_settings() -> dict:
    """The settings of a Meilisearch backend on a fresh index of the server at MEILI_URL."""
    return {
        "SEARCH_BACKEND": "meilisearch",
        "MEILI_URL": os.environ["MEILI_URL"],
        "MEILI_MASTER_KEY": os.environ.get("MEILI_MASTER_KEY"),
        "MEILI_INDEX": f"trawl-test-{uuid.uuid4().hex[:10]}",
    }


def make_doc(key: str, content: str, basename: str | None = None, **extra) -> dict:
    """A document shaped like the scanner's, with sensible defaults."""
    source_id = extra.pop("source_id", "docs")
    basename = basename or f"{key}.txt"
    doc = {
        "id": f"{source_id}--{key}",
        "source_id": source_id,
        "source_name": source_id.title(),
        "path": f"/data/{source_id}/{basename}",
        "basename": basename,
        "extension": basename.rsplit(".", 1)[-1],
        "type": "text",
        "size_bytes": 100,
        "modified_at": 1_700_000_000,
        "indexed_at": 1_700_000_100,
        "content": content,
        "title": None,
        "metadata": {"lines": 1},
    }
    doc.update(extra)
    return doc


CORPUS = [
    make_doc(
        "budget", "Quarterly budget report for the marketing department.", "budget-2024.xlsx", type="xlsx"
    ),
    make_doc(
        "garden",
        "Notes about the garden: tomatoes, basil and a lazy cat.",
        "garden_notes.md",
        type="markdown",
    ),
    make_doc(
        "cv",
        "Curriculum vitae : mon résumé, expérience professionnelle.",
        "cv-final.pdf",
        type="pdf",
        title="Résumé de Jeanne",
    ),
    make_doc("download", "Please resume the download when the network is back.", "howto.txt"),
    make_doc("i18n", "An internationalization guide for developers.", "i18n.txt"),
    make_doc("minutes", "Meeting minutes. Action items: call the plumber.", "minutes.txt", source_id="other"),
    make_doc(
        "hostile",
        "<script>alert('pwned')</script> & invoice total due <b>now</b>",
        "2024-invoice_acme.pdf",
        type="pdf",
    ),
    make_doc("receipt", "Thank you for shopping with us.", "2023-receipt_globex.pdf", type="pdf"),
]


def _backend_params():
    return [
        pytest.param("tantivy", id="tantivy"),
        pytest.param(
            "meilisearch",
            id="meilisearch",
            marks=pytest.mark.skipif(not os.environ.get("MEILI_URL"), reason=MEILI_SKIP),
        ),
    ]


@pytest.fixture(params=_backend_params())
def backend(request, tmp_path):
    """An empty backend of each kind (Tantivy in a temp dir, Meilisearch in a fresh index)."""
    if request.param == "tantivy":
        yield make_backend({"SEARCH_BACKEND": "tantivy", "SEARCH_INDEX_DIR": str(tmp_path / "ix")})
        return
    settings = meili_settings()
    index = settings["MEILI_INDEX"]
    b = make_backend(settings)
    yield b
    b.client.delete_index(index)


@pytest.fixture
def corpus(backend):
    backend.upsert(CORPUS)
    return backend


def ids_of(backend: SearchBackend, q: str, **kw) -> list[str]:
    return [r["id"].split("--", 1)[1] for r in backend.search(SearchQuery(q=q, **kw)).results]


def visible(snippet: str) -> str:
    """What a browser shows for a snippet (tags removed, entities decoded)."""
    return html.unescape(re.sub(r"</?em>", "", snippet))


# --- typo tolerance, prefix, phrases, accents ---------------------------------------------


def test_four_letter_word_with_a_typo_does_not_match(corpus):
    assert ids_of(corpus, "lazy garden") == ["garden"]
    assert ids_of(corpus, "lazu garden", matching_strategy="all") == []


def test_five_letter_word_matches_with_one_typo_not_two(corpus):
    assert ids_of(corpus, "basel garden") == ["garden"]
    assert ids_of(corpus, "tomatos garden") == ["garden"]
    assert ids_of(corpus, "tmatos garden", matching_strategy="all") == []


def test_nine_letter_word_matches_with_two_typos_not_three(corpus):
    assert ids_of(corpus, "dapartmnet budget") == ["budget"]
    assert ids_of(corpus, "dapartmnot budget", matching_strategy="all") == []


def test_last_word_matches_as_prefix(corpus):
    assert ids_of(corpus, "tomat") == ["garden"]
    assert ids_of(corpus, "internation") == ["i18n"]
    assert ids_of(corpus, "tomat garden", matching_strategy="all") == []  # only the last word is a prefix


def test_all_words_must_match_in_any_field(corpus):
    assert ids_of(corpus, "garden notes basil", matching_strategy="all") == ["garden"]
    assert ids_of(corpus, "invoice acme", matching_strategy="all") == ["hostile"]  # name only
    assert ids_of(corpus, "garden plumber", matching_strategy="all") == []


def test_quoted_phrase_matches_words_in_order(corpus):
    assert ids_of(corpus, '"lazy cat"') == ["garden"]
    assert ids_of(corpus, '"cat lazy"') == []
    assert ids_of(corpus, '"marketing department" quarterly') == ["budget"]


def test_accents_are_ignored_both_ways(corpus):
    assert ids_of(corpus, "experience professionnelle") == ["cv"]
    assert sorted(ids_of(corpus, "résumé")) == ["cv", "download"]
    assert sorted(ids_of(corpus, "RESUME")) == ["cv", "download"]


def test_file_name_parts_are_words(corpus):
    assert ids_of(corpus, "receipt") == ["receipt"]
    assert ids_of(corpus, "globex") == ["receipt"]
    assert ids_of(corpus, "2023") == ["receipt"]


def test_exact_match_ranks_above_typo_match(backend):
    backend.upsert(
        [
            make_doc("typo", "The raport is ready for review today."),
            make_doc("exact", "The report is ready for review today, with a long tail of words."),
        ]
    )
    results = backend.search(SearchQuery(q="report ready")).results
    assert [r["id"] for r in results] == ["docs--exact", "docs--typo"]
    assert results[0]["score"] > results[1]["score"]


def test_title_and_file_name_matches_rank_first(backend):
    backend.upsert(
        [
            make_doc("body", "A zebra appears once in this text about animals."),
            make_doc("named", "A list of animals seen at the park.", "zebra.txt"),
            make_doc("titled", "Animals of the savanna and the park.", title="Zebra migration"),
        ]
    )
    ranked = ids_of(backend, "zebra")
    assert ranked[-1] == "body"
    assert set(ranked) == {"body", "named", "titled"}


# --- relevance: strategies, order rules, stems, OR, CJK -------------------------------------


def _meili(backend) -> bool:
    return not isinstance(backend, TantivyBackend)


def test_default_strategy_finds_documents_matching_some_words(corpus):
    assert ids_of(corpus, "garden xylophone") == ["garden"]  # one word occurs nowhere
    assert set(ids_of(corpus, "garden plumber")) == {"garden", "minutes"}
    assert ids_of(corpus, "garden plumber", matching_strategy="all") == []


def test_more_matched_words_rank_above_fewer_in_every_strategy(backend):
    backend.upsert(
        [
            make_doc("one", "Otter. Otter otter otter, the otter."),
            make_doc(
                "both",
                "A long report on rivers, with one otter and one heron among many "
                "other animals and plants described over several pages of text.",
            ),
            make_doc("none", "Nothing to see here."),
        ]
    )
    for strategy in ("last", "frequency"):
        page = backend.search(SearchQuery(q="otter heron", matching_strategy=strategy))
        assert [r["id"] for r in page.results] == ["docs--both", "docs--one"], strategy
        assert page.total == 2
    assert ids_of(backend, "otter heron", matching_strategy="all") == ["both"]


def test_last_strategy_prefers_the_first_words(backend):
    if _meili(backend):
        pytest.skip("Meilisearch's `last` leaves out documents without the first word")
    backend.upsert(
        [
            make_doc("first", "The kestrel hunted over the field."),
            make_doc("second", "The lapwing nested in the field."),
        ]
    )
    assert ids_of(backend, "kestrel lapwing", matching_strategy="last") == ["first", "second"]
    assert ids_of(backend, "lapwing kestrel", matching_strategy="last") == ["second", "first"]


def test_exact_form_ranks_above_its_stem_and_stems_match(backend):
    if _meili(backend):
        pytest.skip("Meilisearch does not stem English words")
    backend.upsert(
        [
            make_doc("stem", "The server connected to the network at noon."),
            make_doc("exact", "Network connections are watched at noon, all of them, all day."),
            make_doc("other", "Gardens and tomatoes."),
        ]
    )
    results = backend.search(SearchQuery(q="connections ")).results
    assert [r["id"] for r in results] == ["docs--exact", "docs--stem"]
    assert "<em>connected</em>" in results[1]["snippet"]
    assert sorted(ids_of(backend, "connecting network ", matching_strategy="all")) == [
        "exact",
        "stem",
    ]  # neither has `connecting`: both by their stem


def test_exact_ranks_above_typo_with_a_partial_match(backend):
    backend.upsert(
        [
            make_doc("typo", "Falcons seen: peregrine faclons near the tower."),
            make_doc("exact", "One falcon near the tower, and a long list of other birds seen there."),
        ]
    )
    assert ids_of(backend, "falcon tower ") == ["exact", "typo"]


def test_score_reflects_term_frequency_and_length(backend):
    backend.upsert(
        [
            make_doc("dense", "walrus walrus walrus colony"),
            make_doc(
                "sparse",
                "a walrus colony mentioned once in a much longer text about the "
                "northern coast, its weather, its birds and its fishing boats",
            ),
        ]
    )
    results = backend.search(SearchQuery(q="walrus colony")).results
    assert [r["id"] for r in results] == ["docs--dense", "docs--sparse"]
    assert results[0]["score"] > results[1]["score"] > 0


def test_or_fills_one_word_place(corpus):
    if _meili(corpus):
        pytest.skip("Meilisearch has no OR: the adapter sends both words")
    assert sorted(ids_of(corpus, "tomatoes OR plumber", matching_strategy="all")) == ["garden", "minutes"]
    assert ids_of(corpus, "lazy OR plumber cat", matching_strategy="all") == ["garden"]
    assert sorted(ids_of(corpus, '"action items" OR basil', matching_strategy="all")) == ["garden", "minutes"]
    assert ids_of(corpus, "tomatoes or plumber", matching_strategy="all") == []  # `or`: a word


CJK_DOCS = [
    make_doc("prospectus", "本公司发布了募集说明书，请投资者仔细阅读。Annual figures inside."),
    make_doc("named", "Annual report.", "募集说明书2024.pdf", type="pdf"),
    make_doc("apart", "说明和书是分开的。"),
    make_doc("latin", "A plain English text about annual accounts."),
]


def test_cjk_runs_are_found_inside_longer_runs_in_content_and_file_names(backend):
    backend.upsert(CJK_DOCS)
    assert sorted(ids_of(backend, "说明书")) == ["named", "prospectus"]
    results = {r["id"]: r for r in backend.search(SearchQuery(q="说明书")).results}
    assert "募集<em>说明书</em>" in results["docs--prospectus"]["snippet"]
    assert sorted(ids_of(backend, "说明书 annual", matching_strategy="all")) == ["named", "prospectus"]
    if not _meili(backend):  # any run of two letters, not only dictionary words
        assert sorted(ids_of(backend, "集说")) == ["named", "prospectus"]
        assert ids_of(backend, "annual report ", matching_strategy="all") == ["named"]


# --- filters, sorting, pagination, totals -------------------------------------------------


def test_filters_by_source_and_type(corpus):
    assert ids_of(corpus, "minutes", source_id="other") == ["minutes"]
    assert ids_of(corpus, "minutes", source_id="docs") == []
    assert sorted(ids_of(corpus, "pdf", type="pdf")) == ["cv", "hostile", "receipt"]
    assert ids_of(corpus, "pdf", type="pdf", source_id="other") == []


def test_granted_sources_limit_results_totals_facets_and_sorts(corpus):
    """The access filter (SearchQuery.source_ids) works inside the query of each backend."""
    everything = corpus.search(SearchQuery(q="the", facets=("source_id",)))
    assert everything.facet_distribution["source_id"]["other"] == 1
    only = corpus.search(SearchQuery(q="the", facets=("source_id",), source_ids=("other",)))
    assert [r["id"] for r in only.results] == ["other--minutes"] and only.total == 1
    assert only.facet_distribution["source_id"] == {"other": 1}
    assert ids_of(corpus, "pdf", sort="basename:asc", source_ids=("other",)) == []
    assert ids_of(corpus, "minutes", source_id="other", source_ids=("docs",)) == []
    assert ids_of(corpus, "minutes", source_ids=("docs", "other")) == ["minutes"]
    none = corpus.search(SearchQuery(q="minutes", facets=("type",), source_ids=()))
    assert none.total == 0 and none.results == [] and none.facet_distribution["type"] == {}


def test_a_user_who_saw_every_document_does_not_see_one_added_to_another_source(backend):
    """A user granted every source that holds documents is searched without the access filter
    (nothing to filter); once a source they may not see holds one, the filter is back, in the
    next search of that process (what was counted for them is dropped with the old reader)."""
    backend.upsert([make_doc("a1", "the harbour report", source_id="a")])
    seen = backend.search(SearchQuery(q="harbour report and the rest of it", source_ids=("a",)))
    assert [r["id"] for r in seen.results] == ["a--a1"] and seen.total == 1
    backend.upsert([make_doc("b1", "the harbour report", source_id="b")])
    for q in ("harbour", "harbour report and the rest of it"):
        page = backend.search(SearchQuery(q=q, source_ids=("a",), facets=("source_id",)))
        assert [r["id"] for r in page.results] == ["a--a1"] and page.total == 1
        assert page.facet_distribution["source_id"] == {"a": 1}
    assert backend.search(SearchQuery(q="harbour")).total == 2
    backend.delete_ids(["a--a1", "b--b1"])
    backend.upsert([make_doc("b2", "the harbour report", source_id="b")])  # one document again
    for q in ("harbour", "harbour report and the rest of it"):
        assert backend.search(SearchQuery(q=q, source_ids=("a",))).total == 0


LOREM = [
    make_doc(
        f"l{i:02d}",
        f"lorem ipsum {'dolor ' * (i % 5)} entry {i}",
        f"{name}-{i}.txt",
        size_bytes=(i * 37) % 101,
        modified_at=1_600_000_000 + (i * 7919) % 1000,
    )
    for i, name in enumerate(["Alpha", "beta", "Gamma", "delta", "epsilon", "Zeta"] * 5)
]


@pytest.mark.parametrize("sort", SORTS)
def test_each_sort_pages_without_overlap_or_gaps(backend, sort):
    backend.upsert(LOREM)
    seen, offset = [], 0
    while True:
        page = backend.search(SearchQuery(q="lorem", limit=7, offset=offset, sort=sort))
        assert page.total == len(LOREM)
        if not page.results:
            break
        assert len(page.results) <= 7
        seen.extend(page.results)
        offset += 7
    assert len(seen) == len(LOREM)
    assert len({r["id"] for r in seen}) == len(LOREM)
    field, _, direction = sort.partition(":")
    if field == "relevance":
        scores = [r["score"] for r in seen]
        assert scores == sorted(scores, reverse=True)
    else:
        if isinstance(backend, TantivyBackend):  # a sorted page still carries real scores
            relevance = backend.search(SearchQuery(q="lorem", limit=100)).results
            by_id = {r["id"]: r["score"] for r in relevance}
            assert [r["score"] for r in seen] == [pytest.approx(by_id[r["id"]]) for r in seen]
        key = (lambda r: r["basename"].lower()) if field == "basename" else (lambda r: r[field])
        keys = [key(r) for r in seen]
        assert keys == sorted(keys, reverse=direction == "desc")


def test_a_sorted_title_search_keeps_its_scores_and_a_filter_listing_has_none(tmp_path):
    backend = TantivyBackend(tmp_path / "index")
    backend.upsert(
        [make_doc(f"t{i}", "plain words", title="Quarterly report" if i % 2 else "Notes") for i in range(6)]
    )
    titled = backend.search(SearchQuery(q="title:report", sort="modified_at:desc")).results
    assert len(titled) == 3 and all(r["score"] > 0 for r in titled)
    listed = backend.search(SearchQuery(q="type:text", sort="modified_at:desc")).results
    assert len(listed) == 6 and all(r["score"] == 0 for r in listed)


def test_total_is_exact_beyond_the_page(backend):
    backend.upsert(LOREM)
    page = backend.search(SearchQuery(q="dolor", limit=3))
    assert page.total == sum(1 for i in range(len(LOREM)) if i % 5)
    assert len(page.results) == 3
    assert isinstance(page.processing_time_ms, int)


def test_limit_zero_and_placeholder_queries_do_not_crash(corpus):
    page = corpus.search(SearchQuery(q="garden", limit=0))
    assert page.results == [] and page.total == 1
    assert corpus.search(SearchQuery(q="   ")).total == len(CORPUS)


def test_result_fields(corpus):
    (result,) = corpus.search(SearchQuery(q="quarterly")).results
    assert result["id"] == "docs--budget"
    assert result["basename"] == "budget-2024.xlsx"
    assert result["source_name"] == "Docs"
    assert result["type"] == "xlsx"
    assert result["modified_at"] == 1_700_000_000 and result["size_bytes"] == 100
    assert result["score"] > 0
    assert "<em>Quarterly</em>" in result["snippet"]


# --- snippets -----------------------------------------------------------------------------


def test_snippet_escapes_file_text(corpus):
    (result,) = corpus.search(SearchQuery(q="invoice")).results
    snippet = result["snippet"]
    assert "&lt;script&gt;" in snippet and "<script" not in snippet
    assert re.sub(r"</?em>", "", snippet).count("<") == 0
    assert "<em>invoice</em>" in snippet


def test_snippet_window_length_and_cuts(backend):
    filler = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 60
    backend.upsert([make_doc("long", filler + "The needle was found here. " + filler)])
    for length in (50, 300, 1000):
        (result,) = backend.search(SearchQuery(q="needle", snippet_length=length)).results
        text = visible(result["snippet"])
        assert length * 0.6 <= len(text) <= length
        assert text.startswith("…") and text.endswith("…")
        assert "<em>needle</em>" in result["snippet"]


def test_snippet_highlights_typo_and_prefix_matches(corpus):
    (result,) = corpus.search(SearchQuery(q="internationalisation guid")).results
    assert "<em>internationalization</em>" in result["snippet"]
    assert "<em>guide</em>" in result["snippet"]


def test_snippet_falls_back_to_file_name(corpus):
    (result,) = corpus.search(SearchQuery(q="globex")).results
    assert "<em>globex</em>" in result["snippet"]


# --- documents: get, delete, rename, counts -----------------------------------------------


def test_get_returns_the_document_as_upserted(corpus):
    assert corpus.get("docs--cv") == CORPUS[2]
    assert corpus.get("docs--nope") is None


def test_upsert_replaces_a_document(corpus):
    corpus.upsert([make_doc("garden", "Now about roses only.", "garden_notes.md")])
    assert ids_of(corpus, "tomatoes") == []
    assert ids_of(corpus, "roses") == ["garden"]
    assert corpus.count() == len(CORPUS)


def test_delete_ids_source_and_counts(corpus):
    assert corpus.count() == len(CORPUS)
    assert corpus.count("other") == 1
    assert corpus.ids("other") == {"other--minutes"}
    corpus.delete_ids(["docs--garden", "docs--unknown"])
    assert ids_of(corpus, "tomatoes") == [] and corpus.get("docs--garden") is None
    corpus.delete_source("docs")
    assert corpus.count() == 1 and corpus.ids("docs") == set()
    corpus.clear()
    assert corpus.count() == 0


def test_rename_source_updates_results(corpus):
    corpus.rename_source("other", "Board meetings")
    (result,) = corpus.search(SearchQuery(q="plumber")).results
    assert result["source_name"] == "Board meetings"
    assert corpus.get("other--minutes")["source_name"] == "Board meetings"
    assert corpus.get("docs--cv")["source_name"] == "Docs"


def test_health(backend):
    assert backend.health() == "ok"


# --- Tantivy: processes, locking, reopening -----------------------------------------------


def _write_batches(index_dir: str, worker: str) -> None:
    backend = TantivyBackend(index_dir)
    for batch in range(10):
        backend.upsert(
            [make_doc(f"w{worker}-{batch}-{n}", f"the {worker} worker wrote this") for n in range(5)]
        )


def test_two_processes_writing_lose_no_documents(tmp_path):
    index_dir = str(tmp_path / "ix")
    reader = TantivyBackend(index_dir)  # stands for the web process
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_write_batches, args=(index_dir, w)) for w in ("north", "south")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert reader.count() == 100
    assert reader.search(SearchQuery(q="south worker", matching_strategy="all")).total == 50


def test_a_reader_sees_each_commit_of_another_writer_at_once(tmp_path):
    reader = TantivyBackend(tmp_path / "ix")  # stands for the web process
    writer = TantivyBackend(tmp_path / "ix")  # a scan worker
    assert reader.search(SearchQuery(q="heron")).total == 0
    for n in range(1, 21):  # commits closer together than the clock ticks files' times
        writer.upsert([make_doc(f"h{n}", "heron")])
        assert reader.search(SearchQuery(q="heron")).total == n
    writer.delete_ids(["docs--h1"])
    assert reader.search(SearchQuery(q="heron")).total == 19
    assert reader.count() == 19


def test_busy_writer_waits_then_raises(tmp_path):
    holder = TantivyBackend(tmp_path / "ix")
    other = TantivyBackend(tmp_path / "ix", writer_timeout=0.3)
    with holder._writer():
        with pytest.raises(SearchBackendError, match="busy"):
            other.upsert([make_doc("x", "blocked")])
    other.upsert([make_doc("x", "now it works")])
    assert holder.count() == 1


def test_reopened_index_still_folds_accents(tmp_path):
    TantivyBackend(tmp_path / "ix").upsert(CORPUS)
    reopened = TantivyBackend(tmp_path / "ix")
    assert sorted(ids_of(reopened, "resume")) == ["cv", "download"]


def test_text_lives_in_the_content_store_not_in_merged_segments(tmp_path):
    backend = TantivyBackend(tmp_path / "ix")
    backend.upsert(CORPUS)
    searcher = backend._searcher()
    stored = [
        json.loads(searcher.doc(a).get_first("doc"))
        for _, a in searcher.search(tantivy.Query.all_query(), 100).hits
    ]
    assert stored and all("content" not in doc for doc in stored)
    assert (tmp_path / "ix" / "content.sqlite3").exists()
    assert "tomatoes" in backend.get("docs--garden")["content"]
    backend.delete_source("docs")
    assert backend.content.get_many(["docs--garden"]) == {}


def test_make_backend_rejects_unknown_names():
    with pytest.raises(ValueError, match="SEARCH_BACKEND"):
        make_backend({"SEARCH_BACKEND": "solr"})
    with pytest.raises(ValueError, match="MEILI_URL"):
        make_backend({"SEARCH_BACKEND": "meilisearch"})


def test_meilisearch_chunks_keep_every_word_under_the_position_limit():
    from webapp.search.meili_backend import MAX_POSITIONS, MeiliBackend, split_content

    text = "Word after word. " * 40_000 + "needle at the very end."
    chunks = split_content(text)
    assert "".join(chunks) == text and len(chunks) > 1
    # each "." is a hard separator that Meilisearch counts as 8 positions
    assert all(len(c.split()) + 8 * c.count(".") <= MAX_POSITIONS for c in chunks)
    assert max(len(c.split()) for c in chunks) > 10_000  # chunks are not needlessly small
    parts = MeiliBackend._chunks(make_doc("big", text))
    assert [p["chunk"] for p in parts] == list(range(len(chunks)))
    assert len({p["uid"] for p in parts}) == len(parts) and parts[0]["metadata"] == {"lines": 1}


def test_members_carry_their_container_id(backend):
    archive = make_doc("zip", "reports/q1.txt", "backup.zip")
    member = make_doc(
        "member",
        "quarterly grebe figures",
        "q1.txt",
        path="/data/docs/backup.zip!/reports/q1.txt",
        container_id="docs--zip",
    )
    backend.upsert([archive, member])
    hits = backend.search(SearchQuery(q="grebe")).results
    assert [(h["id"], h["container_id"]) for h in hits] == [("docs--member", "docs--zip")]
    assert backend.get("docs--member")["container_id"] == "docs--zip"
    assert backend.get("docs--zip").get("container_id") is None


def _held(key: str, content: str, path: str, container: str, **extra) -> dict:
    return make_doc(key, content, path.rsplit("/", 1)[-1], path=path, container_id=container, **extra)


HELD = [
    make_doc("zip", "reports/q1-grebe.txt\nnotes.txt", "backup.zip", type="archive"),
    _held("q1", "quarterly grebe figures", "/data/docs/backup.zip!/reports/q1-grebe.txt", "docs--zip"),
    _held("notes", "tide times", "/data/docs/backup.zip!/notes.txt", "docs--zip"),
    make_doc("mail", "see the grebe count attached", "count.eml", type="email"),
    _held("count", "grebe count: 12", "/data/docs/count.eml!/count.txt", "docs--mail"),
    make_doc("birds", "osprey.txt", "birds.zip", type="archive"),
    _held("copied", "an osprey nest", "/data/docs/birds.zip!/osprey.txt", "docs--birds", copy=True),
    make_doc("osprey", "an osprey nest", "osprey.txt"),  # the copy's primary
]


def test_a_container_gives_way_to_its_matching_members(backend):
    """A container (an archive: its text lists what it holds) whose member matches is left
    out, in the results, the total and the facets alike; one the query names, or whose list
    alone answers, stays; a message keeps its place beside its attachment. A member that is
    a copy counts: its text is listed, under its primary."""
    backend.upsert(HELD)
    page = backend.search(SearchQuery(q="grebe", facets=("type",)))
    assert sorted(r["id"].split("--")[1] for r in page.results) == ["count", "mail", "q1"]
    assert page.total == 3 and page.facet_distribution == {"type": {"text": 2, "email": 1}}
    assert sorted(ids_of(backend, "backup grebe")) == ["count", "mail", "notes", "q1", "zip"]  # path: backup
    assert ids_of(backend, "notes grebe", matching_strategy="all") == ["zip"]
    assert ids_of(backend, "grebe type:archive") == ["zip"]
    assert ids_of(backend, "grebe", within_ids=("docs--zip", "docs--q1")) == ["q1"]
    assert ids_of(backend, "grebe", within_ids=("docs--zip",)) == []
    pages = [backend.search(SearchQuery(q="grebe", limit=1, offset=n)).results for n in range(4)]
    assert sorted(p[0]["id"] for p in pages[:3]) == ["docs--count", "docs--mail", "docs--q1"] and not pages[3]
    assert ids_of(backend, "osprey") == ["osprey"]


def test_within_ids_keeps_only_those_documents_under_the_query_and_its_filters(corpus):
    some = ("docs--garden", "docs--hostile", "other--minutes")
    assert sorted(ids_of(corpus, "", within_ids=some)) == ["garden", "hostile", "minutes"]
    assert ids_of(corpus, "type:pdf", within_ids=some) == ["hostile"]
    assert sorted(ids_of(corpus, "", within_ids=some, source_ids=("docs",))) == ["garden", "hostile"]
    assert ids_of(corpus, "cat", within_ids=some) == ["garden"]
    assert ids_of(corpus, "", within_ids=()) == []


def _photo(key: str, folder: str, taken: str | None, camera: tuple[str, str] | None, **extra) -> dict:
    meta: dict = {"format": "JPEG"}
    if taken:
        meta["date_taken"] = taken
    if camera:
        meta["camera_make"], meta["camera_model"] = camera
    doc = make_doc(key, "Format: JPEG", f"{key}.jpg", type="image", metadata=meta, **extra)
    doc["path"] = f"/data/{doc['source_id']}/{folder}/{key}.jpg"
    return doc


BROWSE = [
    _photo("old", "trips/2019", "2019:07:14 10:00:00", ("Canon", "Canon EOS 5D")),
    _photo("new", "trips/2023", "2023:01:02 03:04:05", ("Apple", "iPhone 12")),
    _photo("plain", "misc", None, None),  # no EXIF: its file's time (2023-11-14)
    _photo("member", "trips/2019/a.zip!/in", None, None),  # counts in its archive's folder
    _photo("hidden", "trips/2019", "2018:01:01 00:00:00", ("Leica", "M10"), source_id="other"),
]


def test_a_photos_date_taken_sorts_filters_and_makes_its_year(backend):
    backend.upsert(BROWSE)
    newest = ids_of(backend, "", sort="modified_at:desc", source_ids=("docs",))
    assert newest[-2:] == ["new", "old"] and set(newest[:2]) == {"plain", "member"}
    assert ids_of(backend, "modified:2019-07") == ["old"]
    page = backend.search(
        SearchQuery(q="", sort="modified_at:asc", facets=("year", "camera"), source_ids=("docs",))
    )
    assert page.facet_distribution["year"] == {"2019": 1, "2023": 3}
    assert page.facet_distribution["camera"] == {"Canon EOS 5D": 1, "Apple iPhone 12": 1}
    assert [r["modified_at"] for r in page.results] == [1_700_000_000] * 4  # the file's own time


def test_camera_filter_and_the_folder_facet_one_level_at_a_time(backend):
    backend.upsert(BROWSE)
    assert ids_of(backend, 'camera:"canon eos 5d"') == ["old"]
    top = backend.search(
        SearchQuery(
            q="", sort="basename:asc", facets=("folder",), folder_facet=("/data/docs",), source_ids=("docs",)
        )
    )
    assert top.facet_distribution["folder"] == {"/data/docs/trips": 3, "/data/docs/misc": 1}
    spec = parse_syntax("path:/data/docs/trips")
    trips = backend.search(
        SearchQuery(
            q="path:/data/docs/trips",
            spec=spec,
            facets=("folder",),
            folder_facet=("/data/docs/trips",),
        )
    )
    assert trips.total == 3 and trips.facet_distribution["folder"] == {
        "/data/docs/trips/2019": 2,
        "/data/docs/trips/2023": 1,
    }
    granted = backend.search(
        SearchQuery(
            q="", sort="basename:asc", facets=("folder",), folder_facet=("/data/other",), source_ids=("docs",)
        )
    )
    assert granted.facet_distribution["folder"] == {}  # the other source's folders do not exist


def test_meilisearch_filters_and_folders_are_composed_without_a_server():
    from webapp.search import subfolders
    from webapp.search.meili_backend import INDEX_SETTINGS
    from webapp.search.meili_backend import SORTS as MEILI_SORTS
    from webapp.search.meili_query import meili_filters as _meili_filters

    spec = parse_syntax('camera:"NIKON D750" modified:2019')
    filters = _meili_filters(SearchQuery(q="x", spec=spec), spec)
    assert 'camera IN ["NIKON D750"]' in filters
    assert any(f.startswith("(date >= ") for f in filters)
    assert MEILI_SORTS["modified_at:desc"] == "date:desc" and "date" in INDEX_SETTINGS["sortableAttributes"]
    counts = {"/": 9, "/d": 9, "/d/s": 9, "/d/s/a": 5, "/d/s/a/b": 4, "/d/s/c": 2}
    assert subfolders(counts, ("/d/s",)) == {"/d/s/a": 5, "/d/s/c": 2}
