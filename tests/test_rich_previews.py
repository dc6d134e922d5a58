"""The document page's previews: PDF pages drawn with highlights, sanitized Markdown, players
that stream with HTTP Range, and every file of the real corpus previewed without a 500."""

from __future__ import annotations

import io
import wave

import pytest
from PIL import Image

from tests import samples
from tests.conftest import corpus_dir, require_corpus
from tests.ui_helpers import login

MARKDOWN = """# Release notes

<script>alert('x')</script>

A [harmless link](https://example.org) and a [bad one](javascript:alert(1)).
<img src=x onerror="alert(2)"> <a href="/x" onclick="steal()">click</a>

| part | state |
|------|-------|
| budget | done |

![diagram](diagram.png)
"""


def _wav(seconds: float = 1.0) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(8000)
        out.writeframes(bytes(range(256)) * int(16000 * seconds / 256))
    return buf.getvalue()


FILES = {
    "report.pdf": samples.pdf(["The budget forecast for 2027", "Nothing to see here"]),
    "notes.md": MARKDOWN,
    "tone.wav": _wav(),
}


@pytest.fixture
def app_config(app_config):
    """The real corpus is an allowed root too (read only: the service never writes files)."""
    corpus = corpus_dir()
    if corpus is not None:
        return {**app_config, "ALLOWED_ROOTS": f"{app_config['ALLOWED_ROOTS']},{corpus}"}
    return app_config


@pytest.fixture
def docs(app, client, auth, make_tree, make_source, run_jobs):
    """FILES scanned; {file name: document id}, and a logged-in browser session."""
    root = make_tree("rich", FILES)
    source = make_source(root, name="Rich")
    assert client.post(f"/api/sources/{source['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    hits = client.post("/api/search", headers=auth, json={"q": "source:rich", "limit": 50}).get_json()[
        "results"
    ]
    browser = app.test_client()
    assert login(browser).status_code == 302
    return {h["basename"]: h["id"] for h in hits}, browser, root


def _yellow_share(img: Image.Image, box: tuple[float, float, float, float]) -> float:
    """Share of the pixels inside box painted with the highlight's yellow."""
    x0, y0, x1, y1 = (int(v) for v in box)
    pixels = [img.getpixel((x, y)) for x in range(x0 + 2, x1 - 2) for y in range(y0 + 2, y1 - 2)]
    yellow = [p for p in pixels if p[0] > 90 and p[0] - p[2] > 60 and p[1] - p[2] > 40]
    return len(yellow) / max(1, len(pixels))


def _word_box(pdf: bytes, word: str, page_height_px: int) -> tuple[float, ...]:
    """Where a word is on the first page of a PDF, in the pixels of a page drawn that tall."""
    import pymupdf

    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        page = doc[0]
        rect = page.search_for(word)[0] * (page_height_px / page.rect.height)
    return rect.x0, rect.y0, rect.x1, rect.y1


def test_pdf_page_is_drawn_with_the_query_highlighted(docs):
    ids, browser, _ = docs
    pdf_id = ids["report.pdf"]
    page = browser.get(f"/documents/{pdf_id}?q=budgets")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and f'src="/documents/{pdf_id}/pages/1?q=budgets"' in html
    assert "Page 1 of 2" in html and "Show the extracted text" in html

    drawn = browser.get(f"/documents/{pdf_id}/pages/1?q=budgets")  # a stem of the word
    assert drawn.status_code == 200 and drawn.mimetype == "image/jpeg"
    img = Image.open(io.BytesIO(drawn.data)).convert("RGB")
    assert img.height == 1400
    budget = _word_box(FILES["report.pdf"], "budget", img.height)
    forecast = _word_box(FILES["report.pdf"], "forecast", img.height)
    assert _yellow_share(img, budget) > 0.4  # the matched word is painted over
    assert _yellow_share(img, forecast) < 0.02  # a word not asked for is not

    plain = Image.open(io.BytesIO(browser.get(f"/documents/{pdf_id}/pages/1").data))
    assert _yellow_share(plain.convert("RGB"), budget) < 0.02
    second = browser.get(f"/documents/{pdf_id}/pages/2?q=budget")
    assert second.status_code == 200
    missing = browser.get(f"/documents/{pdf_id}/pages/9")
    assert missing.status_code == 422 and "has no page 9" in missing.get_data(as_text=True)
    later = browser.get(f"/documents/{pdf_id}?q=nothing").get_data(as_text=True)
    assert f'src="/documents/{pdf_id}/pages/2?q=nothing"' in later  # opens on the match's page
    assert "Page 2 of 2" in later
    text = browser.get(f"/documents/{pdf_id}?q=budget&view=text").get_data(as_text=True)
    assert "<em>budget</em>" in text and "/pages/1" not in text


def test_markdown_is_rendered_and_sanitized(docs):
    ids, browser, _ = docs
    html = browser.get(f"/documents/{ids['notes.md']}").get_data(as_text=True)
    body = html[html.index('class="markdown-body"') :]
    body = body[: body.index("</section>")]
    assert "<h1>Release notes</h1>" in body and "<td>budget</td>" in body
    assert '<a href="https://example.org" rel="noopener noreferrer nofollow">' in body
    for bad in ("<script", "alert('x')", "alert(2)", "onerror", "onclick", 'href="javascript', "<img"):
        assert bad not in body, bad
    assert "[diagram]" in body  # a picture becomes its alt text
    marked = browser.get(f"/documents/{ids['notes.md']}?q=budgets").get_data(as_text=True)
    assert '<td><mark class="match">budget</mark></td>' in marked  # the query, in the table
    assert "1 match on this page" in marked
    raw = browser.get(f"/documents/{ids['notes.md']}?view=text").get_data(as_text=True)
    assert "&lt;script&gt;alert(" in raw  # the text view shows the source, escaped


def test_media_plays_from_the_page_and_honours_range(client, auth, docs):
    ids, browser, root = docs
    wav = (root / "tone.wav").read_bytes()
    media_id = ids["tone.wav"]
    html = browser.get(f"/documents/{media_id}").get_data(as_text=True)
    assert f'<audio controls preload="metadata" src="/documents/{media_id}/media"' in html

    part = browser.get(f"/documents/{media_id}/media", headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.data == wav[100:200]
    assert part.headers["Content-Range"] == f"bytes 100-199/{len(wav)}"
    assert part.headers["Accept-Ranges"] == "bytes" and part.mimetype.startswith("audio/")
    whole = browser.get(f"/documents/{media_id}/media")
    assert whole.status_code == 200 and whole.data == wav
    assert whole.headers["Accept-Ranges"] == "bytes"
    beyond = browser.get(f"/documents/{media_id}/media", headers={"Range": f"bytes={len(wav) + 10}-"})
    assert beyond.status_code == 416
    # opened by its address (not by the page's player), the file goes to its document page
    opened = browser.get(f"/documents/{media_id}/media", headers={"Sec-Fetch-Dest": "document"})
    assert opened.status_code == 303 and opened.headers["Location"].endswith(f"/documents/{media_id}")
    played = browser.get(f"/documents/{media_id}/media", headers={"Sec-Fetch-Dest": "audio"})
    assert played.status_code == 200 and played.data == wav
    assert client.get(f"/documents/{media_id}/media").status_code == 302  # to the login page

    link = client.post(f"/api/documents/{media_id}/download-link", headers=auth).get_json()
    tail = client.get(link["url"], headers={"Range": "bytes=-50"})
    assert tail.status_code == 206 and tail.data == wav[-50:]
    assert client.get(link["url"], headers={"Range": f"bytes={len(wav)}-"}).status_code == 416


def test_every_file_of_the_real_corpus_previews_without_a_500(app, client, auth, make_source, run_jobs):
    corpus = require_corpus()
    source = make_source(corpus / "real", name="Real")
    assert client.post(f"/api/sources/{source['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    docs, offset = [], 0
    while True:
        page = client.post(
            "/api/search", headers=auth, json={"q": "source:real", "limit": 100, "offset": offset}
        ).get_json()
        docs += page["results"]
        offset += 100
        if offset >= page["total"]:
            break
    assert len(docs) > 150
    browser = app.test_client()
    login(browser)
    seen: dict[str, int] = {}
    for doc in docs:
        resp = browser.get(f"/documents/{doc['id']}?q=the")
        assert resp.status_code == 200, doc["path"]
        html = resp.get_data(as_text=True)
        for url in _preview_urls(html, doc):
            status = browser.get(url, headers={"Range": "bytes=0-99"}).status_code
            assert status in (200, 206, 422), (doc["path"], url, status)
            seen[doc["type"]] = seen.get(doc["type"], 0) + 1
        if doc["thumbnail_url"]:
            assert browser.get(doc["thumbnail_url"]).status_code == 200, doc["path"]
    assert {"image", "pdf", "media"} <= set(seen)
    by_name = {d["basename"]: d for d in docs}
    nef = by_name["tika-testNEF.nef"]  # a RAW file without an embedded preview
    html = browser.get(f"/documents/{nef['id']}").get_data(as_text=True)
    assert "data-no-preview" in html and "data-image-preview" not in html
    video = browser.get(f"/documents/{by_name['tika-testVideoMp4.mp4']['id']}")
    assert "<video controls" in video.get_data(as_text=True)
    assert sum(1 for d in docs if d["thumbnail_url"]) >= 25


def _preview_urls(html: str, doc: dict) -> list[str]:
    """The image, page, media and PDF viewer addresses the document page points its elements at."""
    base = f"/documents/{doc['id']}/"
    urls = []
    for suffix in ("image", "pages/1?q=the", "media", "file", "hits?q=the"):  # the last two:
        if f'src="{base}{suffix}"' in html or f'data-hits="{base}{suffix}"' in html:  # the viewer's
            urls.append(base + suffix)
    return urls
