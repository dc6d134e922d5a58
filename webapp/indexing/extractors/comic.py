"""Comic archives (cbz, cbr): page list, ComicInfo.xml, CoMet.xml and ComicBookInfo metadata."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import zipfile
from typing import Any

from webapp import imaging

from ._util import (
    MAX_COVER_BYTES,
    check_zip,
    clean_str,
    json_safe,
    local_name,
    parse_xml,
    read_member,
    summary_lines,
)
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec
from .tool_output import BSDTAR, rar_member

IMAGE_EXTENSIONS = (
    ".jpg",
    ".jpeg",
    ".png",
    ".gif",
    ".webp",
    ".bmp",
    ".tif",
    ".tiff",
    ".avif",
    ".jxl",
    ".heic",
)
MAX_MEMBER_NAMES = 5000
MAX_XML_BYTES = 4 * 1024 * 1024
_NATURAL = re.compile(r"(\d+)")
_SUMMARY_KEYS = (
    "Title",
    "Series",
    "Number",
    "Volume",
    "Year",
    "Writer",
    "Penciller",
    "Artist",
    "Publisher",
    "Summary",
    "Genre",
    "Description",
    "Tags",
)


def _natural_key(name: str) -> list[Any]:
    return [int(p) if p.isdigit() else p.lower() for p in _NATURAL.split(name)]


def _is_junk(name: str) -> bool:
    base = posixpath.basename(name.rstrip("/"))
    return name.startswith("__MACOSX/") or base.startswith(".") or not base


def _xml_fields(data: bytes) -> dict[str, Any]:
    """Flat leaf fields of a ComicInfo.xml / CoMet.xml document."""
    root = parse_xml(data)
    fields: dict[str, Any] = {}
    for element in root.iter():
        if len(element) == 0 and element.text and element.text.strip():
            key = local_name(element.tag)
            key = key[:1].upper() + key[1:]
            value = clean_str(element.text.strip())
            if key in fields:
                old = fields[key]
                fields[key] = (old if isinstance(old, list) else [old]) + [value]
            else:
                fields[key] = value
    return fields


def _cbi_fields(comment: bytes | str | None) -> dict[str, Any]:
    """ComicBookInfo JSON stored in the archive comment."""
    if not comment:
        return {}
    text = comment.decode("utf-8", "replace") if isinstance(comment, bytes) else comment
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    info = data.get("ComicBookInfo/1.0") if isinstance(data, dict) else None
    if not isinstance(info, dict):
        return {}
    fields = {k[:1].upper() + k[1:]: v for k, v in info.items()}
    credits = info.get("credits")
    if isinstance(credits, list):
        fields["Credits"] = [f"{c.get('person')} ({c.get('role')})" for c in credits if isinstance(c, dict)]
    return json_safe(fields)


class _Archive:
    """Uniform view over ZIP and RAR archives."""

    def __init__(self, path: str) -> None:
        self.kind = "zip" if zipfile.is_zipfile(path) else "rar"
        if self.kind == "zip":
            self.handle: Any = zipfile.ZipFile(path)
            check_zip(self.handle)
            self.names = [i.filename for i in self.handle.infolist() if not i.is_dir()]
            self.comment: Any = self.handle.comment
        else:
            self.handle = _open_rar(path)
            self.names = [i.filename for i in self.handle.infolist() if not i.is_dir()]
            self.comment = self.handle.comment

    def read(self, name: str, limit: int = MAX_XML_BYTES) -> bytes | None:
        """A small member's bytes, or None when it cannot be read (e.g. no unrar tool)."""
        if self.kind == "zip":
            return read_member(self.handle, name, limit)
        import rarfile

        info = self.handle.getinfo(name)
        if info.file_size > limit:
            return None
        try:
            if shutil.which(BSDTAR) and not info.needs_password():
                with rar_member(self.handle.filename, name) as stream:
                    return stream.read(limit)
            return self.handle.read(name)
        except (rarfile.Error, OSError):
            return None


def _open_rar(path: str) -> Any:
    import rarfile

    try:
        return rarfile.RarFile(path)
    except rarfile.PasswordRequired as exc:
        raise ExtractionError("Archive is password protected") from exc
    except (rarfile.Error, OSError, EOFError) as exc:
        raise ExtractionError("Not a valid comic archive") from exc


def _metadata(archive: _Archive) -> tuple[dict[str, Any], list[str]]:
    meta: dict[str, Any] = {}
    notes: list[str] = []
    for name in archive.names:
        base = posixpath.basename(name).lower()
        if base not in ("comicinfo.xml", "comet.xml") or _is_junk(name):
            continue
        data = archive.read(name)
        if data is None:
            notes.append(f"{posixpath.basename(name)} could not be read")
            continue
        try:
            meta["comicinfo" if base == "comicinfo.xml" else "comet"] = _xml_fields(data)
        except ExtractionError:
            notes.append(f"{posixpath.basename(name)} is not valid XML")
    cbi = _cbi_fields(archive.comment)
    if cbi:
        meta["comicbookinfo"] = cbi
    return meta, notes


def _summary(meta: dict[str, Any]) -> str:
    blocks = []
    for source in ("comicinfo", "comet", "comicbookinfo"):
        fields = meta.get(source) or {}
        blocks.append(summary_lines((k, fields.get(k)) for k in _SUMMARY_KEYS))
        if source == "comicbookinfo":
            blocks.append(summary_lines([("Credits", fields.get("Credits"))]))
    return "\n".join(b for b in blocks if b)


def _title(meta: dict[str, Any]) -> str | None:
    for source in ("comicinfo", "comet", "comicbookinfo"):
        fields = meta.get(source) or {}
        title, series = fields.get("Title"), fields.get("Series")
        if isinstance(title, str) and title:
            return title
        if isinstance(series, str) and series:
            number = fields.get("Number") or fields.get("Issue")
            return f"{series} #{number}" if number else series
    return None


def _open_comic(path: str) -> _Archive:
    try:
        return _Archive(path)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:
        raise ExtractionError("Not a valid comic archive") from exc


def _names_and_pages(archive: _Archive) -> tuple[list[str], list[str]]:
    """The archive's file names (junk left out) and its pictures, both in natural order."""
    names = sorted((n for n in archive.names if not _is_junk(n)), key=_natural_key)
    return names, [n for n in names if n.lower().endswith(IMAGE_EXTENSIONS)]


def extract_comic(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract a comic archive (.cbz, .cbr; a .zip is an `archive`, archive.py)."""
    archive = _open_comic(path)
    with archive.handle:
        names, pages = _names_and_pages(archive)
        meta, notes = _metadata(archive)
    meta.update(archive_format=archive.kind, page_count=len(pages), file_count=len(names))
    if notes:
        meta["notes"] = notes
    listing = "\n".join(names[:MAX_MEMBER_NAMES])
    content = "\n\n".join(p for p in (_summary(meta), "Files:\n" + listing) if p)
    return Extracted(type="comic", content=content, title=_title(meta), metadata=meta)


def comic_cover(path: str, settings: ExtractionSettings) -> Any:
    """The first page (in natural order) of a comic archive; None when it has no page."""
    archive = _open_comic(path)
    with archive.handle:
        _, pages = _names_and_pages(archive)
        if not pages:
            return None
        data = archive.read(pages[0], MAX_COVER_BYTES)
    return imaging.open_image(data) if data else None


def comic_page(path: str, number: int) -> Any:
    """Page `number` (1-based, pages in natural order) of a comic archive as a lazily opened
    picture; ExtractionError when it has no such page or the page cannot be read."""
    archive = _open_comic(path)
    with archive.handle:
        _, pages = _names_and_pages(archive)
        if not 1 <= number <= len(pages):
            raise ExtractionError(f"This comic has no page {number} (it has {len(pages)})")
        data = archive.read(pages[number - 1], MAX_COVER_BYTES)
    if not data:
        raise ExtractionError("This page cannot be read out of the archive")
    return imaging.open_image(data)


COMIC = ExtractorSpec(
    type="comic",
    extract=extract_comic,
    extensions=("cbz", "cbr"),
    heavy_modules=("rarfile", "lxml.etree"),
    thumbnail=comic_cover,
)
