"""Rich Text Format: text via striprtf using the declared code page, \\info metadata."""

from __future__ import annotations

import re

from ._util import clean_str, read_bytes, summary_lines
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec

_CODEPAGE = re.compile(rb"\\ansicpg(\d{3,5})")
# `\s++` keeps its blanks: the value's `[^{}]*` matches blanks too, and gave every split of a
# run of them a try (quadratic: 0.5 s for 10,000 blanks after `{\title`, minutes for 200,000).
_INFO = re.compile(r"\{\\(title|author|subject|keywords|operator|company|doccomm)\s++([^{}]*)\}")
_INFO_NAMES = {"operator": "last_modified_by", "doccomm": "comments"}


def _codepage(data: bytes) -> str:
    match = _CODEPAGE.search(data[:4096])
    if match:
        name = "cp" + match.group(1).decode("ascii")
        try:
            "".encode(name)
            return name
        except LookupError:
            pass
    return "cp1252"


def extract_rtf(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract an RTF document."""
    from striprtf.striprtf import rtf_to_text

    data = read_bytes(path, settings)
    if not data.lstrip().startswith(b"{\\rtf"):
        raise ExtractionError("Not a valid RTF file")
    encoding = _codepage(data)
    raw = data.decode("latin-1")
    meta: dict = {"encoding": encoding}
    for key, value in _INFO.findall(raw[:200_000]):
        text = clean_str(rtf_to_text("{\\rtf1 " + value + "}", encoding=encoding, errors="replace")).strip()
        if text:
            meta[_INFO_NAMES.get(key, key)] = text
    body = clean_str(rtf_to_text(raw, encoding=encoding, errors="replace"))
    body = "\n".join(line.rstrip() for line in body.splitlines())
    header = summary_lines((k.capitalize(), meta.get(k)) for k in ("title", "author", "subject"))
    content = (header + "\n\n" + body).strip() if header else body.strip()
    return Extracted(type="rtf", content=content, title=meta.get("title"), metadata=meta)


RTF = ExtractorSpec(
    type="rtf",
    extract=extract_rtf,
    extensions=("rtf",),
    heavy_modules=("striprtf.striprtf",),
)
