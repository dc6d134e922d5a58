"""The document page's preview chosen by one service (services/document_preview.py): its kinds,
a photo's details once in a localised table with a map link, slides one at a time, a comic's
pages one at a time."""

from __future__ import annotations

import io
import re

import pytest
from pptx import Presentation

from tests import samples
from tests.conftest import require_corpus
from tests.ui_helpers import login
from webapp.services.document_preview import Kind, kind_of

DE = {"Accept-Language": "de-DE,de;q=0.9"}
EN = {"Accept-Language": "en-US,en;q=0.9"}


def _deck(slides: list[tuple[str, str]]) -> bytes:
    """A presentation whose slides have a title, one line of body text and a picture each
    (red on the first slide, blue on the second, ...)."""
    deck = Presentation()
    colors = ((200, 0, 0), (0, 0, 200), (0, 160, 0))
    for (title, body), color in zip(slides, colors, strict=False):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        slide.shapes.add_picture(io.BytesIO(samples.picture((80, 60), color, "PNG")), 0, 0)
    buf = io.BytesIO()
    deck.save(buf)
    return buf.getvalue()


@pytest.fixture
def app_config(app_config):
    """GPS is indexed (the map link needs it)."""
    return {**app_config, "INDEX_GPS": "true"}


@pytest.fixture
def pages(app, client, auth, make_tree, make_source, run_jobs):
    """A photo with GPS, a deck and a comic scanned; (ids by name, a logged-in browser)."""
    photo = (require_corpus() / "real/image/tika-testJPEG_GEO.jpg").read_bytes()
    files = {
        "geo.jpg": photo,
        "talk.pptx": _deck([("Opening", "Welcome aboard"), ("Budget", "The forecast for 2027")]),
        "story.cbz": samples.cbz(
            [samples.picture((60, 90), color, "PNG") for color in ((200, 0, 0), (0, 160, 0), (0, 0, 200))]
        ),
    }
    source = make_source(make_tree("media", files), name="Media")
    assert client.post(f"/api/sources/{source['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    hits = client.post("/api/search", headers=auth, json={"q": "source:media", "limit": 50}).get_json()
    browser = app.test_client()
    assert login(browser).status_code == 302
    return {h["basename"]: h["id"] for h in hits["results"]}, browser


def test_each_kind_of_document_gets_its_preview():
    """The kinds the page dispatches on, from the document alone; `view=text` asks for text."""
    pdf = {"type": "pdf", "basename": "a.pdf", "metadata": {"page_count": 3}}
    assert kind_of(pdf) == Kind.PDF and kind_of(pdf, as_text=True) == Kind.TEXT
    assert kind_of({"type": "image", "basename": "a.jpg"}) == Kind.IMAGE
    assert kind_of({"type": "raw_image", "basename": "a.nef"}) == Kind.IMAGE
    assert kind_of({"type": "markdown", "basename": "a.md"}) == Kind.MARKDOWN
    assert kind_of({"type": "media", "basename": "a.mp3"}) == Kind.MEDIA
    mail = {"type": "email", "basename": "a.eml"}
    assert kind_of(mail) == Kind.EMAIL and kind_of(mail, as_text=True) == Kind.TEXT
    assert kind_of({"type": "comic", "basename": "a.cbz", "metadata": {"page_count": 2}}) == Kind.PAGES
    assert kind_of({"type": "comic", "basename": "a.cbz", "metadata": {"page_count": 0}}) == Kind.TEXT
    deck = {"type": "pptx", "basename": "a.pptx", "content": "Slide 1\nHello\n\nSlide 2\nWorld"}
    assert kind_of(deck) == Kind.SLIDES and kind_of(deck, as_text=True) == Kind.TEXT
    assert kind_of({"type": "pdf", "basename": "a.pdf", "metadata": {}}) == Kind.TEXT


def test_a_photos_details_show_once_in_the_pages_language_with_a_map_link(pages):
    ids, browser = pages
    page = browser.get(f"/documents/{ids['geo.jpg']}", headers=EN).get_data(as_text=True)
    assert page.count("Canon EOS 40D") == 1  # the camera once: not again in a metadata table
    assert "2009:08:11" not in page  # no date in EXIF's own form
    taken = re.search(r'data-fact="taken">.*?<td>([^<]+)</td>', page, re.S).group(1)
    assert "2009" in taken and "Aug" in taken
    assert "1/1600 s · f/5.6 · ISO 400 · 194 mm" in page
    link = re.search(r'href="(https://www\.openstreetmap\.org/\?mlat=[^"]+)"', page).group(1)
    assert "mlat=" in link and "mlon=" in link
    assert 'id="meta-heading"' not in page  # the photo table replaces the metadata table
    german = browser.get(f"/documents/{ids['geo.jpg']}", headers=DE).get_data(as_text=True)
    taken_de = re.search(r'data-fact="taken">.*?<td>([^<]+)</td>', german, re.S).group(1)
    assert taken_de.startswith("11.08.2009")


def test_a_presentation_shows_one_slide_at_a_time_with_its_pictures(pages):
    ids, browser = pages
    page = browser.get(f"/documents/{ids['talk.pptx']}?q=forecast").get_data(as_text=True)
    assert 'data-slide="2"' in page  # the first slide with a match
    assert "Budget" in page and "Opening" not in page
    assert "<em>forecast</em>" in page or 'class="match">forecast' in page
    first = browser.get(f"/documents/{ids['talk.pptx']}?page=1").get_data(as_text=True)
    assert 'data-slide="1"' in first and "Welcome aboard" in first and 'rel="next"' in first
    doc = ids["talk.pptx"]
    assert f"/documents/{doc}/slides/pictures/2" in page and "/slides/pictures/1" not in page
    assert f"/documents/{doc}/slides/pictures/1" in first
    picture = browser.get(f"/documents/{doc}/slides/pictures/2")
    assert picture.status_code == 200 and samples.near(samples.main_color(picture.data), (0, 0, 200))
    assert browser.get(f"/documents/{doc}/slides/pictures/9").status_code == 422
    text = browser.get(f"/documents/{ids['talk.pptx']}?view=text").get_data(as_text=True)
    assert "data-slide" not in text and "Welcome aboard" in text and "The forecast" in text


def test_a_comic_is_paged_one_picture_at_a_time(pages):
    ids, browser = pages
    doc = ids["story.cbz"]
    page = browser.get(f"/documents/{doc}?page=2").get_data(as_text=True)
    assert f"/documents/{doc}/comic/2" in page and 'data-comic-page="2"' in page
    assert 'rel="prev"' in page and 'rel="next"' in page
    drawn = browser.get(f"/documents/{doc}/comic/2")
    assert drawn.status_code == 200 and samples.near(samples.main_color(drawn.data), (0, 160, 0))
    third = browser.get(f"/documents/{doc}/comic/3")
    assert samples.near(samples.main_color(third.data), (0, 0, 200))
    assert browser.get(f"/documents/{doc}/comic/99").status_code == 422
    assert browser.get(f"/documents/{ids['geo.jpg']}/comic/1").status_code == 404
