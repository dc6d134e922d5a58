"""The extractor registry: one explicit tuple of extractors, type detection and extraction."""

from __future__ import annotations

import importlib
import os
import tempfile
import warnings
from collections.abc import Iterable
from typing import IO

from webapp import imaging

from . import (
    archive,
    comic,
    docx,
    epub,
    mail,
    markdown,
    media,
    pdf,
    pptx,
    raw_image,
    rtf,
    subtitle,
    text,
    xlsx,
)
from ._util import cap_content, clean_str, json_safe
from .base import (
    Budget,
    ContainerBomb,
    Extracted,
    ExtractionError,
    ExtractionSettings,
    ExtractorSpec,
    Member,
    extension,
)
from .image import IMAGE

__all__ = [
    "EXTRACTORS",
    "ExtractionError",
    "ExtractionSettings",
    "Extracted",
    "ExtractorSpec",
    "detect_type",
    "extension",
    "extract",
    "find_extractor",
    "preload",
    "thumbnail",
    "DOC_TYPES",
    "Budget",
    "ContainerBomb",
    "Member",
    "unpack",
    "copy_member",
]

# Order matters only for extensions claimed twice (none today): first match wins.
EXTRACTORS: tuple[ExtractorSpec, ...] = (
    text.TEXT,
    markdown.MARKDOWN,
    text.CODE,
    text.CONFIG,
    pdf.PDF,
    docx.DOCX,
    xlsx.XLSX,
    pptx.PPTX,
    rtf.RTF,
    epub.EPUB,
    subtitle.SUBTITLE,
    comic.COMIC,
    IMAGE,
    raw_image.RAW_IMAGE,
    media.MEDIA,
    archive.ARCHIVE,
    mail.EMAIL,
    mail.OUTLOOK,
    mail.MBOX,
)
DOC_TYPES = tuple(dict.fromkeys(spec.type for spec in EXTRACTORS)) + ("file",)
FALLBACK_TYPE = "file"
# failures of access, not of content: the next scan tries such a file again (indexing/healing.py)
VANISHED_MESSAGE = "File no longer exists"
UNREADABLE_MESSAGE = "File is not readable"
CHANGED_MESSAGE = "File vanished or changed while it was read"
TIMEOUT_MESSAGE = "Extraction timed out after"  # + " N s"
THUMB_QUALITY = 80  # JPEG: encodes ~30x faster than WebP at this size, for similar bytes
_LABELS = {
    "pdf": "PDF",
    "docx": "DOCX",
    "xlsx": "XLSX",
    "pptx": "PPTX",
    "rtf": "RTF",
    "epub": "EPUB",
    "comic": "comic archive",
    "raw_image": "RAW image",
    "media": "media",
    "image": "image",
    "subtitle": "subtitle",
    "markdown": "markdown",
    "text": "text",
    "code": "source",
    "config": "configuration",
    "archive": "archive",
    "email": "e-mail",
}


def _name_keys(path: str) -> tuple[str, str]:
    """(lower-case basename, extension)."""
    return os.path.basename(path).lower(), extension(path)


def find_extractor(path: str, extra: Iterable[ExtractorSpec] = ()) -> ExtractorSpec | None:
    """The registry entry handling this path (by file name, then extension), or None."""
    name, ext = _name_keys(path)
    specs = (*extra, *EXTRACTORS)
    for spec in specs:
        if spec.suffixes and name.endswith(spec.suffixes):
            return spec
    for spec in specs:
        if name in spec.filenames or (ext and "." + ext in spec.filenames):
            return spec
    if ext:
        for spec in specs:
            if ext in spec.extensions:
                return spec
        return None
    for spec in specs:  # no extension: e.g. "project-coveragerc", "README"
        if any(name.endswith(f.lstrip(".")) for f in spec.filenames):
            return spec
    return None


def detect_type(path: str) -> str:
    """Document type by file name/extension; `file` when no extractor handles it."""
    spec = find_extractor(path)
    return spec.type if spec else FALLBACK_TYPE


def extract(path: str, settings: ExtractionSettings, extra: Iterable[ExtractorSpec] = ()) -> Extracted:
    """Extract one file in this process; raises ExtractionError with a short message."""
    spec = find_extractor(path, extra)
    if spec is None:
        return Extracted(type=FALLBACK_TYPE, metadata={})
    return _normalized(_guarded(spec, lambda: spec.extract(path, settings), path), settings)


def unpack(
    path: str, settings: ExtractionSettings, spool: str, budget: Budget
) -> tuple[Extracted, list[Member]]:
    """Extract a container in this process: its document, and its members, those an extractor
    handles (within MAX_FILE_SIZE_MB) written to files in `spool` (`Member.spooled`)."""
    spec = find_extractor(path)
    if spec is None or spec.unpack is None:
        raise ValueError(f"not a container: {path}")
    used: set[str] = set()

    def sink(member: Member):
        base = os.path.basename(member.name)
        if member.error or member.size > settings.max_file_size_bytes or find_extractor(base) is None:
            return None
        folder = spool  # made on first use; a member's name is kept (types go by name)
        if base in used:
            folder = os.path.join(spool, str(len(used)))
        used.add(base)
        os.makedirs(folder, exist_ok=True)
        member.spooled = os.path.join(folder, base)
        return open(member.spooled, "xb")

    doc, members = _guarded(spec, lambda: spec.unpack(path, settings, sink, budget), path)
    return _normalized(doc, settings), members


def copy_member(path: str, name: str, out: IO[bytes], settings: ExtractionSettings) -> bool:
    """Write one member of a container (`name` inside it, one level) to `out`; False when it
    holds no such member. Raises ExtractionError when it cannot be read."""
    spec = find_extractor(path)
    if spec is None or spec.unpack is None:
        return False
    found: list[Member] = []

    def sink(member: Member):
        if member.name != name or found or member.error:
            return None
        found.append(member)
        return _KeepOpen(out)

    _guarded(spec, lambda: spec.unpack(path, settings, sink, Budget.start(settings, path)), path)
    if found and found[0].error:
        raise ExtractionError(found[0].error)
    return bool(found)


def read_out(
    path: str, wanted: list[list[str]], folder: str, settings: ExtractionSettings
) -> dict[tuple[str, ...], str]:
    """Members of a container, at any depth, written to files in `folder` with one walk of
    each container on the way: `wanted` lists each member's names in each container, the
    outermost first (`a.zip!/b.eml!/scan.png`: `["b.eml", "scan.png"]`). Returns the file of
    each member read, by its names; one a container does not hold is left out. A container
    inside is read out to `folder` too (named like its member: its extractor goes by name)."""
    groups: dict[str, list[list[str]]] = {}  # a name at this level -> the names below it
    for names in wanted:
        if names:
            groups.setdefault(names[0], []).append(names[1:])
    files = _copy_members(path, set(groups), folder, settings)
    out: dict[tuple[str, ...], str] = {}
    for name, below in groups.items():
        if name not in files:
            continue
        if [] in below:
            out[(name,)] = files[name]
        deeper = [rest for rest in below if rest]
        if deeper:
            inner = read_out(files[name], deeper, folder, settings)
            out.update({(name, *names): file for names, file in inner.items()})
    return out


def _copy_members(path: str, names: set[str], folder: str, settings: ExtractionSettings) -> dict[str, str]:
    """The members `names` of one container written to files in `folder`, in one walk; one
    that could not be read whole (damaged, encrypted) is left out."""
    spec = find_extractor(path)
    if spec is None or spec.unpack is None:
        return {}
    got: dict[str, tuple[Member, str]] = {}

    def sink(member: Member):
        if member.name not in names or member.name in got or member.error:
            return None
        fd, file = tempfile.mkstemp(dir=folder, suffix="-" + os.path.basename(member.name)[-120:])
        got[member.name] = (member, file)
        return os.fdopen(fd, "wb")  # the reader closes it

    _guarded(spec, lambda: spec.unpack(path, settings, sink, Budget.start(settings, path)), path)
    return {name: file for name, (member, file) in got.items() if not member.error}


class _KeepOpen:
    """`out` as a sink's file: the reader closes what the sink gave, the caller keeps `out`."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw

    def write(self, data: bytes) -> int:
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()

    def close(self) -> None:
        self.raw.flush()

    def __enter__(self) -> _KeepOpen:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _identity(path: str) -> tuple[int, ...] | None:
    """What tells one state of a file from another: a rename away and back changes ctime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _guarded(spec: ExtractorSpec, call, path: str):
    """Run an extractor; every failure becomes an ExtractionError with a short message. A
    content failure ("Not a valid PDF file") of a file that vanished or changed during the
    read is recorded as CHANGED_MESSAGE instead: an access failure the next scan retries
    (indexing/healing.py), not a verdict on bytes that were never read whole."""
    label = _LABELS.get(spec.type, spec.type)
    before = _identity(path)
    try:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # libraries warn about every odd file
                return call()
        except ExtractionError:
            raise
        except MemoryError as exc:
            raise ExtractionError("File needs too much memory to extract") from exc
        except RecursionError as exc:
            raise ExtractionError(f"Not a valid {label} file (nested too deeply)") from exc
        except FileNotFoundError as exc:
            raise ExtractionError(VANISHED_MESSAGE) from exc
        except PermissionError as exc:
            raise ExtractionError(UNREADABLE_MESSAGE) from exc
        except Exception as exc:  # any library failure on a bad file is a failed file
            raise ExtractionError(f"Not a valid {label} file") from exc
    except ExtractionError as exc:
        if str(exc).startswith("Not a valid"):
            if before is None:  # gone before it was opened (after the scan saw it)
                raise ExtractionError(VANISHED_MESSAGE) from exc
            if _identity(path) != before:
                raise ExtractionError(CHANGED_MESSAGE) from exc
        raise


def thumbnail(
    path: str, doc: Extracted, settings: ExtractionSettings, extra: Iterable[ExtractorSpec] = ()
) -> bytes | None:
    """The JPEG thumbnail of an extracted file, or None: its format shows no picture, the file
    has none (a book without a cover) or it cannot be decoded within the limits. Never raises:
    a file without a thumbnail is still indexed."""
    spec = find_extractor(path, extra)
    if spec is None or spec.thumbnail is None or spec.type != doc.type or settings.thumbnail_px <= 0:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            img = spec.thumbnail(path, settings)
            if img is None:
                return None
            img = imaging.scale(img, settings.thumbnail_px, settings.max_pixels)
            return imaging.encode(img, THUMB_QUALITY)[0]
    except Exception:  # noqa: BLE001 - any decoder failure (or MemoryError): no thumbnail
        return None


def _normalized(doc: Extracted, settings: ExtractionSettings) -> Extracted:
    """Enforce the result contract: clean capped text and JSON-safe metadata."""
    metadata = json_safe(doc.metadata or {})
    content = cap_content(clean_str(doc.content or ""), settings, metadata)
    title = clean_str(doc.title).strip() or None if isinstance(doc.title, str) else None
    return Extracted(type=doc.type, content=content, title=title, metadata=metadata)


def preload() -> list[str]:
    """Import every extractor's heavy libraries (call before forking workers)."""
    loaded = []
    for spec in EXTRACTORS:
        for module in spec.heavy_modules:
            try:
                importlib.import_module(module)
            except ImportError:
                continue
            loaded.append(module)
    return loaded
