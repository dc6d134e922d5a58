"""The preview of the document page, chosen in one place: what kind of preview a document gets
(an image, PDF pages, rendered Markdown, a player, an e-mail, an archive's tree, slides, a
comic's pages, or its paged text) and what that preview shows. The page's template dispatches
on `Preview.kind`; the routes only read the request."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from webapp.previews.photo import Fact, other_fields, photo_facts
from webapp.services import documents, files, members, previews, ui_support

SLIDE_HEADING = re.compile(r"^Slide (\d+)$")  # how the PPTX extractor opens each slide's text
NOTES_HEADING = "Notes:"


class Kind(StrEnum):
    """How the document page shows a document."""

    IMAGE = "image"
    PDF = "pdf"
    MARKDOWN = "markdown"
    MEDIA = "media"
    EMAIL = "email"
    ARCHIVE = "archive"
    TEXT = "text"
    SLIDES = "slides"
    PAGES = "pages"


# kinds whose text `?view=text` asks for instead
HAS_TEXT_VIEW = (Kind.IMAGE, Kind.PDF, Kind.MARKDOWN, Kind.EMAIL, Kind.SLIDES, Kind.PAGES)


@dataclass(frozen=True)
class Slide:
    """One slide of a presentation as an outline: its title, its lines, its speaker notes."""

    number: int
    title: str
    lines: list[str]
    notes: list[str]


@dataclass(frozen=True)
class Preview:
    """What the preview part of the document page shows; the fields of other kinds are empty."""

    kind: Kind
    text: dict | None = None  # a page of text (services.previews.text_page): text, e-mail, OCR
    pager: dict | None = None  # {"page", "pages"}: PDF pages, slides, a comic's pages
    markdown: dict | None = None  # {"html", "matches"}
    media_tag: str | None = None  # "audio" or "video"
    mimetype: str | None = None
    mail: dict | None = None
    members: dict | None = None  # what an archive or an e-mail holds (members.listing)
    has_picture: bool = False  # an image with something to show (a RAW file: its preview)
    hits: list[list[float]] = field(default_factory=list)  # boxes of q's words OCR read on a scan
    facts: list[Fact] = field(default_factory=list)  # a photo's compact table
    fields: list[Fact] = field(default_factory=list)  # ... and its other fields
    cover_url: str | None = None  # a book's cover
    slide: Slide | None = None
    pictures: list[int] = field(default_factory=list)  # the slide's pictures, by deck number


def kind_of(doc: dict, as_text: bool = False) -> Kind:
    """The preview kind of a document; `as_text` asks for its text where it has another."""
    kind = _natural_kind(doc)
    return Kind.TEXT if as_text and kind in HAS_TEXT_VIEW else kind


def _natural_kind(doc: dict) -> Kind:
    if previews.is_image(doc):
        return Kind.IMAGE
    if previews.page_count(doc) and doc["type"] == "pdf":
        return Kind.PDF
    meta = doc.get("metadata") or {}
    if doc["type"] == "markdown":
        return Kind.MARKDOWN
    if doc["type"] == "pptx" and _slides(doc):
        return Kind.SLIDES
    if doc["type"] == "comic" and (meta.get("page_count") or 0) > 0:
        return Kind.PAGES
    if files.media_mimetype(doc):
        return Kind.MEDIA
    if doc["type"] == "email":
        return Kind.EMAIL
    return Kind.TEXT


def build(doc: dict, q: str, page: int | None, as_text: bool, sibling_url: Callable[[str], str]) -> Preview:
    """The preview of `doc` for the search `q` at `page` (None: the first page with a match)."""
    kind = kind_of(doc, as_text)
    builder = _BUILDERS.get(kind)
    preview = builder(doc, q, page, sibling_url) if builder else None
    if preview is not None:
        return preview
    held = members.listing(doc)
    if held and not as_text:
        return Preview(Kind.ARCHIVE, members=held)
    return Preview(Kind.TEXT, text=_text(doc, q, page), cover_url=documents.thumbnail_url(doc["id"]))


def _text(doc: dict, q: str, page: int | None) -> dict:
    """The asked page of the document's text; without one, the first page holding a match."""
    if page is None:
        page = ui_support.first_match_page(doc, q)
    return previews.text_page(doc, q, max(1, page))


def _image(doc: dict, q: str, page: int | None, _url: Callable) -> Preview:
    meta = doc.get("metadata") or {}
    ocr_text = None
    if meta.get("ocr") and doc.get("content"):  # only what OCR read: the details are the table
        ocr_text = _text({**doc, "content": previews.ocr_text(doc)}, q, page)
    return Preview(
        Kind.IMAGE,
        text=ocr_text,
        has_picture=doc["type"] == "image" or documents.thumbnail_url(doc["id"]) is not None,
        hits=previews.ocr_hits(doc, q),
        facts=photo_facts(meta),
        fields=other_fields(meta),
    )


def _pdf(doc: dict, q: str, page: int | None, _url: Callable) -> Preview:
    pages = previews.page_count(doc)
    if page is None:
        page = previews.first_pdf_page(doc, q)
    return Preview(Kind.PDF, pager={"page": min(max(1, page), pages), "pages": pages})


def _markdown(doc: dict, q: str, page: int | None, sibling_url: Callable) -> Preview | None:
    rendered = previews.markdown_html(doc, q)
    if rendered is None:  # too long to render: its text
        return Preview(Kind.TEXT, text=_text(doc, q, page))
    rendered["html"] = ui_support.link_siblings(rendered["html"], doc, sibling_url)
    return Preview(Kind.MARKDOWN, markdown=rendered)


def _media(doc: dict, q: str, page: int | None, _url: Callable) -> Preview:
    mimetype = files.media_mimetype(doc) or ""
    return Preview(Kind.MEDIA, media_tag=mimetype.split("/")[0], mimetype=mimetype)


def _email(doc: dict, q: str, page: int | None, _url: Callable) -> Preview:
    mail = members.mail(doc)
    text = _text({**doc, "content": mail["body"]}, q, page)
    return Preview(Kind.EMAIL, text=text, mail=mail, members=members.listing(doc))


def _slides_preview(doc: dict, q: str, page: int | None, _url: Callable) -> Preview:
    slides = _slides(doc)
    if page is None:
        page = _first_slide_with(slides, q)
    number = min(max(1, page), len(slides))
    slide = _marked(slides[number - 1], q)
    pictures = previews.slide_pictures(doc, number)
    return Preview(Kind.SLIDES, pager={"page": number, "pages": len(slides)}, slide=slide, pictures=pictures)


def _comic(doc: dict, q: str, page: int | None, _url: Callable) -> Preview:
    pages = int((doc.get("metadata") or {}).get("page_count") or 0)
    return Preview(Kind.PAGES, pager={"page": min(max(1, page or 1), pages), "pages": pages})


_BUILDERS: dict[Kind, Callable[..., Preview | None]] = {
    Kind.IMAGE: _image,
    Kind.PDF: _pdf,
    Kind.MARKDOWN: _markdown,
    Kind.MEDIA: _media,
    Kind.EMAIL: _email,
    Kind.SLIDES: _slides_preview,
    Kind.PAGES: _comic,
}


def _slides(doc: dict) -> list[Slide]:
    """A presentation's slides from its extracted text (`Slide n`, its lines, `Notes:`)."""
    slides: list[Slide] = []
    lines: list[str] = []
    started = False
    for line in (doc.get("content") or "").splitlines():
        heading = SLIDE_HEADING.match(line.strip())
        if heading and int(heading.group(1)) == len(slides) + (2 if started else 1):
            if started:
                slides.append(_slide(len(slides) + 1, lines))
            started, lines = True, []
            continue
        lines.append(line)
    if started:
        slides.append(_slide(len(slides) + 1, lines))
    return slides


def _slide(number: int, lines: list[str]) -> Slide:
    body = [line for line in lines if line.strip()]
    notes: list[str] = []
    if NOTES_HEADING in body:
        at = body.index(NOTES_HEADING)
        body, notes = body[:at], body[at + 1 :]
    title = body[0] if body else ""
    return Slide(number, title, body[1:], notes)


def _first_slide_with(slides: list[Slide], q: str) -> int:
    """The first slide whose text holds a match of q (1 without one)."""
    for slide in slides:
        if "<em>" in previews.marked("\n".join([slide.title, *slide.lines, *slide.notes]), q):
            return slide.number
    return 1


def _marked(slide: Slide, q: str) -> Slide:
    """The slide with its text escaped for HTML and the matches of q in <em>."""
    mark = previews.marked
    return Slide(
        slide.number,
        mark(slide.title, q),
        [mark(line, q) for line in slide.lines],
        [mark(line, q) for line in slide.notes],
    )
