"""Camera RAW files: EXIF from the TIFF/RAF/CR3 containers, sizes via rawpy, preview location."""

from __future__ import annotations

import struct
from typing import Any

from webapp import imaging

from . import exif as exiflib
from ._util import read_bytes
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec, extension
from .image import TIFF_HEADERS, build_doc, find_tiff, load_exif

# Vendor TIFF variants whose magic number Pillow does not accept (RW2, ORF).
_TIFF_VARIANTS = (b"IIU\x00", b"IIRO", b"IIRS", b"MMOR")
_CR3_BOXES = (b"CMT1", b"CMT2", b"CMT4")


def _tiff_block(data: bytes) -> tuple[bytes | None, dict[str, Any]]:
    """The main TIFF-structured block of a RAW file and where its preview JPEG lives."""
    if data[:4] in TIFF_HEADERS:
        return data, {}
    if data[:4] in _TIFF_VARIANTS:
        magic = b"II*\x00" if data[:2] == b"II" else b"MM\x00*"
        return magic + data[4:], {}
    if data.startswith(b"FUJIFILMCCD-RAW"):
        offset, length = struct.unpack(">II", data[84:92])
        jpeg = data[offset : offset + length]
        preview = {"offset": offset, "length": length, "format": "jpeg", "source": "raf"}
        return find_tiff(jpeg), preview if jpeg[:2] == b"\xff\xd8" else {}
    return None, {}


def _cr3_blocks(data: bytes) -> list[bytes]:
    """TIFF blocks of the CMT boxes inside a Canon CR3 (ISO-BMFF) file."""
    blocks = []
    for box in _CR3_BOXES:
        index = data.find(box)
        if index >= 4:
            size = struct.unpack(">I", data[index - 4 : index])[0]
            payload = data[index + 4 : index - 4 + size]
            if payload[:4] in TIFF_HEADERS:
                blocks.append(payload)
    return blocks


def _preview_from_exif(exif: Any, size: int) -> dict[str, Any]:
    from PIL import ExifTags

    for ifd in (dict(exif.items()), _safe_ifd(exif, ExifTags.IFD.IFD1)):
        offset, length = ifd.get(0x201), ifd.get(0x202)
        if isinstance(offset, int) and isinstance(length, int) and 0 < offset + length <= size:
            return {"offset": offset, "length": length, "format": "jpeg", "source": "exif"}
    return {}


def _safe_ifd(exif: Any, ifd: Any) -> dict:
    try:
        return dict(exif.get_ifd(ifd).items())
    except Exception:  # broken IFD pointers
        return {}


def _rawpy_sizes(path: str) -> dict[str, Any]:
    """Sensor sizes from LibRaw; metadata-only files (no pixel data) simply return {}."""
    import rawpy

    try:
        with rawpy.imread(path) as raw:
            sizes = raw.sizes
            return {
                "width": sizes.width,
                "height": sizes.height,
                "raw_width": sizes.raw_width,
                "raw_height": sizes.raw_height,
            }
    except Exception:  # LibRaw errors: unsupported or data-stripped files
        return {}


def extract_raw(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract RAW metadata; files without pixel data still yield their EXIF."""
    data = read_bytes(path, settings)
    ext = extension(path).upper()
    meta: dict[str, Any] = {"format": ext}
    tags: dict[str, Any] = {}
    if data[4:8] == b"ftyp":
        blocks, preview = _cr3_blocks(data), {}
    else:
        block, preview = _tiff_block(data)
        blocks = [block] if block else []
    for block in blocks:
        try:
            exif = load_exif(block)
            for key, value in exiflib.exif_tags(exif, settings.index_gps).items():
                tags.setdefault(key, value)
            preview = preview or _preview_from_exif(exif, len(data))
        except Exception:  # corrupt IFDs: keep what was read so far
            meta["exif_error"] = "unreadable EXIF"
    if not blocks and not tags:
        raise ExtractionError(f"Not a valid {ext} file")
    meta.update(_rawpy_sizes(path))
    meta["has_pixel_data"] = "raw_width" in meta
    if preview:
        meta["preview"] = preview
    return build_doc("raw_image", meta, tags, settings)


def raw_thumbnail(path: str, settings: ExtractionSettings) -> Any:
    """The camera's embedded preview (JPEG or bitmap); None when the file has none (a RAW file
    is not developed at index time)."""
    return imaging.open_raw(path)


RAW_IMAGE = ExtractorSpec(
    type="raw_image",
    extract=extract_raw,
    extensions=(
        "cr2",
        "cr3",
        "crw",
        "nef",
        "nrw",
        "arw",
        "srf",
        "sr2",
        "dng",
        "orf",
        "rw2",
        "raf",
        "pef",
        "srw",
        "x3f",
        "3fr",
        "erf",
        "kdc",
        "mrw",
        "mos",
        "iiq",
        "rwl",
    ),
    heavy_modules=("rawpy", "PIL.Image"),
    thumbnail=raw_thumbnail,
)
