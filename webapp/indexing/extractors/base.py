"""Shared types of the extraction layer: the normalized result, settings and extractor specs."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

TEXT_LIKE_TYPES = frozenset({"text", "markdown", "code", "config", "subtitle"})
CONTAINER_TYPES = frozenset({"archive", "email"})  # their timeout covers unpacking the members


@dataclass
class Extracted:
    """The normalized result of extracting one file."""

    type: str
    content: str = ""
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    thumbnail: bytes | None = None  # JPEG bytes, made in the extraction child (extractors.thumbnail)
    holds_text: bool | None = None  # a picture's text test (ocr.holds_text); None: not tested


class ExtractionError(Exception):
    """A file could not be extracted; str(error) is a short message for users."""


class ContainerBomb(ExtractionError):
    """An archive passed a bomb limit or holds a member that could escape: it fails whole."""


BOMB_MESSAGE = "Archive looks like a decompression bomb"
PASSWORD_MESSAGE = "Archive is password protected"


@dataclass
class Member:
    """One member of a container as the extraction child reports it.

    `name` is its path inside the container; `spooled` the file its bytes were written to
    (None when nothing needed them); `error` why it could not be read (an encrypted member).
    """

    name: str
    size: int
    mtime: int | None = None
    spooled: str | None = None
    error: str | None = None


# Offered every member of a container: returns a file to write its bytes to, or None.
Sink = Callable[[Member], "IO[bytes] | None"]
MAILBOX_EXTENSIONS = ("mbox", "mbx")  # their tree's member budget is MAILBOX_MAX_MEMBERS


def is_mailbox(path: str) -> bool:
    """Whether the file is a mailbox (by its name, as the registry matches it)."""
    return path.lower().rsplit(".", 1)[-1] in MAILBOX_EXTENSIONS


@dataclass
class Budget:
    """What the whole tree of one file (a container, the containers inside it, theirs) may
    still hold: unpacked bytes (past them it is a bomb) and members (past them the tree is
    cut: `cut` is set and the rest is left out)."""

    bytes: int
    members: int
    cut: bool = False

    @classmethod
    def start(cls, settings: ExtractionSettings, path: str) -> Budget:
        """The budget of the file at `path`: a mailbox's is MAILBOX_MAX_MEMBERS."""
        return cls(
            settings.archive_max_total_bytes,
            settings.mailbox_max_members if is_mailbox(path) else settings.archive_max_members,
        )

    def take(self) -> bool:
        """Spend one member; False (and `cut`) when none is left."""
        if self.members <= 0:
            self.cut = True
            return False
        self.members -= 1
        return True


@dataclass(frozen=True)
class ExtractionSettings:
    """Limits and switches of the extraction layer (built from the app config)."""

    max_content_chars: int = 5_000_000
    max_file_size_mb: int = 100
    timeout_pdf: float = 30
    timeout_text: float = 5
    timeout_default: float = 30
    memory_mb: int = 1024
    index_gps: bool = False
    timeout_archive: float = 120
    archive_max_members: int = 10_000
    mailbox_max_members: int = 50_000
    archive_max_total_mb: int = 2048
    passwords_file: str = ""  # never the passwords themselves: they stay out of reprs and logs
    spool_dir: str = field(default_factory=lambda: os.path.join(tempfile.gettempdir(), "trawl"))
    thumbnail_px: int = 320
    max_pixels: int = 50_000_000
    text_test: bool = True  # pictures are tested for text before they wait for OCR

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ExtractionSettings:
        """Build settings from a mapping with the upper-case config keys."""
        keys = {
            "max_content_chars": ("MAX_CONTENT_CHARS", int),
            "max_file_size_mb": ("MAX_FILE_SIZE_MB", int),
            "timeout_pdf": ("EXTRACT_TIMEOUT_PDF", float),
            "timeout_text": ("EXTRACT_TIMEOUT_TEXT", float),
            "timeout_default": ("EXTRACT_TIMEOUT_DEFAULT", float),
            "memory_mb": ("EXTRACT_MEMORY_MB", int),
            "index_gps": ("INDEX_GPS", _as_bool),
            "timeout_archive": ("EXTRACT_TIMEOUT_ARCHIVE", float),
            "archive_max_members": ("ARCHIVE_MAX_MEMBERS", int),
            "mailbox_max_members": ("MAILBOX_MAX_MEMBERS", int),
            "archive_max_total_mb": ("ARCHIVE_MAX_TOTAL_MB", int),
            "passwords_file": ("EXTRACT_PASSWORDS_FILE", str),
            "spool_dir": ("DATA_DIR", spool_dir),  # members are unpacked under DATA_DIR only
            "thumbnail_px": ("THUMBNAIL_PX", int),
            "max_pixels": ("PREVIEW_MAX_PIXELS", int),
            "text_test": ("OCR_TEXT_TEST", _as_bool),
        }
        values = {name: convert(cfg[key]) for name, (key, convert) in keys.items() if key in cfg}
        return cls(**values)

    def timeout_for(self, doc_type: str) -> float:
        """Seconds a file of this type may take to extract."""
        if doc_type == "pdf":
            return self.timeout_pdf
        if doc_type in TEXT_LIKE_TYPES:
            return self.timeout_text
        if doc_type in CONTAINER_TYPES:
            return self.timeout_archive
        return self.timeout_default

    @property
    def archive_max_total_bytes(self) -> int:
        """What one container, nested ones included, may declare unpacked."""
        return self.archive_max_total_mb * 1024 * 1024

    def passwords(self) -> tuple[str, ...]:
        """The passwords of EXTRACT_PASSWORDS_FILE (one a line), read when needed."""
        if not self.passwords_file:
            return ()
        try:
            with open(self.passwords_file, encoding="utf-8", errors="replace") as f:
                return tuple(line.rstrip("\r\n") for line in f if line.rstrip("\r\n"))
        except OSError:
            return ()

    @property
    def max_file_size_bytes(self) -> int:
        """The file size limit in bytes."""
        return self.max_file_size_mb * 1024 * 1024


def spool_dir(data_dir: str) -> str:
    """The folder containers are unpacked into while their members are extracted."""
    return os.path.join(data_dir, "tmp", "unpack")


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def extension(path: str) -> str:
    """The lower-case extension without its dot; '' for none and for a dotfile (`.bashrc`)."""
    stem = os.path.basename(path).lower().lstrip(".")
    return stem.rsplit(".", 1)[1] if "." in stem else ""


ExtractFunc = Callable[[str, ExtractionSettings], Extracted]
# A container's document and its members, wanted bytes handed to the sink; the int is the
# budget of unpacked bytes the container may still declare (shared with nested ones).
UnpackFunc = Callable[[str, ExtractionSettings, Sink, int], tuple[Extracted, list[Member]]]
# the picture of a file as a lazily opened Pillow image (webapp.imaging scales and encodes it), or None
ThumbnailFunc = Callable[[str, ExtractionSettings], Any]


@dataclass(frozen=True)
class ExtractorSpec:
    """One registry entry: which files an extractor handles and how to call it."""

    type: str
    extract: ExtractFunc
    extensions: tuple[str, ...] = ()
    filenames: tuple[str, ...] = ()
    heavy_modules: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()  # multi-dot endings matched before extensions (.tar.gz)
    unpack: UnpackFunc | None = None  # set for containers (archives, e-mail)
    thumbnail: ThumbnailFunc | None = None
