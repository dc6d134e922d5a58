"""What the document page shows of a document: its text page by page, images and PDF pages
drawn in the preview child, Markdown rendered, with the matches of the search highlighted."""

from __future__ import annotations

import html
import json
import math
import re
import threading

from flask import current_app

from webapp.exceptions import QuerySyntaxError, Unavailable, Unprocessable
from webapp.indexing.ocr import OcrSettings
from webapp.indexing.ocr_phase import TextCache, file_digest
from webapp.previews.markdown import render_markdown
from webapp.previews.pdfhits import word_hits
from webapp.previews.render import IsolatedRenderer, PreviewLimits
from webapp.search.query import TermMatcher, parse_query
from webapp.search.snippets import highlight_all
from webapp.search.syntax import parse_syntax
from webapp.services.files import local_copy

_RENDERER = "trawl.previews"  # the app's renderer, in app.extensions
_making = threading.Lock()  # a web process's threads make one renderer (its slots are the cap)
PREVIEW_PAGE_CHARS = 20_000
OCR_SEPARATOR = "\n\n"  # between an image's details and the text OCR read (ocr_phase.PAGE_SEPARATOR)
IMAGE_TYPES = {"image", "raw_image"}
# a tag of the sanitizer's output: it always quotes attributes with " and escapes " inside them
_TAG = re.compile(r'(<(?:[^>"]|"[^"]*")*>)')
MATCH_OPEN = '<mark class="match">'


def get_previews() -> IsolatedRenderer:
    """The app's preview renderer (decodes in children of a fork server), made on first use:
    only web processes draw previews."""
    app = current_app._get_current_object()
    with _making:
        if _RENDERER not in app.extensions:
            app.extensions[_RENDERER] = IsolatedRenderer(app.config["PREVIEW_CONCURRENCY"])
        return app.extensions[_RENDERER]


def text_page(doc: dict, q: str, page: int) -> dict:
    """One page of the document's text, HTML-escaped, with the query's matches in <em>."""
    content = doc.get("content") or ""
    pages = max(1, math.ceil(len(content) / PREVIEW_PAGE_CHARS))
    page = min(page, pages)
    chunk = content[(page - 1) * PREVIEW_PAGE_CHARS : page * PREVIEW_PAGE_CHARS]
    body = highlight_all(chunk, _matcher(q))
    return {"html": body, "page": page, "pages": pages, "matches": body.count("<em>")}


def _free_text(q: str) -> str:
    """A search's free text (not -exclusions nor filter values)."""
    try:
        return parse_syntax(q).text
    except QuerySyntaxError:  # a half-typed term: mark the words as written
        return q


def _matcher(q: str) -> TermMatcher:
    """What to mark for a search's q: its free text."""
    text = _free_text(q)
    return TermMatcher.from_query(parse_query(text)) if text.strip() else TermMatcher(())


def image_preview(doc: dict) -> tuple[bytes, str]:
    """The image (or a RAW file's embedded preview) scaled to PREVIEW_MAX_PX, as JPEG or PNG.

    Decoded in a child process with pixel, memory and time bounds; an image that is too large,
    damaged or unreadable raises PreviewRefused (422), a full set of preview slots 503.
    """
    path, done = local_copy(doc)
    try:
        return get_previews().render(path, doc["type"], _limits())
    finally:
        done()


def comic_page_image(doc: dict, page: int) -> tuple[bytes, str]:
    """Page `page` of a comic archive, scaled like an image preview, drawn in the same capped
    child (422 for a page that does not exist or cannot be read)."""
    path, done = local_copy(doc)
    try:
        return get_previews().render(path, "comic", _limits(), page=page)
    finally:
        done()


def ocr_hits(doc: dict, q: str) -> list[list[float]]:
    """The boxes (fractions of the picture) of the words of q that OCR read on an image, from
    the OCR cache of its bytes (previews/pdfhits.word_hits matches them as on PDF pages);
    none without q, or when its words were read before boxes were kept."""
    matcher = _matcher(q)
    if not matcher.terms or not (doc.get("metadata") or {}).get("ocr"):
        return []
    path, done = local_copy(doc)
    try:
        digest = file_digest(path)
    except OSError:
        return []
    finally:
        done()
    languages = OcrSettings.from_config(current_app.config).languages
    cached = TextCache(current_app.config["DATA_DIR"], languages).get(digest) or {}
    words = (cached.get("words") or {}).get("0") or []  # the first page: the one shown
    return [[round(v, 4) for v in box] for box in word_hits(words, matcher)]


def slide_pictures(doc: dict, slide: int) -> list[int]:
    """The numbers (counted through the deck) of the pictures slide `slide` shows, read in the
    capped preview child; none when the deck cannot be read there."""
    path, done = local_copy(doc)
    try:
        data, _ = get_previews().render(path, "slide_pictures", _limits())
    except (Unprocessable, Unavailable):
        return []
    finally:
        done()
    counts = [len(names) for names in json.loads(data)]
    if not 1 <= slide <= len(counts):
        return []
    first = sum(counts[: slide - 1]) + 1
    return list(range(first, first + counts[slide - 1]))


def slide_picture_image(doc: dict, number: int) -> tuple[bytes, str]:
    """Picture `number` of a presentation (counted slide after slide), scaled like an image
    preview in the capped child (422 when there is no such picture or it cannot be drawn)."""
    path, done = local_copy(doc)
    try:
        return get_previews().render(path, "slide_picture", _limits(), page=number)
    finally:
        done()


def is_image(doc: dict) -> bool:
    """Whether the preview of this document is an image."""
    return doc["type"] in IMAGE_TYPES


def has_pdf_pages(doc: dict) -> bool:
    """Whether the document is a PDF whose pages can be drawn (its pages were counted)."""
    return doc["type"] == "pdf" and page_count(doc) > 0


def marked(text: str, q: str) -> str:
    """The text escaped for HTML, with the matches of q's free text in <em>."""
    return highlight_all(text, _matcher(q))


def ocr_text(doc: dict) -> str:
    """The text OCR read from an image: what follows the image's details in its content (the
    OCR phase adds it after them, PAGE_SEPARATOR between)."""
    content = doc.get("content") or ""
    if not (doc.get("metadata") or {}).get("ocr"):
        return ""
    details, _, read = content.partition(OCR_SEPARATOR)
    return read if read else details


# -- PDF pages, Markdown ------------------------------------------------------------------------


def page_count(doc: dict) -> int:
    """Pages of a PDF as counted at extraction (0 when unknown)."""
    count = (doc.get("metadata") or {}).get("page_count")
    return count if isinstance(count, int) and count > 0 else 0


def pdf_page_image(doc: dict, page: int, q: str) -> tuple[bytes, str]:
    """Page `page` of a PDF drawn as a JPEG with the matches of q highlighted (whole words the
    search's matcher accepts, as in the text preview); drawn in a capped child like image
    previews (422 for a page that does not exist or cannot be drawn)."""
    path, done = local_copy(doc)
    try:
        return get_previews().render(path, "pdf", _limits(), page=page, matcher=_matcher(q))
    finally:
        done()


def first_pdf_page(doc: dict, q: str) -> int:
    """The first page of a PDF holding a match of q (1 without q, or when the PDF cannot be
    read: the page's own image then says why)."""
    matcher = _matcher(q)
    if not matcher.terms or page_count(doc) <= 1:
        return 1
    path, done = local_copy(doc)
    try:
        return get_previews().first_pdf_page(path, matcher, _limits())
    except (Unprocessable, Unavailable):
        return 1
    finally:
        done()


def pdf_hits(doc: dict, q: str) -> dict:
    """For the PDF viewer: every page's size in points, and the pages holding a match of q
    with their hit boxes as fractions of the page (previews/pdfhits.py); read in a capped
    child (422 when the PDF cannot be read)."""
    path, done = local_copy(doc)
    try:
        return get_previews().pdf_hits(path, _matcher(q), _limits())
    finally:
        done()


def markdown_html(doc: dict, q: str) -> dict | None:
    """The document's Markdown rendered and sanitized, the matches of q in <mark class="match">
    (text between tags only); None when it is too long to render."""
    rendered = render_markdown(doc.get("content") or "")
    if rendered is None or not q.strip():
        return None if rendered is None else {"html": rendered, "matches": 0}
    matcher = _matcher(q)
    parts = _TAG.split(rendered)
    for i in range(0, len(parts), 2):  # even items are text (escaped by the sanitizer)
        if parts[i]:
            marked = highlight_all(html.unescape(parts[i]), matcher)
            parts[i] = marked.replace("<em>", MATCH_OPEN).replace("</em>", "</mark>")
    body = "".join(parts)
    return {"html": body, "matches": body.count(MATCH_OPEN)}


def _limits() -> PreviewLimits:
    cfg = current_app.config
    return PreviewLimits(
        max_side=cfg["PREVIEW_MAX_PX"],
        max_pixels=cfg["PREVIEW_MAX_PIXELS"],
        memory_mb=cfg["PREVIEW_MEMORY_MB"],
        timeout=cfg["PREVIEW_TIMEOUT"],
    )
