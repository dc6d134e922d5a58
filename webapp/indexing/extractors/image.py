"""Images: dimensions, format, EXIF (with Exif sub-IFD), XMP, IPTC, PNG/GIF comments."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from webapp import imaging

from . import exif as exiflib
from ._util import clean_str
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec

TIFF_HEADERS = (b"II*\x00", b"MM\x00*")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_PNG_TEXT = 1024 * 1024
BMFF_SCAN_BYTES = 8 * 1024 * 1024


def find_tiff(data: bytes) -> bytes | None:
    """The TIFF block after the first `Exif\\0\\0` marker, if any."""
    start = 0
    while True:
        index = data.find(b"Exif\x00\x00", start)
        if index < 0:
            return None
        tiff = data[index + 6 :]
        if tiff[:4] in TIFF_HEADERS:
            return tiff
        start = index + 1


def load_exif(tiff: bytes) -> Any:
    """Parse a TIFF-structured EXIF block with Pillow."""
    from PIL import Image

    exif = Image.Exif()
    exif.load(b"Exif\x00\x00" + tiff)
    return exif


def _png_text(path: str) -> dict[str, Any]:
    """tEXt/zTXt/iTXt chunks of a PNG, read without decoding pixels (they may follow IDAT)."""
    fields: dict[str, Any] = {}
    with open(path, "rb") as handle:
        if handle.read(8) != PNG_MAGIC:
            return fields
        while True:
            head = handle.read(8)
            if len(head) < 8:
                break
            length, kind = struct.unpack(">I4s", head)
            if kind in (b"tEXt", b"zTXt", b"iTXt") and length <= MAX_PNG_TEXT:
                _png_chunk(kind, handle.read(length), fields)
                handle.seek(4, 1)
            else:
                handle.seek(length + 4, 1)
            if kind == b"IEND":
                break
    return fields


def _png_chunk(kind: bytes, data: bytes, fields: dict[str, Any]) -> None:
    key, _, rest = data.partition(b"\x00")
    try:
        if kind == b"tEXt":
            text = rest.decode("latin-1")
        elif kind == b"zTXt":
            text = zlib.decompressobj().decompress(rest[1:], MAX_PNG_TEXT).decode("latin-1")
        else:
            flag, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b"\x00")
            _tkey, _, rest = rest.partition(b"\x00")
            raw = zlib.decompressobj().decompress(rest, MAX_PNG_TEXT) if flag else rest
            text = raw.decode("utf-8", "replace")
    except (zlib.error, IndexError):
        return
    fields[clean_str(key.decode("latin-1"))] = clean_str(text)


def _open(path: str) -> Any:
    from PIL import Image, UnidentifiedImageError

    try:
        return Image.open(path)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise ExtractionError("Not a valid image file") from exc
    except Image.DecompressionBombError as exc:
        raise ExtractionError("Image dimensions are too large") from exc


def _pillow_info(image: Any, settings: ExtractionSettings) -> tuple[dict[str, Any], dict]:
    meta: dict[str, Any] = {
        "format": image.format,
        "width": image.width,
        "height": image.height,
        "mode": image.mode,
    }
    frames = getattr(image, "n_frames", 1)
    if frames and frames > 1:
        meta["frames"] = frames
    tags: dict[str, Any] = {}
    try:
        tags.update(exiflib.exif_tags(image.getexif(), settings.index_gps))
    except Exception:  # Pillow raises many types for corrupt EXIF; keep the rest
        meta["exif_error"] = "unreadable EXIF"
    comment = image.info.get("comment")
    if comment:
        tags["Comment"] = exiflib.tag_value("Comment", comment)
    xmp = image.info.get("xmp") or image.info.get("XML:com.adobe.xmp")
    for key, value in exiflib.xmp_fields(xmp, settings.index_gps).items():
        tags.setdefault(key, value)
    for key, value in exiflib.iptc_fields(image).items():
        tags.setdefault(key, value)
    return meta, tags


def _heif_info(path: str, settings: ExtractionSettings) -> tuple[dict[str, Any], dict]:
    """HEIF/AVIF metadata without a decoder: Exif item and 'ispe' sizes by scanning boxes."""
    with open(path, "rb") as handle:
        data = handle.read(BMFF_SCAN_BYTES)
    if data[4:8] != b"ftyp":
        raise ExtractionError("Not a valid image file")
    meta: dict[str, Any] = {"format": "HEIF"}
    sizes, start = [], 0
    while (index := data.find(b"ispe", start)) >= 0 and len(sizes) < 64:
        width, height = struct.unpack(">II", data[index + 8 : index + 16].ljust(8, b"\0"))
        sizes.append((width * height, width, height))
        start = index + 4
    if sizes:
        _, meta["width"], meta["height"] = max(sizes)
    tags: dict[str, Any] = {}
    tiff = find_tiff(data)
    if tiff:
        try:
            tags = exiflib.exif_tags(load_exif(tiff), settings.index_gps)
        except Exception:
            meta["exif_error"] = "unreadable EXIF"
    return meta, tags


def build_doc(doc_type: str, meta: dict, tags: dict, settings: ExtractionSettings) -> Extracted:
    """Assemble an image-like document whose content summarises its metadata."""
    head = [f"{k.capitalize()}: {meta[k]}" for k in ("format", "width", "height") if meta.get(k)]
    lines = head + exiflib.summary(tags)
    meta = dict(meta)
    if tags:
        meta["exif"] = tags
        for key, name in (
            ("Make", "camera_make"),
            ("Model", "camera_model"),
            ("LensModel", "lens"),
            ("DateTimeOriginal", "date_taken"),
        ):
            if key in tags:
                meta[name] = tags[key]
    content = "\n".join(lines)
    title = tags.get("XPTitle") or tags.get("title") or tags.get("ObjectName")
    title = title if isinstance(title, str) else None
    return Extracted(type=doc_type, content=content, title=title, metadata=meta)


def extract_image(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract image metadata (pixels are never decoded)."""
    if path.lower().endswith((".heic", ".heif", ".avif")):
        meta, tags = _heif_info(path, settings)
    else:
        with _open(path) as image:
            meta, tags = _pillow_info(image, settings)
        if meta.get("format") == "PNG":
            for key, value in _png_text(path).items():
                if key == "XML:com.adobe.xmp":
                    for name, field in exiflib.xmp_fields(value, settings.index_gps).items():
                        tags.setdefault(name, field)
                elif len(value) <= exiflib.MAX_TAG_TEXT:
                    tags.setdefault(key, value)
    return build_doc("image", meta, tags, settings)


def image_thumbnail(path: str, settings: ExtractionSettings) -> Any:
    """Thumbnail source of an image file: the image itself, opened lazily."""
    return imaging.open_image(path)


IMAGE = ExtractorSpec(
    type="image",
    extract=extract_image,
    extensions=(
        "jpg",
        "jpeg",
        "jpe",
        "jfif",
        "png",
        "gif",
        "webp",
        "tif",
        "tiff",
        "bmp",
        "dib",
        "heic",
        "heif",
        "avif",
        "ico",
        "tga",
        "ppm",
        "pgm",
        "pbm",
        "pcx",
        "jp2",
    ),
    heavy_modules=(
        "PIL.Image",
        "PIL.ExifTags",
        "PIL.IptcImagePlugin",
        "PIL.JpegImagePlugin",
        "PIL.PngImagePlugin",
        "PIL.TiffImagePlugin",
        "PIL.WebPImagePlugin",
        "PIL.GifImagePlugin",
    ),
    thumbnail=image_thumbnail,
)
