"""Shared OOXML (docx/xlsx/pptx) helpers: container checks, relationships, document properties."""

from __future__ import annotations

import io
import posixpath
import zipfile
from typing import Any

from ._util import clean_str, local_name, open_zip, parse_xml, read_member
from .base import ExtractionError, ExtractionSettings

_CFB_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_STREAM = "EncryptedPackage".encode("utf-16-le")
_CORE_FIELDS = {
    "title": "title",
    "subject": "subject",
    "creator": "author",
    "keywords": "keywords",
    "description": "description",
    "lastModifiedBy": "last_modified_by",
    "category": "category",
    "created": "created",
    "modified": "modified",
    "language": "language",
}


def open_package(path: str, label: str, settings: ExtractionSettings) -> zipfile.ZipFile:
    """Open an OOXML package; an encrypted (OLE2) one is decrypted in memory with the first
    password of EXTRACT_PASSWORDS_FILE that fits, or fails with a clear message."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head == _CFB_MAGIC:
        with open(path, "rb") as handle:
            data = handle.read(16 * 1024 * 1024)
        if _ENCRYPTED_STREAM in data:
            return open_zip(_decrypted(path, settings), label)
        raise ExtractionError(f"Not a valid {label} file (legacy binary Office format)")
    return open_zip(path, label)


def _decrypted(path: str, settings: ExtractionSettings) -> io.BytesIO:
    """The package inside an encrypted Office file (msoffcrypto-tool), or ExtractionError."""
    import msoffcrypto

    for password in settings.passwords():
        with open(path, "rb") as handle:
            try:
                office = msoffcrypto.OfficeFile(handle)
                office.load_key(password=password, verify_password=True)
                out = io.BytesIO()
                office.decrypt(out)
            except Exception:  # noqa: BLE001, S112 - a wrong password: try the next one
                continue
        if out.tell() > settings.max_file_size_bytes:
            break
        out.seek(0)
        return out
    raise ExtractionError("Document is password protected")


def read_xml(archive: zipfile.ZipFile, name: str) -> Any | None:
    """Parse one XML part, or None when the part is missing or unreadable."""
    try:
        data = read_member(archive, name)
    except KeyError:
        return None
    try:
        return parse_xml(data)
    except ExtractionError:
        return None


def relationships(archive: zipfile.ZipFile, part: str) -> dict[str, dict[str, str]]:
    """Map relationship id to {target (resolved part path or URL), type, mode} for a part."""
    folder, base = posixpath.split(part)
    root = read_xml(archive, posixpath.join(folder, "_rels", base + ".rels"))
    rels: dict[str, dict[str, str]] = {}
    if root is None:
        return rels
    for rel in root:
        target = rel.get("Target") or ""
        mode = rel.get("TargetMode") or ""
        if mode != "External":
            target = (
                target.lstrip("/")
                if target.startswith("/")
                else posixpath.normpath(posixpath.join(folder, target))
            )
        rels[rel.get("Id") or ""] = {
            "target": target,
            "type": (rel.get("Type") or "").rsplit("/", 1)[-1],
            "mode": mode,
        }
    return rels


def core_properties(archive: zipfile.ZipFile) -> dict[str, Any]:
    """Title, author, dates and friends from docProps/core.xml."""
    root = read_xml(archive, "docProps/core.xml")
    meta: dict[str, Any] = {}
    if root is None:
        return meta
    for element in root:
        key = _CORE_FIELDS.get(local_name(element.tag))
        text = clean_str(element.text or "").strip()
        if key and text:
            meta[key] = text
    return meta


def custom_properties(archive: zipfile.ZipFile) -> dict[str, str]:
    """User-defined document properties from docProps/custom.xml."""
    root = read_xml(archive, "docProps/custom.xml")
    props: dict[str, str] = {}
    if root is None:
        return props
    for prop in root:
        name = prop.get("name")
        values = [clean_str(v.text or "").strip() for v in prop]
        if name and values and values[0]:
            props[clean_str(name)] = values[0]
    return props


def app_properties(archive: zipfile.ZipFile) -> dict[str, Any]:
    """Application name and page/slide counts from docProps/app.xml."""
    root = read_xml(archive, "docProps/app.xml")
    wanted = {
        "Application": "application",
        "Pages": "pages",
        "Slides": "slides",
        "Company": "company",
        "Words": "words",
    }
    meta: dict[str, Any] = {}
    if root is None:
        return meta
    for element in root:
        key = wanted.get(local_name(element.tag))
        text = (element.text or "").strip()
        if key and text:
            meta[key] = int(text) if text.isdigit() else clean_str(text)
    return meta


def package_metadata(archive: zipfile.ZipFile) -> dict[str, Any]:
    """Core, app and custom properties merged into one metadata dict."""
    meta = app_properties(archive)
    meta.update(core_properties(archive))
    custom = custom_properties(archive)
    if custom:
        meta["custom_properties"] = custom
    return meta


def paragraph_text(paragraph: Any) -> str:
    """Text of a WordprocessingML/DrawingML paragraph with tabs and breaks kept."""
    parts = []
    for element in paragraph.iter():
        name = local_name(element.tag)
        if name == "t" and element.text:
            parts.append(element.text)
        elif name == "tab":
            parts.append("\t")
        elif name in ("br", "cr"):
            parts.append("\n")
    return clean_str("".join(parts))
