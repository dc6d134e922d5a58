"""Small generated files of the tests: pictures, a PDF with known words, a book, a comic, a zip."""

from __future__ import annotations

import io
import zipfile

from PIL import Image


def archive(members: dict[str, bytes] | dict[str, str], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip file of these members (name: content), in the order given."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as out:
        for name, data in members.items():
            out.writestr(name, data)
    return buf.getvalue()


RED, GREEN, BLUE, MAGENTA = (220, 30, 30), (30, 200, 60), (30, 60, 220), (200, 30, 200)


def picture(size: tuple[int, int], color: tuple[int, int, int], fmt: str = "JPEG") -> bytes:
    """A solid picture."""
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return buf.getvalue()


def workbook(seed: int, words: list[str], rows: int = 1000) -> bytes:
    """An .xlsx of `rows` rows of numbers under a row of `words` (openpyxl reading every cell
    makes its extraction take tens of milliseconds: scans of these last long enough to watch)."""
    import random

    import openpyxl

    rng = random.Random(seed)
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append([*words, f"variant{seed}"])
    for row in range(rows):
        sheet.append([row, rng.randint(0, 9999), rng.randint(0, 99), rng.choice("abcdefgh")])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def pdf(pages: list[str]) -> bytes:
    """A PDF with one line of 20 pt text per page at (72, 100)."""
    import pymupdf

    doc = pymupdf.open()
    for text in pages:
        doc.new_page().insert_text((72, 100), text, fontsize=20)
    return doc.tobytes()


def epub(cover: bytes, text: str = "Chapter one of the book.") -> bytes:
    """An EPUB 3 whose manifest flags cover.png as its cover image."""
    opf = """<?xml version="1.0"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
 <metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>A Book</dc:title>
  <dc:identifier id="id">x</dc:identifier></metadata>
 <manifest><item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/>
  <item id="img" href="images/cover.png" media-type="image/png" properties="cover-image"/>
 </manifest><spine><itemref idref="c1"/></spine></package>"""
    container = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
 <rootfiles><rootfile full-path="OEBPS/content.opf"
   media-type="application/oebps-package+xml"/></rootfiles></container>"""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr("META-INF/container.xml", container)
        z.writestr("OEBPS/content.opf", opf)
        z.writestr("OEBPS/c1.xhtml", f"<html><body><p>{text}</p></body></html>")
        z.writestr("OEBPS/images/cover.png", cover)
    return buf.getvalue()


def cbz(pages: list[bytes]) -> bytes:
    """A comic archive whose pages are named so that natural order is not string order."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for n, page in enumerate(pages, start=1):
            z.writestr(f"page{n}.png", page)
        z.writestr("page10.png", picture((50, 50), (0, 0, 0), "PNG"))
    return buf.getvalue()


def main_color(data: bytes) -> tuple[int, int, int]:
    """The colour at the centre of an encoded picture."""
    img = Image.open(io.BytesIO(data)).convert("RGB")
    return img.getpixel((img.width // 2, img.height // 2))


def near(color: tuple[int, ...], expected: tuple[int, ...], tolerance: int = 40) -> bool:
    """Whether two colours are alike (lossy encoders shift them a little)."""
    return all(abs(a - b) <= tolerance for a, b in zip(color, expected, strict=False))
