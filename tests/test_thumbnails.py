"""Thumbnails: made by the scan, listed in results, served with auth, gone with their document."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image

from tests import samples
from tests.ui_helpers import login, post

FILES = {
    "photo.jpg": samples.picture((800, 600), samples.RED),
    "report.pdf": samples.pdf(["The budget forecast for 2027", "A second page"]),
    "novel.epub": samples.epub(samples.picture((300, 450), samples.GREEN, "PNG")),
    "strip.cbz": samples.cbz(
        [
            samples.picture((400, 600), samples.MAGENTA, "PNG"),
            samples.picture((400, 600), samples.BLUE, "PNG"),
        ]
    ),
    "notes.txt": "plain words without a picture",
}


@pytest.fixture
def scanned(client, auth, make_tree, make_source, run_jobs):
    """A scanned source over FILES: (source, {file name: search result})."""
    root = make_tree("mixed", FILES)
    source = make_source(root, name="Mixed")

    def scan() -> dict[str, dict]:
        resp = client.post(f"/api/sources/{source['id']}/reindex", headers=auth)
        assert resp.status_code == 200
        run_jobs()
        hits = client.post(
            "/api/search", headers=auth, json={"q": f"source:{source['id']}", "limit": 50}
        ).get_json()
        return {h["basename"]: h for h in hits["results"]}

    return source, root, scan


def _thumb(client, url: str, headers: dict | None = None):
    return client.get(url, headers=headers or {})


def test_the_scan_makes_thumbnails_of_pictures_pages_and_covers(client, auth, scanned):
    _, _, scan = scanned
    hits = scan()
    assert hits["notes.txt"]["thumbnail_url"] is None
    expected = {
        "photo.jpg": samples.RED,
        "novel.epub": samples.GREEN,
        "strip.cbz": samples.MAGENTA,
    }  # page1, not page10 (natural order)
    for name, color in expected.items():
        url = hits[name]["thumbnail_url"]
        assert url == f"/api/documents/{hits[name]['id']}/thumbnail", name
        resp = _thumb(client, url, auth)
        assert resp.status_code == 200 and resp.mimetype == "image/jpeg", name
        img = Image.open(io.BytesIO(resp.data))
        assert img.format == "JPEG" and max(img.size) == 320, (name, img.size)
        assert samples.near(samples.main_color(resp.data), color), name
    page = Image.open(io.BytesIO(_thumb(client, hits["report.pdf"]["thumbnail_url"], auth).data))
    assert page.height == 320 and 220 < page.width < 230  # A4 first page, portrait
    dark = sum(1 for px in page.convert("L").getdata() if px < 128)
    assert dark > 50  # the line of text is drawn


def test_thumbnails_need_a_token_or_the_web_session(app, client, auth, scanned):
    _, _, scan = scanned
    url = scan()["photo.jpg"]["thumbnail_url"]
    anonymous = client.get(url)
    assert anonymous.status_code == 401 and set(anonymous.get_json()) == {"detail"}
    bad = client.get(url, headers={"Authorization": "Bearer not-a-token"})
    assert bad.status_code == 401
    browser = app.test_client()
    assert login(browser).status_code == 302
    assert browser.get(url).status_code == 200
    post(browser, "/logout")
    assert browser.get(url).status_code == 401


def test_search_page_shows_the_thumbnails(app, auth, scanned):
    _, _, scan = scanned
    hits = scan()
    browser = app.test_client()
    login(browser)
    html = browser.get("/?q=source:mixed").get_data(as_text=True)
    assert f'<img src="{hits["photo.jpg"]["thumbnail_url"]}"' in html
    assert html.count("data-thumbnail") == 4  # photo, PDF, book, comic; not the text file


def test_thumbnails_follow_changes_and_deletions(app, client, auth, scanned, data_dir):
    source, root, scan = scanned
    hits = scan()
    photo = hits["photo.jpg"]
    stored = Path(data_dir, "thumbs", source["id"])
    assert len(list(stored.rglob("*.jpg"))) == 4

    (root / "photo.jpg").write_bytes(samples.picture((600, 800), samples.BLUE))
    os.utime(root / "photo.jpg", (1, 1))  # a changed mtime: the file is modified
    changed = _thumb(client, scan()["photo.jpg"]["thumbnail_url"], auth)
    assert samples.near(samples.main_color(changed.data), samples.BLUE)  # made again
    assert Image.open(io.BytesIO(changed.data)).size == (240, 320)

    (root / "strip.cbz").write_bytes(b"no longer a comic")  # now fails: its thumbnail goes
    (root / "photo.jpg").unlink()
    hits = scan()
    assert "photo.jpg" not in hits and hits["strip.cbz"]["thumbnail_url"] is None
    assert client.get(photo["thumbnail_url"], headers=auth).status_code == 404
    assert len(list(stored.rglob("*.jpg"))) == 2  # PDF and book remain

    assert client.delete(f"/api/sources/{source['id']}", headers=auth).status_code == 204
    assert not stored.exists()
    assert (root / "report.pdf").exists()  # the files themselves are never touched


def test_a_full_scan_prunes_thumbnails_left_without_a_file(client, auth, scanned, data_dir, run_jobs):
    from webapp.indexing import thumbstore

    source, _, scan = scanned
    scan()
    stray = thumbstore.path_for(str(data_dir), f"{source['id']}--0123456789ab")
    os.makedirs(os.path.dirname(stray), exist_ok=True)
    Path(stray).write_bytes(b"left by a cancelled scan")
    assert client.post(f"/api/sources/{source['id']}/reindex?full=true", headers=auth).status_code == 200
    run_jobs()
    assert not os.path.exists(stray)
    assert len(list(Path(data_dir, "thumbs", source["id"]).rglob("*.jpg"))) == 4
