"""Search endpoint and documents: validation, results, previews, download links and path checks."""

from __future__ import annotations

import io

import pytest
from PIL import Image

FILES = {
    "Quarterly Report.txt": "The quarterly revenue grew. Résumé of the board meeting.",
    "notes/budget.md": "---\ntitle: Budget plan\n---\n# Budget\nThe budget for next year.",
    "notes/evil.txt": "<script>alert('x')</script> invoice total",
    "naïve café.txt": "accented file name",
}


@pytest.fixture
def indexed(client, auth, make_tree, make_source, run_jobs):
    """A source over FILES (plus a PNG), scanned."""
    files = dict(FILES)
    buf = io.BytesIO()
    Image.new("RGB", (3000, 1500), (200, 30, 30)).save(buf, "PNG")
    files["photos/red.png"] = buf.getvalue()
    root = make_tree("docs", files)
    src = make_source(root)
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    return root


def _search(client, auth, **body):
    return client.post("/api/search", headers=auth, json=body)


def _first_id(client, auth, q):
    return _search(client, auth, q=q).get_json()["results"][0]["id"]


def test_search_validation_names_the_field(client, auth):
    cases = [
        ({}, "q: is required"),
        ({"q": "  "}, "q: must not be empty"),
        ({"q": "x", "limit": 0}, "limit: must be between 1 and 100"),
        ({"q": "x", "limit": 101}, "limit: must be between 1 and 100"),
        ({"q": "x", "snippet_length": 49}, "snippet_length: must be between 50 and 1000"),
        ({"q": "x", "offset": -1}, "offset:"),
        ({"q": "x", "sort": "name"}, "sort: must be one of"),
        ({"q": "x", "limit": "ten"}, "limit:"),
        ({"q": "x", "colour": 1}, "colour: unknown field"),
        ({"q": "x", "matching_strategy": "any"}, "matching_strategy: must be one of all, last"),
        ({"q": "x" * 4001}, "q: must be at most 4000 characters"),
    ]
    for body, detail in cases:
        resp = _search(client, auth, **body)
        assert resp.status_code == 400 and resp.get_json()["detail"].startswith(detail), body


def test_search_results_have_the_contract_fields(client, auth, indexed):
    resp = _search(client, auth, q="quartely revenue")  # typo in a 9-letter word
    body = resp.get_json()
    assert body["total"] == 1 and body["limit"] == 20 and body["offset"] == 0
    assert isinstance(body["processing_time_ms"], int)
    hit = body["results"][0]
    assert set(hit) == {
        "id",
        "path",
        "basename",
        "source_name",
        "type",
        "size_bytes",
        "modified_at",
        "snippet",
        "score",
        "container_id",
        "thumbnail_url",
        "match",
        "copies",
    }
    assert hit["copies"] == []  # no other file holds its text
    assert hit["match"] == "words"  # not embedded yet (the phase waits on the low-priority queue)
    assert hit["container_id"] is None  # a plain file (members name their container)
    assert hit["thumbnail_url"] is None  # a text file has no picture
    assert hit["basename"] == "Quarterly Report.txt" and hit["type"] == "text"
    assert "<em>quarterly</em>" in hit["snippet"] and "<em>revenue</em>" in hit["snippet"]
    assert hit["id"].startswith("docs--") and len(hit["id"]) == len("docs--") + 12
    assert isinstance(hit["modified_at"], int) and hit["score"] > 0


def test_matching_strategy_over_http(client, auth, indexed):
    # `budget` occurs, `zebra` nowhere: the default strategy still finds the budget plan
    assert _search(client, auth, q="budget zebra").get_json()["total"] == 1
    assert _search(client, auth, q="budget zebra", matching_strategy="all").get_json()["total"] == 0
    question = "What is in the budget plan for next year, and who wrote it? " * 8
    assert _first_id(client, auth, question) == _first_id(client, auth, "budget plan")


def test_accents_filters_and_escaping(client, auth, indexed):
    assert _search(client, auth, q="resume").get_json()["total"] == 1
    assert _search(client, auth, q="naive cafe").get_json()["total"] == 1
    assert _search(client, auth, q="budget", type="markdown").get_json()["total"] == 1
    assert _search(client, auth, q="budget", type="pdf").get_json()["total"] == 0
    assert _search(client, auth, q="budget", source_id="docs").get_json()["total"] == 1
    evil = _search(client, auth, q="invoice").get_json()["results"][0]["snippet"]
    assert "<script>" not in evil and "&lt;script&gt;" in evil and "<em>invoice</em>" in evil


def test_document_and_unknown_ids(client, auth, indexed):
    doc_id = _first_id(client, auth, "budget plan")
    doc = client.get(f"/api/documents/{doc_id}", headers=auth).get_json()
    assert doc["title"] == "Budget plan" and doc["type"] == "markdown"
    assert doc["extension"] == "md" and doc["source_name"] == "Docs"
    assert "The budget for next year." in doc["content"] and "title:" not in doc["content"]
    assert isinstance(doc["indexed_at"], int) and isinstance(doc["metadata"], dict)
    for url in ("/api/documents/docs--000000000000", "/api/documents/nope/preview"):
        resp = client.get(url, headers=auth)
        assert resp.status_code == 404 and set(resp.get_json()) == {"detail"}
    assert client.post("/api/documents/nope/download-link", headers=auth).status_code == 404
    assert client.get(f"/api/documents/{doc_id}").status_code == 401


def test_text_preview_is_escaped_highlighted_html(client, auth, indexed):
    doc_id = _first_id(client, auth, "invoice")
    resp = client.get(f"/api/documents/{doc_id}/preview?q=invoce", headers=auth)
    assert resp.status_code == 200 and resp.mimetype == "text/html"
    html = resp.get_data(as_text=True)
    assert "&lt;script&gt;" in html and "<script>alert" not in html
    assert "<em>invoice</em>" in html


def test_image_preview_is_scaled(app, client, auth, indexed):
    doc_id = _first_id(client, auth, "red")
    resp = client.get(f"/api/documents/{doc_id}/preview", headers=auth)
    assert resp.status_code == 200 and resp.mimetype in ("image/png", "image/jpeg")
    assert resp.headers["Content-Disposition"].startswith("inline")
    img = Image.open(io.BytesIO(resp.data))
    assert max(img.size) == app.config["PREVIEW_MAX_PX"] and img.size == (2048, 1024)


def test_download_link_and_download(client, auth, indexed):
    doc_id = _first_id(client, auth, "accented")
    link = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()
    assert link["expires_in"] == 300 and link["filename"] == "naïve café.txt"
    assert link["url"].startswith(f"/api/documents/{doc_id}/download?token=")
    resp = client.get(link["url"])
    assert resp.status_code == 200 and resp.data == b"accented file name"
    disposition = resp.headers["Content-Disposition"]
    assert disposition.startswith("attachment")
    assert "filename*=UTF-8''na%C3%AFve%20caf%C3%A9.txt" in disposition


def test_download_tokens_are_checked(client, auth, token, indexed):
    doc_id = _first_id(client, auth, "accented")
    other_id = _first_id(client, auth, "budget plan")
    link = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()
    good = link["url"].split("token=")[1]
    base = f"/api/documents/{doc_id}/download"
    assert client.get(base).status_code == 401
    assert client.get(f"{base}?token=garbage").status_code == 401
    assert client.get(f"{base}?token={good[:-3]}xyz").status_code == 401
    assert client.get(f"{base}?token={token}").status_code == 401  # an access token is no link
    wrong = client.get(f"/api/documents/{other_id}/download?token={good}")
    assert wrong.status_code == 403 and set(wrong.get_json()) == {"detail"}
    # an expired link: test_security.py::test_download_tokens_expire_and_are_bound_to_one_document


def test_download_link_is_not_an_access_token(client, auth, indexed):
    doc_id = _first_id(client, auth, "accented")
    link = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()
    dl_token = link["url"].split("token=")[1]
    assert client.get("/api/auth/me", headers={"Authorization": f"Bearer {dl_token}"}).status_code == 401


def test_files_swapped_or_gone_after_indexing_are_refused(client, auth, indexed, scratch):
    doc_id = _first_id(client, auth, "accented")
    secret = scratch / "secret.txt"
    secret.write_text("outside the source")
    target = indexed / "naïve café.txt"
    target.unlink()
    target.symlink_to(secret)
    link = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()
    swapped = client.get(link["url"])
    assert swapped.status_code == 403 and b"outside the source" not in swapped.data
    assert client.get(f"/api/documents/{doc_id}/preview", headers=auth).status_code == 403
    img_id = _first_id(client, auth, "red")
    (indexed / "photos" / "red.png").unlink()
    gone = client.get(f"/api/documents/{img_id}/preview", headers=auth)
    assert gone.status_code == 404 and gone.get_json() == {"detail": "File no longer exists"}
