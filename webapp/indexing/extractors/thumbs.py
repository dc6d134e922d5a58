"""Thumbnails made at index time, in the extraction child, right after a file is extracted.

Each format module that can show a picture (images, RAW files, PDFs, EPUB covers, comics)
names a function in its ExtractorSpec that returns a Pillow image, opened lazily so that only
its header is read before the pixel check; this module checks the size, scales and encodes.
The child's memory cap and the file's timeout cover the thumbnail too.
"""

from __future__ import annotations

import io
from typing import Any

from .base import ExtractionError, ExtractionSettings

THUMB_QUALITY = 80  # JPEG: encodes ~30x faster than WebP at this size, for similar bytes
MAX_COVER_BYTES = 32 * 1024 * 1024  # an archive member read as a cover image


def open_image(source: Any) -> Any:
    """A Pillow image (first frame) from a path or bytes; HEIC/HEIF through pillow-heif."""
    from PIL import Image

    _register_heif()
    img = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
    img.seek(0)  # first frame of an animation or of a multi-page TIFF
    return img


def _register_heif() -> None:
    try:
        from pillow_heif import register_heif_opener
    except ImportError:  # without the plug-in HEIC files just get no thumbnail
        return
    register_heif_opener()


def encode(img: Any, settings: ExtractionSettings) -> bytes:
    """Scale to settings.thumbnail_px on the long side and encode as JPEG (transparency on white).

    The decoded pixels are checked against settings.max_pixels first (after JPEG's reduced
    decoding), so a small file that declares a huge image is refused before it is decoded."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None  # our own check below replaces Pillow's warning-first one
    side = settings.thumbnail_px
    if img.format == "JPEG":
        img.draft("RGB", (side, side))  # decode at 1/2, 1/4 or 1/8 scale
    width, height = img.size
    if width * height > settings.max_pixels:
        raise ExtractionError(f"Image is too large for a thumbnail ({width}x{height})")
    img.thumbnail((side, side))
    if "A" in img.getbands() or "transparency" in img.info:
        rgba = img.convert("RGBA")
        img = Image.new("RGB", rgba.size, (255, 255, 255))
        img.paste(rgba, mask=rgba.getchannel("A"))
    out = io.BytesIO()
    img.convert("RGB").save(out, "JPEG", quality=THUMB_QUALITY)
    return out.getvalue()


def image_thumbnail(path: str, settings: ExtractionSettings) -> Any:
    """Thumbnail source of an image file: the image itself."""
    return open_image(path)
