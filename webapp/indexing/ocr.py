"""OCR with the `tesseract` command: which documents need it, whether it is there, and reading
the text of image pages (PDF pages without a text layer, images, the preview of RAW files).

The reading runs in an extraction child (indexing/isolation.py, given `ocr_specs` as its
extractors): every page goes to a `tesseract` process of its own with the per-page timeout, and
inherits the child's memory cap (RLIMIT_AS survives exec). The command, one thread per page
(`OMP_THREAD_LIMIT=1`), read pages faster here than pymupdf's built-in OCR: docs/performance.md.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webapp import imaging
from webapp.procs import die_with_parent

from .extractors import ExtractionSettings, ExtractorSpec
from .extractors.base import Extracted, ExtractionError
from .extractors.raw_image import extract_raw

TESSERACT = "tesseract"
IMAGE_EXTENSIONS = ("jpg", "jpeg", "jpe", "jfif", "png", "tif", "tiff", "webp")
RAW_EXTENSIONS = ("cr2", "cr3", "nef", "nrw", "arw", "dng", "orf", "rw2", "raf", "pef", "srw")
MIN_SIDE_PX = 32  # a smaller image holds no line of text
MAX_PAGE_PIXELS = 40_000_000  # pages above this are scaled down before OCR (memory, time)
PDF_DPI = 300
RENDER_SECONDS = 30  # to open a file and render one page, on top of Tesseract's time
# OpenMP threads of one tesseract spin against each other on a busy machine: 4x slower here
TESSERACT_ENV = {"OMP_THREAD_LIMIT": "1"}

OK, OFF, UNAVAILABLE = "ok", "off", "unavailable"  # components.ocr of GET /api/health
PENDING, DONE, FAILED = "pending", "done", "failed"  # IndexedFile.ocr


@dataclass(frozen=True)
class OcrSettings:
    """What OCR may do: its languages (`eng+deu`), page cap and per-page timeout."""

    enabled: str = "auto"
    languages: str = "eng"
    max_pages: int = 100
    timeout_page: float = 60.0
    command: str | None = None  # the tesseract found on PATH; None when there is none

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> OcrSettings:
        """Settings from the app config (OCR_*)."""
        langs = (
            "+".join(p for p in str(cfg["OCR_LANGUAGES"]).replace(",", "+").split("+") if p.strip()) or "eng"
        )
        return cls(
            str(cfg["OCR_ENABLED"]).strip().lower(),
            langs.replace(" ", ""),
            int(cfg["OCR_MAX_PAGES"]),
            float(cfg["OCR_TIMEOUT_PAGE"]),
            shutil.which(TESSERACT),
        )

    @property
    def file_timeout(self) -> float:
        """Seconds one document may take: every page at its limit, and time to render them."""
        return self.max_pages * (self.timeout_page + 2) + 30

    @property
    def call_timeout(self) -> float:
        """Seconds one page (opening the file, rendering the page, Tesseract) may take."""
        return self.timeout_page + RENDER_SECONDS


# -- is it there ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _installed_languages(binary: str | None) -> frozenset[str] | None:
    """Tesseract's languages, asked once per process (worker.py asks before forking workers)."""
    if binary is None:
        return None
    try:
        out = subprocess.run(
            [binary, "--list-langs"],
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, **TESSERACT_ENV},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return frozenset(line.strip() for line in out.stdout.splitlines()[1:] if line.strip())


def availability(settings: OcrSettings) -> tuple[str, str]:
    """(`ok` | `off` | `unavailable`, why) for these settings on this machine."""
    if settings.enabled in ("0", "false", "no", "off"):
        return OFF, "OCR is turned off (OCR_ENABLED)"
    langs = _installed_languages(settings.command)
    if langs is None:
        return UNAVAILABLE, (
            "Tesseract is not installed (apt-get install tesseract-ocr): "
            "scanned documents and images are found by name and metadata only"
        )
    missing = [lang for lang in settings.languages.split("+") if lang not in langs]
    if missing:
        return UNAVAILABLE, (
            f"Tesseract lacks the languages {', '.join(missing)} of "
            f"OCR_LANGUAGES (apt-get install "
            f"{' '.join('tesseract-ocr-' + m for m in missing)})"
        )
    return OK, "Tesseract is installed"


def ocr_type(path: str) -> str:
    """The document type OCR reads a file as (`pdf`, `raw_image` or `image`), by its name."""
    ext = path.rsplit(".", 1)[-1].lower()
    return "pdf" if ext == "pdf" else "raw_image" if ext in RAW_EXTENSIONS else "image"


def needs_ocr(doc_type: str, ext: str, metadata: Mapping[str, Any], holds_text: bool | None = None) -> bool:
    """Whether an extracted document has pages whose text only OCR can read; a picture the
    text test found no text in (`holds_text` False) is left alone."""
    if holds_text is False:
        return False
    if doc_type == "pdf":
        return bool(metadata.get("image_only") or metadata.get("image_only_pages"))
    if doc_type == "image":
        sides = (metadata.get("width") or 0, metadata.get("height") or 0)
        return ext in IMAGE_EXTENSIONS and min(sides) >= MIN_SIDE_PX
    if doc_type == "raw_image":
        return ext in RAW_EXTENSIONS and bool(metadata.get("preview"))
    return False


# -- does a picture hold text (in the extraction child) ------------------------------------------

TEXT_TEST_PX = 1024  # long side the text test looks at (JPEG decodes at 1/2..1/8 scale for it)
# A page, a receipt, a screenshot: a plain background (paper, screen) under thin strokes of
# strong contrast. A photo: no plain background, or soft contrast, or broad dark shapes.
# Chosen on the corpus's photos and on scans made of its PDFs' pages (docs/formats.md, OCR).
MIN_CONTRAST = 90  # grey levels between the background and the strokes
MIN_PLAIN_BACKGROUND = 0.85  # share of the background within 24 grey levels of its median
MIN_THIN_RUNS = 0.75  # share of the strokes' horizontal runs at most 1/128 of the width
MIN_RUNS_PER_KPX = 0.3  # strokes' runs per 1,000 pixels (a blank page has none)


def looks_like_text(grey: Any) -> bool:
    """Whether a grey picture (a 2-D uint8 numpy array) looks like it holds lines of text."""
    import numpy as np

    height, width = grey.shape
    counts = np.bincount(grey.ravel(), minlength=256).astype(float)
    share = counts / counts.sum()
    below, mean_below = np.cumsum(share), np.cumsum(share * np.arange(256))
    between = (mean_below[-1] * below - mean_below) ** 2 / (below * (1 - below) + 1e-12)
    dark = grey <= int(np.argmax(between))  # Otsu's threshold
    strokes = dark if dark.mean() <= 0.5 else ~dark  # light text on a dark screen too
    background, ink = grey[~strokes], grey[strokes]
    if not ink.size or not background.size:
        return False  # one colour: nothing written
    contrast = abs(float(background.mean()) - float(ink.mean()))
    plain = float((np.abs(background.astype(np.int16) - np.median(background)) <= 24).mean())
    edges = np.diff(np.pad(strokes.astype(np.int8), ((0, 0), (1, 1))), axis=1)
    runs = np.flatnonzero(edges.ravel() == -1) - np.flatnonzero(edges.ravel() == 1)
    thin = float((runs <= max(3, width // 128)).mean()) if runs.size else 0.0
    per_kpx = runs.size * 1000 / (height * width)
    return (
        contrast >= MIN_CONTRAST
        and plain >= MIN_PLAIN_BACKGROUND
        and thin >= MIN_THIN_RUNS
        and per_kpx >= MIN_RUNS_PER_KPX
    )


def holds_text(
    path: str, doc_type: str, metadata: Mapping[str, Any], settings: ExtractionSettings
) -> bool | None:
    """Whether the picture OCR would read (a RAW file's embedded preview) looks like it holds
    text. False for a picture that cannot be decoded (Tesseract could not read it either);
    None when it is too large to look at within the limits (OCR then decides as before)."""
    import numpy as np

    try:
        img = imaging.open_image(_raw_preview_bytes(path, metadata) if doc_type == "raw_image" else path)
        img = imaging.scale(img, TEXT_TEST_PX, settings.max_pixels)
        return looks_like_text(np.asarray(img.convert("L")))
    except imaging.ImageRefused:
        return None
    except Exception:  # noqa: BLE001 - damaged or truncated: nothing OCR could read
        return False


def _raw_preview_bytes(path: str, metadata: Mapping[str, Any]) -> bytes:
    """The JPEG preview a RAW file embeds, where its metadata says it is."""
    preview = metadata.get("preview") or {}
    with open(path, "rb") as handle:
        handle.seek(int(preview["offset"]))
        return handle.read(int(preview["length"]))


# -- reading pages (in the extraction child) -----------------------------------------------------


Word = list  # [x0, y0, x1, y1, "word"]: a word OCR read, its box as fractions of the page


def read_page(pnm: bytes, settings: OcrSettings) -> tuple[str, list[Word]]:
    """The text of one page image (PNM bytes) and its words' boxes; ExtractionError when
    Tesseract fails."""
    try:
        proc = subprocess.run(
            [settings.command or TESSERACT, "stdin", "stdout", "-l", settings.languages, "tsv"],
            input=pnm,
            capture_output=True,
            timeout=settings.timeout_page,
            env={**os.environ, **TESSERACT_ENV},
            # a killed child (a page stopped mid-way) takes its tesseract along
            preexec_fn=functools.partial(die_with_parent, signal.SIGKILL, os.getpid()),
        )
    except subprocess.TimeoutExpired as exc:
        raise TimeoutError from exc
    except OSError as exc:
        raise ExtractionError("Tesseract is not installed") from exc
    if proc.returncode != 0:
        raise ExtractionError(f"Tesseract failed ({proc.returncode})")
    return from_tsv(proc.stdout.decode("utf-8", "replace"))


def from_tsv(tsv: str) -> tuple[str, list[Word]]:
    """The page's text from Tesseract's TSV (a line of words per line, a blank line between
    paragraphs, as its plain output) and each word's box as fractions of the page."""
    width = height = 1
    lines: dict[tuple[str, str, str], list[str]] = {}
    words: list[Word] = []
    for row in (line.split("\t") for line in tsv.splitlines()[1:]):
        if len(row) < 12 or not row[6].isdigit():
            continue
        left, top, w, h = (int(v) for v in row[6:10])
        if row[0] == "1":  # the page itself
            width, height = max(w, 1), max(h, 1)
        elif row[0] == "5" and row[11].strip():
            lines.setdefault((row[2], row[3], row[4]), []).append(row[11])
            box = (left / width, top / height, (left + w) / width, (top + h) / height)
            words.append([*(round(v, 4) for v in box), row[11]])
    text, paragraph = [], None
    for (block, par, _line), line_words in lines.items():
        if paragraph is not None and paragraph != (block, par):
            text.append("")
        paragraph = (block, par)
        text.append(" ".join(line_words))
    return "\n".join(text), words


def _pnm(image: Any) -> bytes:
    """A grey PNM of a Pillow image, scaled down when it has too many pixels."""
    image = image.convert("L")
    pixels = image.width * image.height
    if pixels > MAX_PAGE_PIXELS:
        scale = (MAX_PAGE_PIXELS / pixels) ** 0.5
        image = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    buf = io.BytesIO()
    image.save(buf, format="PPM")
    return buf.getvalue()


READ, SKIPPED, TIMED_OUT = "read", "skipped", "timed_out"  # what became of one page


def page_count(path: str, doc_type: str, settings: OcrSettings, extraction: ExtractionSettings) -> int:
    """Pages (PDF pages, image frames) the file has for OCR to look at, in order."""
    if doc_type == "pdf":
        import pymupdf

        with pymupdf.open(path, filetype="pdf") as doc:
            if doc.needs_pass and not doc.authenticate(""):
                raise ExtractionError("PDF is password protected")
            return len(doc)
    if doc_type == "raw_image":
        _raw_preview(path, extraction)  # raises when there is none
        return 1
    from PIL import Image

    with Image.open(path) as image:
        return getattr(image, "n_frames", 1)


def _pdf_page(path: str, index: int) -> bytes | None:
    """A PNM of one PDF page, or None when it has a text layer or is blank."""
    import pymupdf

    with pymupdf.open(path, filetype="pdf") as doc:
        if doc.needs_pass and not doc.authenticate(""):
            raise ExtractionError("PDF is password protected")
        page = doc[index]
        if page.get_text("text").strip():
            return None
        area = max(1.0, page.rect.width * page.rect.height / 72 / 72)
        dpi = min(PDF_DPI, int((MAX_PAGE_PIXELS / area) ** 0.5))
        pix = page.get_pixmap(dpi=max(dpi, 36), colorspace=pymupdf.csGRAY)
        return None if pix.is_unicolor else pix.tobytes("pnm")


def _image_page(data: str | bytes, index: int) -> bytes:
    """A PNM of one frame of an image (a multi-page TIFF has several), upright."""
    from PIL import Image, ImageOps

    source = io.BytesIO(data) if isinstance(data, bytes) else data
    with Image.open(source) as image:
        image.seek(index)
        return _pnm(ImageOps.exif_transpose(image))


def read_one(
    path: str, doc_type: str, index: int, settings: OcrSettings, extraction: ExtractionSettings
) -> tuple[str, str, list[Word]]:
    """(READ, text, its words' boxes), (SKIPPED, "", []) for a page OCR has nothing to do on,
    or (TIMED_OUT, "", [])."""
    if doc_type == "pdf":
        pnm = _pdf_page(path, index)
    elif doc_type == "raw_image":
        pnm = _image_page(_raw_preview(path, extraction), index)
    else:
        pnm = _image_page(path, index)
    if pnm is None:
        return SKIPPED, "", []
    try:
        text, words = read_page(pnm, settings)
        return READ, text.strip(), words
    except TimeoutError:
        return TIMED_OUT, "", []


def _raw_preview(path: str, settings: ExtractionSettings) -> bytes:
    """The JPEG preview embedded in a RAW file (where its EXIF says it is)."""
    preview = extract_raw(path, settings).metadata.get("preview") or {}
    if not preview:
        raise ExtractionError("No preview image in this RAW file")
    with open(path, "rb") as handle:
        handle.seek(preview["offset"])
        return handle.read(preview["length"])


def result_of(
    texts: list[str], taken: int, timed_out: int, doc_type: str, settings: OcrSettings
) -> Extracted:
    """The OCR result of a document from its pages' texts and counts."""
    meta: dict[str, Any] = {"pages": taken, "languages": settings.languages}
    if timed_out:
        meta["timed_out"] = timed_out
    return Extracted(type=doc_type, content="\n\n".join(t for t in texts if t), metadata=meta)


def read_file(path: str, doc_type: str, settings: OcrSettings, extraction: ExtractionSettings) -> Extracted:
    """OCR text of a file's image pages, up to the page cap, in one call (the bench's way;
    the OCR phase reads page by page: ocr_phase.py); metadata `{"pages", "languages",
    "timed_out"?}`."""
    texts, taken, timed_out = [], 0, 0
    for index in range(page_count(path, doc_type, settings, extraction)):
        if taken >= settings.max_pages:
            break
        state, text, _words = read_one(path, doc_type, index, settings, extraction)
        taken += state != SKIPPED
        timed_out += state == TIMED_OUT
        texts.append(text)
    return result_of(texts, taken, timed_out, doc_type, settings)


def ocr_specs(settings: OcrSettings) -> tuple[ExtractorSpec, ...]:
    """Extractor entries that OCR instead of extracting (for an extraction child of the OCR phase)."""

    def spec(doc_type: str, extensions: tuple[str, ...]) -> ExtractorSpec:
        return ExtractorSpec(
            type=doc_type,
            extensions=extensions,
            extract=functools.partial(_read_as, doc_type=doc_type, settings=settings),
        )

    return (spec("pdf", ("pdf",)), spec("image", IMAGE_EXTENSIONS), spec("raw_image", RAW_EXTENSIONS))


def _read_as(path: str, extraction: ExtractionSettings, *, doc_type: str, settings: OcrSettings) -> Extracted:
    return read_file(path, doc_type, settings, extraction)
