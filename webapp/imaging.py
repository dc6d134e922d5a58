"""Pictures of files, one function per step: open (HEIF and camera RAW included), check the
pixel limit, scale, encode.

Two sandboxes decode pictures, each with its own process model and limits: the extraction
child makes the thumbnails at index time (`indexing/extractors`, ExtractionSettings) and the
preview child draws image previews for the web (`previews/render.py`, PreviewLimits). Both call
these functions, so a picture is opened, refused and scaled the same way in both. Images are
opened lazily (only the header is read) so the pixel check runs before any pixel is decoded.
Pillow, pillow-heif and rawpy are imported inside the functions: the web process imports this
module and never decodes a pixel itself.
"""

from __future__ import annotations

import io
from typing import Any

from webapp.exceptions import Unprocessable

ALPHA_MODES = ("RGBA", "LA", "P", "PA")  # kept as PNG when the caller keeps transparency


class ImageRefused(Unprocessable):
    """The picture cannot be shown within the limits; the message says why in a user's words."""


def register_heif() -> None:
    """Let Pillow open HEIC/HEIF (pillow-heif); without the plug-in those files just fail."""
    try:
        from pillow_heif import register_heif_opener
    except ImportError:
        return
    register_heif_opener()


def open_image(source: str | bytes) -> Any:
    """A Pillow image (first frame of an animation or multi-page TIFF) from a path or bytes,
    opened lazily: only its header is read."""
    from PIL import Image

    register_heif()
    img = Image.open(io.BytesIO(source) if isinstance(source, bytes) else source)
    img.seek(0)
    return img


def open_raw(path: str, develop_max_pixels: int | None = None) -> Any | None:
    """A camera RAW file's picture: its embedded preview (JPEG or bitmap). Without one, the
    sensor developed at half size when `develop_max_pixels` is given (checked before
    developing), else None. A file LibRaw cannot read raises ImageRefused."""
    import rawpy
    from PIL import Image

    try:
        with rawpy.imread(path) as raw:
            try:
                thumb = raw.extract_thumb()
            except (rawpy.LibRawNoThumbnailError, rawpy.LibRawUnsupportedThumbnailError):
                if develop_max_pixels is None:
                    return None
                # half_size demosaics a quarter of the sensor's pixels
                check_pixels((raw.sizes.width // 2, raw.sizes.height // 2), develop_max_pixels)
                return Image.fromarray(raw.postprocess(half_size=True))
    except (rawpy.LibRawError, OSError) as exc:
        raise ImageRefused(f"No preview image in this RAW file ({type(exc).__name__})") from exc
    if thumb.format == rawpy.ThumbFormat.JPEG:
        return open_image(bytes(thumb.data))
    return Image.fromarray(thumb.data)


def check_pixels(size: tuple[int, int], max_pixels: int) -> None:
    """Refuse a picture of more than `max_pixels` decoded pixels (a small file may declare a
    huge image: checked from the header, before decoding)."""
    width, height = size
    if width * height > max_pixels:
        raise ImageRefused(
            f"Image is too large to preview ({width}x{height} pixels; the limit is "
            f"{max_pixels / 1e6:g} megapixels)"
        )


def scale(img: Any, max_side: int, max_pixels: int) -> Any:
    """The picture scaled down to `max_side` on its long side; JPEG's reduced decoding (1/2,
    1/4 or 1/8) first, then the pixel check on what will actually be decoded."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None  # check_pixels replaces Pillow's warning-first check
    if img.format == "JPEG":
        img.draft("RGB", (max_side, max_side))
    check_pixels(img.size, max_pixels)
    img.thumbnail((max_side, max_side))
    return img


def encode(img: Any, quality: int, keep_alpha: bool = False) -> tuple[bytes, str]:
    """The bytes and mimetype of the picture: PNG when `keep_alpha` and it has transparency,
    else JPEG at `quality` with any transparency laid over white."""
    from PIL import Image

    out = io.BytesIO()
    if keep_alpha and img.mode in ALPHA_MODES:
        img.save(out, "PNG")
        return out.getvalue(), "image/png"
    if "A" in img.getbands() or "transparency" in img.info:
        rgba = img.convert("RGBA")
        img = Image.new("RGB", rgba.size, (255, 255, 255))
        img.paste(rgba, mask=rgba.getchannel("A"))
    img.convert("RGB").save(out, "JPEG", quality=quality)
    return out.getvalue(), "image/jpeg"
