"""The PDF viewer's server side: hit boxes on whole matched words only (`radio` never marks
`ratio` inside `separation`), the pages holding a match, and the PDF itself for pdf.js,
following the user's grants (archive members too)."""

from __future__ import annotations

import html
import io
import json
import re
import zipfile

import pytest
from PIL import Image

from tests import samples
from tests.test_access import PASSWORD, create_user
from tests.ui_helpers import login
from webapp.indexing.scanner import doc_id

LINE = "The separation of radio waves"
PAGES = ["Nothing here", LINE, "A ratio and the radios", "The end"]


def _words(pdf: bytes, page_no: int) -> dict[str, tuple[float, float, float, float]]:
    import pymupdf

    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        page = doc[page_no - 1]
        return {w[4]: tuple(w[:4]) for w in page.get_text("words")}


def _overlaps(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_hit_boxes_cover_whole_matched_words_not_substrings(tmp_path):
    """pymupdf's search_for("ratio") finds `ratio` inside `separation`; the hit boxes are the
    words the search's matcher accepts, whole, and the drawn page paints only them."""
    import pymupdf

    from webapp.previews import pdfhits, render
    from webapp.search.query import TermMatcher, parse_query

    pdf = samples.pdf(PAGES)
    words = _words(pdf, 2)
    matcher = TermMatcher.from_query(parse_query("radio"))
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        assert doc[1].search_for("ratio")  # the substring the old highlighting painted
        boxes = pdfhits.hit_rects(doc[1], matcher)
        assert pdfhits.first_match(doc, matcher) == 2
        found = pdfhits.pdf_hits(doc, matcher, seconds=10)
    assert len(boxes) == 1
    assert _overlaps(boxes[0], words["radio"]) and not _overlaps(boxes[0], words["separation"])
    assert sorted(found["hits"]) == ["2", "3"]  # "ratio" (a typo) and "radios" (a stem) on page 3
    assert found["sizes"] == [[595.0, 842.0]] * 4  # A4 and found["searched"] == 4
    x0, y0, x1, y1 = found["hits"]["2"][0]
    assert abs(x0 * 595 - words["radio"][0]) < 1 and abs(y1 * 842 - words["radio"][3]) < 1

    path = tmp_path / "waves.pdf"
    path.write_bytes(pdf)
    limits = render.PreviewLimits(max_side=1400, max_pixels=40_000_000, memory_mb=1024, timeout=20)
    data, _ = render.render_pdf_page(str(path), 2, matcher, limits)
    img = Image.open(io.BytesIO(data)).convert("RGB")
    zoom = img.height / 842

    def yellow(box) -> float:
        x0, y0, x1, y1 = (int(v * zoom) for v in box)
        pixels = [img.getpixel((x, y)) for x in range(x0 + 2, x1 - 2) for y in range(y0 + 2, y1 - 2)]
        return sum(1 for p in pixels if p[0] > 90 and p[0] - p[2] > 60 and p[1] - p[2] > 40) / len(pixels)

    assert yellow(words["radio"]) > 0.4
    assert yellow(words["separation"]) < 0.02  # sepa[ration] no more


def test_a_word_with_punctuation_is_marked_on_its_letters_only():
    import pymupdf

    from webapp.previews import pdfhits
    from webapp.search.query import TermMatcher, parse_query

    doc = pymupdf.open(stream=samples.pdf(["radio, then"]), filetype="pdf")
    (box,) = pdfhits.hit_rects(doc[0], TermMatcher.from_query(parse_query("radio")))
    word = {w[4]: w[:4] for w in doc[0].get_text("words")}["radio,"]
    assert box[0] == pytest.approx(word[0]) and box[2] < word[2] - 2  # the comma is left out


@pytest.fixture
def pdfs(app, client, auth, make_tree, make_source, run_jobs):
    """A PDF, a Markdown file and a PDF inside a zip in source `docs`; {name: id}, an admin
    browser session and the headers to make users."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("inner/waves.pdf", samples.pdf(PAGES))
    root = make_tree(
        "viewer",
        {"waves.pdf": samples.pdf(PAGES), "notes.md": "# radio notes", "bundle.zip": archive.getvalue()},
    )
    source = make_source(root, name="Docs", id="docs")
    assert client.post(f"/api/sources/{source['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    found = client.post("/api/search", headers=auth, json={"q": "source:docs", "limit": 50}).get_json()
    ids = {("member " if r["container_id"] else "") + r["basename"]: r["id"] for r in found["results"]}
    # the zip's waves.pdf holds the same text as the file beside it: listed as its copy
    ids["member waves.pdf"] = doc_id("docs", f"{root}/bundle.zip!/inner/waves.pdf")
    browser = app.test_client()
    assert login(browser).status_code == 302
    return ids, browser


def test_hits_and_file_endpoints_serve_the_viewer(app, client, auth, pdfs):
    ids, browser = pdfs
    pdf_id = ids["waves.pdf"]
    page = browser.get(f"/documents/{pdf_id}?q=radio").get_data(as_text=True)
    assert "data-pdf-viewer" in page and f'data-src="/documents/{pdf_id}/file"' in page
    assert 'data-page="2"' in page  # opens on the first page with a hit
    assert "<noscript data-pdf-fallback>" in page  # the server-drawn pages without JavaScript
    german = browser.get(f"/documents/{pdf_id}?q=radio", headers={"Accept-Language": "de"}).get_data(
        as_text=True
    )
    assert "Nächste Seite mit Treffer" in german  # the viewer speaks the page's language,
    messages = json.loads(html.unescape(re.search(r'data-messages="([^"]*)"', german).group(1)))
    assert messages["page_of"] == "Seite {page} von {pages}"  # its script too
    assert messages["hits_many"] == "Treffer auf {n} Seiten"

    hits = browser.get(f"/documents/{pdf_id}/hits?q=radio")
    assert hits.status_code == 200 and sorted(hits.get_json()["hits"]) == ["2", "3"]
    assert browser.get(f"/documents/{pdf_id}/hits").get_json()["hits"] == {}
    assert browser.get(f"/documents/{pdf_id}/hits?q=-radio").get_json()["hits"] == {}

    fetch = {"Sec-Fetch-Dest": "empty", "Sec-Fetch-Mode": "cors"}  # how pdf.js asks
    whole = browser.get(f"/documents/{pdf_id}/file", headers=fetch)
    assert whole.status_code == 200 and whole.mimetype == "application/pdf"
    # never shown by the browser itself: a navigation would download it
    assert whole.data.startswith(b"%PDF") and whole.headers["Content-Disposition"].startswith("attachment")
    assert "sandbox" in whole.headers["Content-Security-Policy"]  # its scripts stay inert
    for dest, mode in (("document", "navigate"), ("iframe", "navigate"), ("embed", "no-cors")):
        opened = browser.get(
            f"/documents/{pdf_id}/file", headers={"Sec-Fetch-Dest": dest, "Sec-Fetch-Mode": mode}
        )
        assert opened.status_code == 303 and opened.headers["Location"].endswith(f"/documents/{pdf_id}"), dest
        assert b"%PDF" not in opened.data
    part = browser.get(f"/documents/{pdf_id}/file", headers={"Range": "bytes=0-3"})
    assert part.status_code == 206 and part.data == b"%PDF"  # pdf.js fetches by ranges

    member = ids["member waves.pdf"]  # a PDF inside a zip: read out of it for the viewer
    assert "data-pdf-viewer" in browser.get(f"/documents/{member}?q=radio").get_data(as_text=True)
    assert sorted(browser.get(f"/documents/{member}/hits?q=radio").get_json()["hits"]) == ["2", "3"]
    inner = browser.get(f"/documents/{member}/file", headers={"Range": "bytes=0-3"})
    assert inner.status_code == 206 and inner.data == b"%PDF"

    for other in (ids["notes.md"], ids["bundle.zip"], "docs--nope"):
        assert browser.get(f"/documents/{other}/file").status_code == 404
        assert browser.get(f"/documents/{other}/hits?q=radio").status_code == 404

    # what a user may not see does not exist for them; logged out, no file either
    create_user(client, auth, "carol")
    carol = app.test_client()
    assert login(carol, "carol", PASSWORD).status_code == 302
    for hidden in (pdf_id, member):
        assert carol.get(f"/documents/{hidden}/file").status_code == 404
        assert carol.get(f"/documents/{hidden}/hits?q=radio").status_code == 404
    anonymous = app.test_client().get(f"/documents/{pdf_id}/file")
    assert anonymous.status_code in (302, 401) and b"%PDF" not in anonymous.data
