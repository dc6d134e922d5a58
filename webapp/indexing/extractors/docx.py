"""Word documents (.docx): body paragraphs and tables, headers, footers, notes, comments."""

from __future__ import annotations

from typing import Any

from ._util import local_name
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec
from .ooxml import open_package, package_metadata, paragraph_text, read_xml, relationships

_MAIN = "word/document.xml"
_EXTRA_PARTS = ("header", "footer", "footnotes", "endnotes", "comments")


def _block_lines(element: Any, out: list[str]) -> None:
    """Walk body content in order: paragraphs become lines, table rows tab-joined lines."""
    for child in element:
        name = local_name(child.tag)
        if name == "p":
            text = paragraph_text(child)
            if text.strip():
                out.append(text)
        elif name == "tbl":
            _table_lines(child, out)
        elif name not in ("sectPr", "del", "instrText"):
            _block_lines(child, out)


def _table_lines(table: Any, out: list[str]) -> None:
    for row in table.iter():
        if local_name(row.tag) != "tr":
            continue
        cells = []
        for cell in row:
            if local_name(cell.tag) == "tc":
                lines: list[str] = []
                _block_lines(cell, lines)
                cells.append(" ".join(lines))
        if any(c.strip() for c in cells):
            out.append("\t".join(cells))


def extract_docx(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract a .docx file."""
    with open_package(path, "DOCX", settings) as archive:
        root = read_xml(archive, _MAIN)
        if root is None:
            raise ExtractionError("Not a valid DOCX file")
        lines: list[str] = []
        _block_lines(root, lines)
        for rel in relationships(archive, _MAIN).values():
            if rel["type"] in _EXTRA_PARTS and rel["mode"] != "External":
                part = read_xml(archive, rel["target"])
                if part is not None:
                    _block_lines(part, lines)
        meta = package_metadata(archive)
    meta["paragraph_count"] = len(lines)
    content = "\n".join(lines)
    title = meta.get("title")
    return Extracted(type="docx", content=content, title=title, metadata=meta)


DOCX = ExtractorSpec(
    type="docx",
    extract=extract_docx,
    extensions=("docx", "docm", "dotx", "dotm"),
    heavy_modules=("lxml.etree",),
)
