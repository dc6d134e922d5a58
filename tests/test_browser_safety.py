# ruff: noqa: F811 - the fixtures are imported from test_browser
"""In a real browser (Playwright driving Debian's chromium, as tests/test_browser.py): a file's
raw bytes never run as a page, and text from files cannot reorder the page around it."""

from __future__ import annotations

import re

import pytest

from tests import samples
from tests.test_browser import (  # noqa: F401 - fixtures
    ADMIN,
    _add_scanned_source,
    _ensure_ready,
    browser,
    expect,
    login,
    page,
    site,
)

pytestmark = pytest.mark.browser
RLO, PDF_, RLI, PDI = "\u202e", "\u202c", "\u2067", "\u2069"


def _scripted_pdf() -> bytes:
    """A one-page PDF whose OpenAction runs JavaScript (`app.alert`), as Chromium's own viewer
    would run it."""
    import pymupdf

    doc = pymupdf.open(stream=samples.pdf(["the fulmar ledger of the harbour"]), filetype="pdf")
    action = doc.get_new_xref()
    doc.update_object(action, "<< /S /JavaScript /JS (app.alert\\('pwned'\\);) >>")
    doc.xref_set_key(doc.pdf_catalog(), "OpenAction", f"{action} 0 R")
    return doc.tobytes()


def _ids(page, q: str) -> dict[str, str]:
    token = page.request.post("/api/auth/login", data=ADMIN).json()["access_token"]
    found = page.request.post(
        "/api/search", headers={"Authorization": f"Bearer {token}"}, data={"q": q, "limit": 50}
    ).json()["results"]
    return {r["basename"]: r["id"] for r in found}


def test_a_pdf_opened_by_its_raw_address_runs_nothing(page, site):
    """The raw PDF's address leads to the document page (pdf.js, which runs
    no script of the file), never to the browser's own viewer (which ran the OpenAction's
    `app.alert`); the viewer and an image's preview still show."""
    _ensure_ready(page, site)
    folder = site["folder"].parent / "scripted"
    folder.mkdir(exist_ok=True)
    (folder / "fulmar.pdf").write_bytes(_scripted_pdf())
    (folder / "fulmar.png").write_bytes(samples.picture((64, 48), (200, 30, 30), "PNG"))
    _add_scanned_source(page, "Scripted", folder)
    login(page)
    ids = _ids(page, "source:scripted")
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))

    page.goto(f"/documents/{ids['fulmar.pdf']}/file")
    expect(page).to_have_url(re.compile(rf"/documents/{ids['fulmar.pdf']}$"))
    expect(page.locator(".pdf-slot[data-page='1'][data-drawn]")).to_be_visible()  # pdf.js draws it
    page.wait_for_timeout(2000)  # the browser's viewer ran the alert within a second
    assert dialogs == []

    page.goto(f"/documents/{ids['fulmar.png']}")
    image = page.locator("img[data-image-preview]")
    expect(image).to_be_visible()
    assert image.evaluate("img => img.complete && img.naturalWidth") > 0


def _left_of(page, text: str, first: str, second: str) -> bool:
    """Whether, in the text node holding `text`, the character `first` shows left of `second`."""
    return page.evaluate(
        """([text, first, second]) => {
            const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            let node;
            while ((node = walk.nextNode()) && !node.data.includes(text)) {}
            const at = (offset) => {
                const range = document.createRange();
                range.setStart(node, offset);
                range.setEnd(node, offset + 1);
                return range.getBoundingClientRect().left;
            };
            const base = node.data.indexOf(text);
            return at(base + text.indexOf(first)) < at(base + text.indexOf(second));
        }""",
        [text, first, second],
    )


def test_bidi_characters_in_names_and_text_cannot_reorder_the_page(page, site):
    """A file name holding an unclosed right-to-left override (U+202E) and a text holding one
    and an isolate: the badge after the name stays after it, the source's name, size and date
    stay in order, and the snippet reads in the order it was written."""
    _ensure_ready(page, site)
    folder = site["folder"].parent / "bidi"
    folder.mkdir(exist_ok=True)
    name = f"skua{RLO}exe.txt"
    (folder / name).write_text(f"The skua nests here. {RLO}gnol dna{PDF_} {RLI}isolated{PDI} words")
    token = page.request.post("/api/auth/login", data=ADMIN).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    made = page.request.post(
        "/api/sources", headers=headers, data={"id": "bidi", "name": f"Birds {RLO}", "root_path": str(folder)}
    )
    assert made.ok, made.text()
    page.request.post("/api/sources/bidi/reindex?wait=30", headers=headers)
    login(page)
    page.goto("/?q=skua")
    result = page.locator(".result").filter(has=page.locator(".result-link", has_text="skua"))
    expect(result).to_have_count(1)
    link, badge = result.locator(".result-link"), result.locator(".result-head .badge").first
    assert badge.bounding_box()["x"] >= link.bounding_box()["x"] + link.bounding_box()["width"] - 1
    facts = result.locator(".result-facts")
    source, size = facts.locator("bdi").first, facts.locator("span").first
    expect(source).to_have_text(f"Birds {RLO}")
    assert size.bounding_box()["x"] > source.bounding_box()["x"]  # read left to right, in order
    snippet = result.locator(".snippet")
    expect(snippet).to_contain_text("gnol dna")
    assert _left_of(page, "gnol dna", "g", "a")  # as written: no override left open in it
    for element in (link, snippet, result.locator(".result-path"), source):
        isolation = element.evaluate("el => getComputedStyle(el).unicodeBidi")
        assert isolation in ("isolate", "plaintext", "isolate-override"), isolation

    page.goto(f"/documents/{_ids(page, 'skua')[name]}")
    title = page.locator("h1")
    expect(title).to_have_text(name)
    assert title.evaluate("el => getComputedStyle(el).unicodeBidi") == "isolate"
    download = page.get_by_role("button", name=re.compile("Download"))
    assert download.locator("bdi").count() == 1
