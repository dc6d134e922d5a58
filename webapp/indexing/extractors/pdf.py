"""PDF via pymupdf: text of all pages, page count, document and XMP metadata."""

from __future__ import annotations

from typing import Any

from ._util import clean_str, local_name, parse_xml, summary_lines
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec

_INFO_KEYS = ("title", "author", "subject", "keywords", "creator", "producer")
_DATE_KEYS = {"creationDate": "created", "modDate": "modified"}
_XMP_FIELDS = {"title": "title", "creator": "author", "description": "subject"}


def _open(path: str, settings: ExtractionSettings) -> Any:
    import pymupdf

    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as exc:  # pymupdf raises several types for broken files
        raise ExtractionError("Not a valid PDF file") from exc
    if doc.needs_pass and not any(doc.authenticate(p) for p in ("", *settings.passwords())):
        doc.close()
        raise ExtractionError("PDF is password protected")
    return doc


def _pdf_date(value: str) -> str | None:
    digits = value[2:] if value.startswith("D:") else value
    if len(digits) < 8 or not digits[:8].isdigit():
        return None
    date = f"{digits[0:4]}-{digits[4:6]}-{digits[6:8]}"
    if len(digits) >= 14 and digits[8:14].isdigit():
        date += f"T{digits[8:10]}:{digits[10:12]}:{digits[12:14]}"
    return date


def _info_metadata(doc: Any) -> dict[str, Any]:
    info = doc.metadata or {}
    meta: dict[str, Any] = {}
    for key in _INFO_KEYS:
        value = clean_str(info.get(key) or "").strip()
        if value:
            meta[key] = value
    for key, name in _DATE_KEYS.items():
        date = _pdf_date(info.get(key) or "")
        if date:
            meta[name] = date
    if info.get("format"):
        meta["pdf_version"] = info["format"]
    if info.get("encryption"):
        meta["encryption"] = info["encryption"]
    return meta


def _xmp_metadata(doc: Any) -> dict[str, Any]:
    """Dublin Core fields from the XMP packet (title, creators, description)."""
    try:
        xref = doc.xref_xml_metadata()
        raw = doc.xref_stream(xref) if xref else None
    except Exception:
        return {}
    if not raw:
        return {}
    try:
        root = parse_xml(raw.strip(b"\x00 \r\n\t"))
    except ExtractionError:
        return {}
    found: dict[str, list[str]] = {}
    for element in root.iter():
        name = local_name(element.tag)
        if name in _XMP_FIELDS:
            values = [clean_str(li.text).strip() for li in element.iter() if li.text]
            values = [v for v in values if v]
            if values:
                found.setdefault(_XMP_FIELDS[name], values)
    return {k: v[0] if len(v) == 1 else v for k, v in found.items()}


def _page_texts(doc: Any, settings: ExtractionSettings) -> tuple[list[str], int]:
    texts, total, image_pages = [], 0, 0
    for page in doc:
        text = page.get_text("text") or ""
        if not text.strip() and page.get_images(full=False):
            image_pages += 1
        texts.append(text)
        total += len(text)
        if total > settings.max_content_chars:
            break
    return texts, image_pages


def extract_pdf(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract a PDF; password-protected files fail with a clear message."""
    doc = _open(path, settings)
    try:
        meta = _info_metadata(doc)
        for key, value in _xmp_metadata(doc).items():
            if not meta.get(key):
                meta[key] = value
        meta["page_count"] = doc.page_count
        texts, image_pages = _page_texts(doc, settings)
    finally:
        doc.close()
    body = clean_str("\n\n".join(t.strip() for t in texts if t.strip()))
    if not body.strip():
        meta["image_only"] = True
        meta["has_text_layer"] = False
    elif image_pages:
        meta["image_only_pages"] = image_pages
    header = summary_lines((k.capitalize(), meta.get(k)) for k in ("title", "author", "subject", "keywords"))
    content = (header + "\n\n" + body).strip() if header else body
    title = meta.get("title") if isinstance(meta.get("title"), str) else None
    return Extracted(type="pdf", content=content, title=title, metadata=meta)


def pdf_thumbnail(path: str, settings: ExtractionSettings) -> Any:
    """The first page, drawn at about the thumbnail's size."""
    import pymupdf
    from PIL import Image

    doc = _open(path, settings)
    try:
        if not doc.page_count:
            return None
        page = doc[0]
        zoom = settings.thumbnail_px / max(page.rect.width, page.rect.height, 1)
        pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    finally:
        doc.close()


PDF = ExtractorSpec(
    type="pdf",
    extract=extract_pdf,
    extensions=("pdf",),
    heavy_modules=("pymupdf",),
    thumbnail=pdf_thumbnail,
)
