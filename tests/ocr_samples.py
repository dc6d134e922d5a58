"""Clean scanned pages for the OCR tests and bench: words drawn with DejaVu Sans at 300 dpi,
saved as images or as image-only PDF pages (no text layer)."""

from __future__ import annotations

import io
import random
import shutil
from pathlib import Path

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  # Debian fonts-dejavu-core
VOCABULARY = (
    "harbour lantern meadow copper violet garden summit orchard timber falcon river marble "
    "canyon willow breeze pepper crystal autumn saddle beacon thunder cobalt granite fountain "
    "velvet harvest island compass anchor glacier parsley walnut saffron lagoon prairie "
    "boulder cricket dolphin emerald furnace gallery hammock juniper kettle ladder mustard "
    "nutmeg oyster pelican quarry rhubarb scarlet tundra umbrella vintage whistle yonder zephyr "
    "blanket chimney dungeon feather gravel hornet jasmine kitchen lizard mirror napkin pillow"
).split()
DPI = 300
WIDTH = 2480  # A4 width at 300 dpi
LINE_PX = 75
WORDS_PER_LINE = 7


def tesseract_installed() -> bool:
    """Whether the `tesseract` command is on PATH."""
    return shutil.which("tesseract") is not None


def page_words(seed: int, lines: int = 4) -> list[list[str]]:
    """Lines of words for one page (the same seed gives the same page)."""
    rnd = random.Random(seed)
    return [[rnd.choice(VOCABULARY) for _ in range(WORDS_PER_LINE)] for _ in range(lines)]


def page_image(lines: list[list[str]], size: int = 40):
    """A white 300-dpi page (Pillow image, grey) with the lines drawn in black."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(FONT, size)
    image = Image.new("L", (WIDTH, 200 + LINE_PX * len(lines)), 255)
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((180, 100 + n * LINE_PX), " ".join(line), font=font, fill=0)
    return image


def image_bytes(image, fmt: str, more: list | tuple = ()) -> bytes:
    """The page in an image format (PNG, JPEG, TIFF, WEBP), with its 300 dpi recorded; `more`
    pages make a multi-page TIFF."""
    buf = io.BytesIO()
    options = {"quality": 90} if fmt != "PNG" else {}
    if more:
        options.update(save_all=True, append_images=list(more))
    image.save(buf, format=fmt, dpi=(DPI, DPI), **options)
    return buf.getvalue()


def scanned_pdf(images, text_pages: tuple[str, ...] = ()) -> bytes:
    """A PDF of image-only pages (as a scanner makes), after any pages with a text layer."""
    import pymupdf

    doc = pymupdf.open()
    for text in text_pages:
        page = doc.new_page()
        page.insert_text((72, 72), text, fontsize=11)
    for image in images:
        png = image_bytes(image, "PNG")
        width, height = image.width * 72 / DPI, image.height * 72 / DPI
        page = doc.new_page(width=width, height=height)
        page.insert_image(page.rect, stream=png)
    return doc.tobytes()


def long_scanned_pdf(images, pages: int) -> bytes:
    """A scanned PDF of `pages` image-only pages drawing the given page images in turn (each
    image stored once, so a long scan stays a small file)."""
    import pymupdf

    doc = pymupdf.open(stream=scanned_pdf(images), filetype="pdf")
    xrefs = [page.get_images()[0][0] for page in doc]
    rect = doc[0].rect
    for n in range(len(xrefs), pages):
        doc.new_page(width=rect.width, height=rect.height).insert_image(rect, xref=xrefs[n % len(xrefs)])
    return doc.tobytes(garbage=0)


def write_pages(folder: Path, count: int, seed: int = 0) -> list[tuple[Path, list[str]]]:
    """`count` PNG pages in `folder` and their words (for the bench)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for n in range(count):
        lines = page_words(seed + n)
        path = folder / f"page-{n:03d}.png"
        path.write_bytes(image_bytes(page_image(lines), "PNG"))
        out.append((path, [w for line in lines for w in line]))
    return out
