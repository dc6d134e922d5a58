"""Shared types of the extraction layer: the normalized result, settings and extractor specs."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TEXT_LIKE_TYPES = frozenset({"text", "markdown", "code", "config", "subtitle"})


@dataclass
class Extracted:
    """The normalized result of extracting one file."""

    type: str
    content: str = ""
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    thumbnail: bytes | None = None  # JPEG bytes, made in the extraction child (thumbs.py)


class ExtractionError(Exception):
    """A file could not be extracted; str(error) is a short message for users."""


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
    thumbnail_px: int = 320
    max_pixels: int = 50_000_000

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
            "thumbnail_px": ("THUMBNAIL_PX", int),
            "max_pixels": ("PREVIEW_MAX_PIXELS", int),
        }
        values = {
            name: convert(cfg[key]) for name, (key, convert) in keys.items() if key in cfg
        }
        return cls(**values)

    def timeout_for(self, doc_type: str) -> float:
        """Seconds a file of this type may take to extract."""
        if doc_type == "pdf":
            return self.timeout_pdf
        if doc_type in TEXT_LIKE_TYPES:
            return self.timeout_text
        return self.timeout_default

    @property
    def max_file_size_bytes(self) -> int:
        """The file size limit in bytes."""
        return self.max_file_size_mb * 1024 * 1024


def _as_bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def extension(path: str) -> str:
    """The lower-case extension without its dot; '' for none and for a dotfile (`.bashrc`)."""
    stem = os.path.basename(path).lower().lstrip(".")
    return stem.rsplit(".", 1)[1] if "." in stem else ""


ExtractFunc = Callable[[str, ExtractionSettings], Extracted]
# the picture of a file as a lazily opened Pillow image (thumbs.encode scales it), or None
ThumbnailFunc = Callable[[str, ExtractionSettings], Any]


@dataclass(frozen=True)
class ExtractorSpec:
    """One registry entry: which files an extractor handles and how to call it."""

    type: str
    extract: ExtractFunc
    extensions: tuple[str, ...] = ()
    filenames: tuple[str, ...] = ()
    heavy_modules: tuple[str, ...] = ()
    thumbnail: ThumbnailFunc | None = None
