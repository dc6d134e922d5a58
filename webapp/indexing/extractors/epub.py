"""EPUB: OPF metadata (Dublin Core) and the text of the spine documents in reading order."""

from __future__ import annotations

import posixpath
import zipfile
from typing import Any

from webapp import imaging

from ._util import MAX_COVER_BYTES, clean_str, local_name, open_zip, parse_xml, read_member
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec

_DC_FIELDS = (
    "title",
    "creator",
    "language",
    "identifier",
    "publisher",
    "date",
    "description",
    "subject",
    "contributor",
    "rights",
)
_BLOCK_TAGS = {
    "p",
    "div",
    "br",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "tr",
    "section",
    "blockquote",
    "pre",
    "dt",
    "dd",
    "article",
    "header",
    "footer",
    "td",
    "th",
}
MAX_SPINE_ITEMS = 5000


def _opf_path(archive: zipfile.ZipFile) -> str:
    try:
        root = parse_xml(read_member(archive, "META-INF/container.xml"))
        for element in root.iter():
            if local_name(element.tag) == "rootfile" and element.get("full-path"):
                return element.get("full-path")
    except (KeyError, ExtractionError):
        pass
    for name in archive.namelist():
        if name.lower().endswith(".opf"):
            return name
    raise ExtractionError("Not a valid EPUB file")


def _opf_metadata(root: Any) -> dict[str, Any]:
    found: dict[str, list[str]] = {}
    for element in root.iter():
        name = local_name(element.tag)
        parent = element.getparent()
        if name in _DC_FIELDS and parent is not None and local_name(parent.tag) == "metadata":
            text = clean_str(" ".join((element.text or "").split()))
            if text and text not in found.get(name, []):
                found.setdefault(name, []).append(text)
    meta: dict[str, Any] = {}
    for name, values in found.items():
        key = "author" if name == "creator" else name
        meta[key] = values[0] if len(values) == 1 else values
    return meta


def _spine(root: Any, opf_path: str) -> list[str]:
    folder = posixpath.dirname(opf_path)
    manifest, order = {}, []
    for element in root.iter():
        name = local_name(element.tag)
        if name == "item" and element.get("id") and element.get("href"):
            href = element.get("href").split("#", 1)[0]
            manifest[element.get("id")] = posixpath.normpath(posixpath.join(folder, href))
        elif name == "itemref" and element.get("idref"):
            order.append(element.get("idref"))
    return [manifest[i] for i in order[:MAX_SPINE_ITEMS] if i in manifest]


def html_text(data: bytes) -> str:
    """Readable text of an (X)HTML document with block elements on their own lines."""
    from lxml import etree, html

    parser = etree.HTMLParser(no_network=True, huge_tree=False, remove_comments=True)
    try:
        root = html.document_fromstring(data, parser=parser)
    except (etree.ParserError, ValueError):
        return ""
    for bad in list(root.iter("script", "style", "head")):  # removing children ends iter()
        bad.text = None
        for child in list(bad):
            bad.remove(child)
    parts: list[str] = []
    for element in root.iter():
        if isinstance(element.tag, str) and element.tag in _BLOCK_TAGS:
            parts.append("\n")
        if element.text and isinstance(element.tag, str):
            parts.append(element.text)
        if element.tail:
            parts.append(element.tail)
    lines = (" ".join(line.split()) for line in "".join(parts).splitlines())
    return clean_str("\n".join(line for line in lines if line))


def extract_epub(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract an EPUB book."""
    with open_zip(path, "EPUB") as archive:
        opf_path = _opf_path(archive)
        try:
            opf = parse_xml(read_member(archive, opf_path))
        except KeyError as exc:
            raise ExtractionError("Not a valid EPUB file") from exc
        meta = _opf_metadata(opf)
        chapters, total = [], 0
        for item in _spine(opf, opf_path):
            try:
                text = html_text(read_member(archive, item))
            except KeyError:
                continue
            chapters.append(text)
            total += len(text)
            if total > settings.max_content_chars:
                break
    meta["chapter_count"] = len(chapters)
    title = meta.get("title")
    title = title[0] if isinstance(title, list) else title
    content = "\n\n".join(c for c in chapters if c)
    return Extracted(type="epub", content=content, title=title, metadata=meta)


def _cover_href(root: Any, opf_path: str) -> str | None:
    """The cover image's member name: EPUB 3 `cover-image`, EPUB 2 `<meta name="cover">`,
    else an image whose id or name says cover."""
    images: dict[str, str] = {}
    flagged = named = cover_id = None
    for element in root.iter():
        name = local_name(element.tag)
        if name == "meta" and element.get("name") == "cover":
            cover_id = element.get("content")
        elif name == "item" and (element.get("media-type") or "").startswith("image/"):
            href = posixpath.normpath(posixpath.join(posixpath.dirname(opf_path), element.get("href") or ""))
            images[element.get("id") or ""] = href
            if "cover-image" in (element.get("properties") or "").split():
                flagged = href
            elif named is None and "cover" in f"{element.get('id')} {href}".lower():
                named = href
    return flagged or images.get(cover_id or "") or named


def epub_cover(path: str, settings: ExtractionSettings) -> Any:
    """The book's cover image, or None when it declares none."""
    with open_zip(path, "EPUB") as archive:
        opf_path = _opf_path(archive)
        href = _cover_href(parse_xml(read_member(archive, opf_path)), opf_path)
        if href is None:
            return None
        return imaging.open_image(read_member(archive, href, MAX_COVER_BYTES))


EPUB = ExtractorSpec(
    type="epub",
    extract=extract_epub,
    extensions=("epub",),
    heavy_modules=("lxml.etree", "lxml.html"),
    thumbnail=epub_cover,
)
