"""Extractor helpers: bounded reads, encoding detection, safe ZIP and XML, JSON-safe values."""

from __future__ import annotations

import codecs
import datetime as dt
import os
import re
import zipfile
from collections.abc import Iterable
from typing import Any

from .base import ExtractionError, ExtractionSettings

# Code pages tried after BOMs and strict UTF-8 (a restricted list: see docs/formats.md).
LEGACY_CODEPAGES = (
    "cp1252",
    "cp1250",
    "cp1251",
    "cp1253",
    "cp1254",
    "cp1255",
    "cp1256",
    "cp1257",
    "mac_cyrillic",
    "cp866",
    "koi8_r",
    "cp932",
    "euc_jp",
    "gb18030",
    "big5",
    "cp949",
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_XML_DECL = re.compile(rb"^\s*<\?xml[^>]*encoding\s*=\s*[\"']([A-Za-z0-9._-]+)[\"']")

MAX_COVER_BYTES = 32 * 1024 * 1024  # an archive member read as a cover image (EPUB, comics)
MAX_ZIP_TOTAL_BYTES = 512 * 1024 * 1024
MAX_ZIP_RATIO = 100
RATIO_CHECK_MIN_BYTES = 1024 * 1024
MAX_ZIP_MEMBERS = 100_000


def read_bytes(path: str, settings: ExtractionSettings) -> bytes:
    """Read a whole file, refusing files over the configured size limit."""
    data = _read_upto(path, settings.max_file_size_bytes + 1)
    if len(data) > settings.max_file_size_bytes:
        raise ExtractionError(f"File is larger than {settings.max_file_size_mb} MB")
    return data


def read_text_bytes(path: str, settings: ExtractionSettings) -> tuple[bytes, bool]:
    """Read enough bytes of a text file for max_content_chars; return (data, was_cut)."""
    budget = min(settings.max_file_size_bytes, settings.max_content_chars * 4 + 4)
    data = _read_upto(path, budget + 1)
    return data[:budget], len(data) > budget


def _read_upto(path: str, limit: int) -> bytes:
    """At most `limit` bytes of a file. A read of `limit` bytes would set aside that much memory
    first (megabytes for every small file): the file's size bounds the first read."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(min(size + 1, limit))
        if len(data) > size:  # it grew since: read on, up to the limit
            data += handle.read(limit - len(data))
    return data


def decode_text(data: bytes, declared: str | None = None) -> tuple[str, str]:
    """Decode bytes to text; return (text, encoding name)."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(name, errors="replace"), name + "-bom"
    for name in _candidates(data, declared):
        try:
            return data.decode(name), name
        except UnicodeDecodeError as exc:
            if name == "utf-8" and exc.start >= len(data) - 3 and "end of data" in exc.reason:
                return data[: exc.start].decode(name), name  # a character cut by a read limit
        except LookupError:
            continue
    if _looks_like_ebcdic(data):
        return data.decode("cp500", errors="replace"), "cp500"
    name = _guess_codepage(data)
    return data.decode(name, errors="replace"), name


def _candidates(data: bytes, declared: str | None) -> list[str]:
    names = [declared] if declared else []
    match = _XML_DECL.match(data[:200])
    if match:
        names.append(match.group(1).decode("ascii"))
    if _looks_like_utf16(data):
        names.append("utf-16-le" if data[1:2] == b"\0" else "utf-16-be")
    names.append("utf-8")
    return names


def _looks_like_utf16(data: bytes) -> bool:
    sample = data[:4096]
    if len(sample) < 4 or len(sample) % 2:
        return False
    even, odd = sample[0::2].count(0), sample[1::2].count(0)
    half = len(sample) // 2
    return max(even, odd) > half * 0.4 and min(even, odd) < half * 0.05


def _looks_like_ebcdic(data: bytes) -> bool:
    sample = data[:8192]
    if len(sample) < 32 or sample.count(b" ") > len(sample) / 100:
        return False
    if sample.count(b"@") < len(sample) / 20:  # 0x40 is the EBCDIC space
        return False
    text = sample.decode("cp500", errors="replace")
    plain = sum(ch.isascii() and (ch.isalnum() or ch in " .,;:-'\"()\n\r\t") for ch in text)
    return plain > len(text) * 0.9


def _guess_codepage(data: bytes) -> str:
    from charset_normalizer import from_bytes

    matches = from_bytes(data[:65536], cp_isolation=list(LEGACY_CODEPAGES))
    best = matches.best()
    if best is None:
        return "cp1252"
    for match in matches:
        # Short Western text is often equally plausible in several code pages: prefer cp1252.
        if match.encoding == "cp1252" and match.chaos <= best.chaos + 0.002:
            if match.coherence >= best.coherence - 0.1:
                return "cp1252"
    return best.encoding


def cap_content(content: str, settings: ExtractionSettings, metadata: dict[str, Any]) -> str:
    """Cut content at max_content_chars and record the cut in metadata."""
    limit = settings.max_content_chars
    if len(content) <= limit:
        return content
    if not metadata.get("truncated"):  # a read limit already hid the real length
        metadata["original_chars"] = len(content)
    metadata["truncated"] = True
    metadata["truncated_at_chars"] = limit
    return content[:limit]


def open_zip(path: str, label: str) -> zipfile.ZipFile:
    """Open a ZIP container after checking it is no decompression bomb."""
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ExtractionError(f"Not a valid {label} file") from exc
    try:
        check_zip(archive)
    except ExtractionError:
        archive.close()
        raise
    return archive


def check_zip(archive: zipfile.ZipFile) -> None:
    """Refuse archives whose declared sizes or ratios look like a decompression bomb."""
    infos = archive.infolist()
    if len(infos) > MAX_ZIP_MEMBERS:
        raise ExtractionError("Archive has too many entries")
    total = 0
    for info in infos:
        total += info.file_size
        big = info.file_size > RATIO_CHECK_MIN_BYTES
        if big and info.file_size > MAX_ZIP_RATIO * max(info.compress_size, 1):
            raise ExtractionError("Archive looks like a decompression bomb")
    if total > MAX_ZIP_TOTAL_BYTES:
        raise ExtractionError("Archive looks like a decompression bomb")


def read_member(archive: zipfile.ZipFile, name: str, limit: int = 64 * 1024 * 1024) -> bytes:
    """Read one archive member, at most `limit` bytes."""
    with archive.open(name) as member:
        data = member.read(limit + 1)
    if len(data) > limit:
        raise ExtractionError("Archive member is too large")
    return data


def parse_xml(data: bytes) -> Any:
    """Parse XML with no entity expansion, no network, no DTD loading; return the root."""
    from lxml import etree

    parser = etree.XMLParser(
        resolve_entities=False, no_network=True, huge_tree=False, load_dtd=False, recover=True
    )
    try:
        root = etree.fromstring(data, parser=parser)
    except etree.XMLSyntaxError as exc:
        raise ExtractionError("Invalid XML") from exc
    if root is None:
        raise ExtractionError("Invalid XML")
    return root


def local_name(tag: Any) -> str:
    """The tag name of an lxml element without its namespace."""
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1]


def json_safe(value: Any, depth: int = 0) -> Any:
    """Convert a value to something json.dumps accepts (strings for unknown types)."""
    if depth > 20:
        return str(value)
    if value is None or isinstance(value, bool | int | str):
        return clean_str(value) if isinstance(value, str) else value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return clean_str(value.decode("utf-8", errors="replace"))
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v, depth + 1) for v in value]
    return clean_str(str(value))


def clean_str(text: str) -> str:
    """Drop NULs and lone surrogates that break JSON encoders and search engines."""
    text = text.replace("\x00", "")
    if _SURROGATE.search(text):
        # Pair up surrogate halves (e.g. from RTF \u escapes), replace the unpaired ones.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def summary_lines(pairs: Iterable[tuple[str, Any]]) -> str:
    """Render `Key: value` lines for non-empty values (makes metadata searchable)."""
    lines = []
    for key, value in pairs:
        if value is None or value == "" or value == []:
            continue
        if isinstance(value, list | tuple):
            value = ", ".join(str(v) for v in value)
        lines.append(f"{key}: {value}")
    return "\n".join(lines)
