"""Image previews and PDF pages drawn in a short-lived child process with pixel and memory bounds.

A 12000x12000 PNG of 560 KB once took 1.4 GB of a web worker, and glibc kept most of it after
the request (docs/security.md). Here the web process never decodes pixels: the image's header is
checked against PREVIEW_MAX_PIXELS (after JPEG's reduced decoding shrinks it), the decoding
happens in a child started from a clean fork server with an address-space cap, and the child's
memory goes back to the system when it exits. Only the finished JPEG/PNG crosses the pipe.

A PDF page is drawn the same way (pymupdf), with the query's matched words found on the page
(pdfhits.py: whole words, as the search's matcher accepts them) and painted over the drawn
pixels; the browser's viewer asks the same child for the pages holding a match and their hit
boxes ("pdf_hits"). The file itself is only read.
"""

from __future__ import annotations

import json
import multiprocessing
import threading
import time
from dataclasses import dataclass
from typing import Any

from webapp import imaging
from webapp.exceptions import Unavailable
from webapp.imaging import ImageRefused
from webapp.indexing.extractors.base import ExtractionError, ExtractionSettings
from webapp.indexing.extractors.comic import comic_page
from webapp.indexing.extractors.pptx import slide_picture, slide_pictures
from webapp.previews import pdfhits
from webapp.procs import limit_memory
from webapp.search.query import TermMatcher

# imported once by the fork server, so each child starts with Pillow and its plug-ins loaded
FORK_SERVER_PRELOAD = [__name__, "webapp.previews.preload"]


@dataclass(frozen=True)
class PreviewLimits:
    """What one preview may cost: long side of the result, decoded pixels, child memory, time."""

    max_side: int
    max_pixels: int
    memory_mb: int
    timeout: float


class PreviewRefused(ImageRefused):
    """The image cannot be previewed; the message says why in words a user understands."""


class PreviewBusy(Unavailable):
    """Every preview slot of this process stayed taken for the whole timeout."""


# -- the child side ------------------------------------------------------------------------------

PREVIEW_QUALITY = 85  # JPEG quality of previews and drawn PDF pages
HIGHLIGHT_RGBA = (255, 200, 0, 120)  # translucent yellow over matched words on a PDF page
PDF_PAGE_PX = 1400  # long side of a drawn PDF page (at most limits.max_side)


def _open_pdf(path: str) -> Any:
    import pymupdf

    try:
        doc = pymupdf.open(path, filetype="pdf")
    except Exception as exc:  # noqa: BLE001 - pymupdf raises several types for broken files
        raise PreviewRefused("Not a PDF that can be drawn") from exc
    if doc.needs_pass and not doc.authenticate(""):
        doc.close()
        raise PreviewRefused("This PDF is password protected")
    return doc


def render_pdf_page(
    path: str, page_no: int, matcher: TermMatcher | None, limits: PreviewLimits
) -> tuple[bytes, str]:
    """One page of a PDF as a JPEG, the words the matcher accepts highlighted on it."""
    import pymupdf
    from PIL import Image, ImageDraw

    with _open_pdf(path) as doc:
        if not 1 <= page_no <= doc.page_count:
            raise PreviewRefused(f"This PDF has no page {page_no} (it has {doc.page_count})")
        page = doc[page_no - 1]
        zoom = min(PDF_PAGE_PX, limits.max_side) / max(page.rect.width, page.rect.height, 1)
        imaging.check_pixels((int(page.rect.width * zoom), int(page.rect.height * zoom)), limits.max_pixels)
        pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        img = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
        # the words' boxes are in unrotated page space; the pixmap shows the page as rotated
        to_pixels = page.rotation_matrix * pymupdf.Matrix(zoom, zoom)
        boxes = pdfhits.hit_rects(page, matcher) if matcher is not None and matcher.terms else []
        rects = [pymupdf.Rect(box) * to_pixels for box in boxes]
    if rects:
        overlay = Image.new("RGBA", img.size, (0, 0, 0, 0))
        draw = ImageDraw.Draw(overlay)
        for r in rects:
            r.normalize()
            draw.rectangle((r.x0, r.y0, r.x1, r.y1), fill=HIGHLIGHT_RGBA)
        img = Image.alpha_composite(img.convert("RGBA"), overlay).convert("RGB")
    return imaging.encode(img, PREVIEW_QUALITY)


def render(
    path: str, kind: str, limits: PreviewLimits, page: int = 1, matcher: TermMatcher | None = None
) -> tuple[bytes, str]:
    """Scale the image to limits.max_side and encode it (PNG keeps transparency, else JPEG);
    for kind "pdf", draw page `page` with the matcher's words highlighted; for "pdf_find", the
    number of the first page holding one, as text; for "pdf_hits", the page sizes and the hit
    boxes of the pages holding one, as JSON (pdfhits.pdf_hits); for "comic", page `page` of a
    comic archive; for "slide_pictures", each slide's pictures as JSON, and for
    "slide_picture", picture `page` of the deck (counted slide after slide)."""
    if kind == "pdf":
        return render_pdf_page(path, page, matcher, limits)
    if kind == "pdf_find":
        with _open_pdf(path) as doc:
            found = pdfhits.first_match(doc, matcher) if matcher is not None else 1
        return str(found).encode(), "text/plain"
    if kind == "pdf_hits":
        with _open_pdf(path) as doc:
            seconds = limits.timeout * pdfhits.HITS_SHARE_OF_TIMEOUT
            found = pdfhits.pdf_hits(doc, matcher, seconds)
        return json.dumps(found, separators=(",", ":")).encode(), "application/json"
    if kind == "slide_pictures":
        return json.dumps(
            _refused_as_preview(slide_pictures, path, ExtractionSettings())
        ).encode(), "application/json"
    if kind == "comic":
        img = _refused_as_preview(comic_page, path, page)
    elif kind == "slide_picture":
        img = _refused_as_preview(slide_picture, path, page, ExtractionSettings())
    elif kind == "raw_image":
        img = imaging.open_raw(path, develop_max_pixels=limits.max_pixels)
    else:
        img = imaging.open_image(path)
    img = imaging.scale(img, limits.max_side, limits.max_pixels)
    return imaging.encode(img, PREVIEW_QUALITY, keep_alpha=kind != "raw_image")


def _refused_as_preview(read: Any, *args: Any) -> Any:
    """What an extractor's reader gives (a comic's page, a slide's picture), its refusal as
    the preview's."""
    try:
        return read(*args)
    except ExtractionError as exc:
        raise PreviewRefused(str(exc)) from exc


@dataclass(frozen=True)
class PreviewRequest:
    """What the web process asks a preview child for (its only argument)."""

    path: str
    kind: str  # a document type, or pdf_find / pdf_hits (render())
    limits: PreviewLimits
    page: int = 1
    matcher: TermMatcher | None = None


@dataclass(frozen=True)
class PreviewAnswer:
    """The child's answer: the preview's bytes and mimetype, or why there is none."""

    data: bytes = b""
    mimetype: str = ""
    refused: str | None = None


def _child_main(conn: Any, request: PreviewRequest) -> None:
    """Child: render one preview and send a PreviewAnswer."""
    try:
        imaging.register_heif()
        limit_memory(request.limits.memory_mb)
        data, mimetype = render(request.path, request.kind, request.limits, request.page, request.matcher)
        answer = PreviewAnswer(data, mimetype)
    except ImageRefused as exc:
        answer = PreviewAnswer(refused=str(exc))
    except MemoryError:
        answer = PreviewAnswer(refused="Image needs too much memory to preview")
    except Exception as exc:  # noqa: BLE001 - any decoder failure means this file has no preview
        answer = PreviewAnswer(refused=f"Image cannot be read for a preview ({_reason(exc)})")
    conn.send(answer)
    conn.close()


def _reason(exc: Exception) -> str:
    """A short, path-free reason (Pillow's messages may name the file)."""
    text = str(exc).split(":")[0].strip() if str(exc) else ""
    return text[:80] if text and "/" not in text else type(exc).__name__


# -- the web side --------------------------------------------------------------------------------


class IsolatedRenderer:
    """Runs each preview in a fresh child of a fork server; at most `slots` at once per process."""

    def __init__(self, slots: int) -> None:
        self._slots = threading.BoundedSemaphore(max(1, slots))
        self._ctx = multiprocessing.get_context("forkserver")
        # the fork server imports only these modules (never the web app or its __main__)
        self._ctx.set_forkserver_preload(FORK_SERVER_PRELOAD)

    def render(
        self,
        path: str,
        kind: str,
        limits: PreviewLimits,
        page: int = 1,
        matcher: TermMatcher | None = None,
    ) -> tuple[bytes, str]:
        """The preview bytes and mimetype (an image, or page `page` of a PDF with the matcher's
        words highlighted); PreviewRefused or PreviewBusy when there is none."""
        deadline = time.monotonic() + limits.timeout  # the wait for a slot counts too
        if not self._slots.acquire(timeout=limits.timeout):
            raise PreviewBusy("Too many image previews at once; try again shortly")
        try:
            request = PreviewRequest(path, kind, limits, page, matcher)
            return self._run_child(request, max(0.0, deadline - time.monotonic()))
        finally:
            self._slots.release()

    def _run_child(self, request: PreviewRequest, seconds: float) -> tuple[bytes, str]:
        parent_end, child_end = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=_child_main,
            args=(child_end, request),
            name="trawl-preview",
            daemon=True,
        )
        proc.start()
        child_end.close()
        try:
            if not parent_end.poll(seconds):
                raise PreviewRefused(f"Image took longer than {request.limits.timeout:g} s to preview")
            answer: PreviewAnswer = parent_end.recv()
        except (EOFError, OSError) as exc:  # killed by its memory cap or a decoder crash
            raise PreviewRefused("Image needs too much memory to preview or crashed the decoder") from exc
        finally:
            parent_end.close()
            if proc.is_alive():
                proc.kill()
            proc.join()
        if answer.refused is not None:
            raise PreviewRefused(answer.refused)
        return answer.data, answer.mimetype

    def first_pdf_page(self, path: str, matcher: TermMatcher, limits: PreviewLimits) -> int:
        """The first page of a PDF holding a word the matcher accepts (1 when none does), read
        in a child like a drawn page."""
        data, _ = self.render(path, "pdf_find", limits, matcher=matcher)
        return int(data)

    def pdf_hits(self, path: str, matcher: TermMatcher | None, limits: PreviewLimits) -> dict:
        """The PDF's page sizes and the hit boxes of its pages holding a match (pdfhits.py),
        read in a child like a drawn page."""
        data, _ = self.render(path, "pdf_hits", limits, matcher=matcher)
        return json.loads(data)
