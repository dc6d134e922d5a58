"""Excel workbooks (.xlsx): every sheet's cell values (bounded), headers/footers, links."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ._util import clean_str, local_name
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec
from .ooxml import open_package, package_metadata, read_xml, relationships

MAX_ROWS_PER_SHEET = 20_000
MAX_COLUMNS = 200
_WORKBOOK = "xl/workbook.xml"
_DATE_FORMAT_IDS = {14, 15, 16, 17, 18, 19, 20, 21, 22, 45, 46, 47}
_HF_CODES = re.compile(r'&(?:"[^"]*"|\d+|[LCRPNDTZFAGKBISUEXYH])')
_COLUMN = re.compile(r"^([A-Z]+)")
# A number format's quoted text, escaped characters and [bracketed] parts (colour, condition,
# locale). A `[` never closed takes the rest of the code, read for the other two only (as the
# single regex did): else from every later `[` the regex read to the end again (quadratic:
# 5.8 s for a format code of 100,000 `[`).
_FORMAT_LITERALS = re.compile(r'"[^"]*"|\[[^\]]*+(\]?)|\\.')
_FORMAT_QUOTED = re.compile(r'"[^"]*"|\\.')


def _format_skeleton(code: str) -> str:
    """A number format code without its literal parts: what tells a date format apart."""

    def drop(match: re.Match) -> str:
        if match.group(1) == "":  # a `[` with no `]` after it stays, and so does what follows
            return "[" + _FORMAT_QUOTED.sub("", match.group()[1:])
        return ""

    return _FORMAT_LITERALS.sub(drop, code)


def _shared_strings(archive: Any) -> list[str]:
    root = read_xml(archive, "xl/sharedStrings.xml")
    if root is None:
        return []
    return [_rich_text(si) for si in root if local_name(si.tag) == "si"]


def _rich_text(element: Any) -> str:
    """Concatenate <t> runs, skipping phonetic (furigana) runs."""
    parts = []
    for node in element.iter():
        if local_name(node.tag) == "t" and node.text:
            parent = node.getparent()
            if parent is None or local_name(parent.tag) != "rPh":
                parts.append(node.text)
    return clean_str("".join(parts))


def _date_styles(archive: Any) -> set[int]:
    """Indexes of cell styles whose number format shows a date or time."""
    root = read_xml(archive, "xl/styles.xml")
    if root is None:
        return set()
    custom = {}
    for element in root.iter():
        if local_name(element.tag) == "numFmt":
            code = _format_skeleton((element.get("formatCode") or "").lower())
            custom[int(element.get("numFmtId") or -1)] = any(ch in code for ch in "dyh") or (
                "m" in code and "0" not in code
            )
    styles: set[int] = set()
    for element in root.iter():
        if local_name(element.tag) == "cellXfs":
            for index, xf in enumerate(x for x in element if local_name(x.tag) == "xf"):
                fmt = int(xf.get("numFmtId") or 0)
                if fmt in _DATE_FORMAT_IDS or custom.get(fmt):
                    styles.add(index)
    return styles


class _Workbook:
    """Lookup tables needed to render cell values."""

    def __init__(self, archive: Any) -> None:
        root = read_xml(archive, _WORKBOOK)
        if root is None:
            raise ExtractionError("Not a valid XLSX file")
        self.root = root
        self.strings = _shared_strings(archive)
        self.date_styles = _date_styles(archive)
        self.epoch = dt.datetime(1899, 12, 30)
        for element in root.iter():
            if local_name(element.tag) == "workbookPr" and element.get("date1904") in ("1", "true"):
                self.epoch = dt.datetime(1904, 1, 1)

    def sheets(self, archive: Any) -> list[tuple[str, str]]:
        """(sheet name, part path) in workbook order."""
        rels = relationships(archive, _WORKBOOK)
        found = []
        for element in self.root.iter():
            if local_name(element.tag) == "sheet":
                rid = next((v for k, v in element.attrib.items() if k.endswith("}id")), "")
                rel = rels.get(rid)
                if rel and rel["mode"] != "External":
                    found.append((clean_str(element.get("name") or ""), rel["target"]))
        return found

    def value(self, cell: Any) -> str:
        """Render one <c> element as text."""
        kind = cell.get("t") or "n"
        raw, formula = None, None
        for child in cell:
            name = local_name(child.tag)
            if name == "v":
                raw = child.text
            elif name == "f":
                formula = child.text
            elif name == "is":
                return _rich_text(child)
        if raw is None:
            return "=" + formula if formula else ""
        if kind == "s":
            index = int(raw) if raw.strip().isdigit() else -1
            return self.strings[index] if 0 <= index < len(self.strings) else ""
        if kind == "b":
            return "TRUE" if raw.strip() == "1" else "FALSE"
        if kind == "n":
            return self._number(raw, int(cell.get("s") or 0))
        return clean_str(raw)

    def _number(self, raw: str, style: int) -> str:
        try:
            number = float(raw)
        except ValueError:
            return clean_str(raw)
        if style in self.date_styles and 0 <= number < 2_958_466:
            moment = self.epoch + dt.timedelta(days=number)
            return moment.date().isoformat() if number == int(number) else moment.isoformat()
        return str(int(number)) if number.is_integer() and abs(number) < 1e15 else raw


def _column_index(ref: str | None) -> int:
    match = _COLUMN.match(ref or "")
    if not match:
        return 0
    index = 0
    for letter in match.group(1):
        index = index * 26 + ord(letter) - 64
    return index


def _sheet_rows(archive: Any, part: str, book: _Workbook) -> tuple[list[str], list[str], bool]:
    """Rows (tab-joined), header/footer texts, and whether a bound was hit."""
    root = read_xml(archive, part)
    if root is None:
        return [], [], False
    rows, extras, bounded = [], [], False
    for element in root.iter():
        name = local_name(element.tag)
        if name == "row":
            if len(rows) >= MAX_ROWS_PER_SHEET:
                bounded = True
                continue
            cells = []
            for cell in element:
                if _column_index(cell.get("r")) > MAX_COLUMNS:
                    bounded = True
                    continue
                cells.append(book.value(cell))
            if any(c.strip() for c in cells):
                rows.append("\t".join(c for c in cells))
        elif name in ("oddHeader", "oddFooter", "evenHeader", "evenFooter") and element.text:
            extras.append(" ".join(_HF_CODES.sub(" ", clean_str(element.text)).split()))
    return rows, extras, bounded


def _links(archive: Any, part: str) -> list[str]:
    return [
        r["target"]
        for r in relationships(archive, part).values()
        if r["type"] == "hyperlink" and r["mode"] == "External"
    ]


def extract_xlsx(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract a .xlsx workbook."""
    with open_package(path, "XLSX", settings) as archive:
        book = _Workbook(archive)
        sections, names, bounded_sheets = [], [], []
        for name, part in book.sheets(archive):
            rows, extras, bounded = _sheet_rows(archive, part, book)
            names.append(name)
            if bounded:
                bounded_sheets.append(name)
            block = [f"Sheet: {name}"] + extras + rows + _links(archive, part)
            sections.append("\n".join(block))
        meta = package_metadata(archive)
    meta.update(sheet_names=names, sheet_count=len(names))
    if bounded_sheets:
        meta["truncated_sheets"] = bounded_sheets
        meta["max_rows_per_sheet"] = MAX_ROWS_PER_SHEET
        meta["max_columns"] = MAX_COLUMNS
    content = "\n\n".join(sections)
    return Extracted(type="xlsx", content=content, title=meta.get("title"), metadata=meta)


XLSX = ExtractorSpec(
    type="xlsx",
    extract=extract_xlsx,
    extensions=("xlsx", "xlsm", "xltx", "xltm"),
    heavy_modules=("lxml.etree",),
)
