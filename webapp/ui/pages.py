"""The search page and the document page (text or image preview, metadata, download)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from flask import Response, abort, g, redirect, render_template, request, url_for

from webapp.exceptions import InvalidInput, TrawlError
from webapp.search import SORTS, SearchBackendError
from webapp.services import documents, ui_support
from webapp.ui import bp, session
from webapp.ui.htmx import is_htmx, render

PAGE_SIZES = (10, 20, 50, 100)
SORT_LABELS = {
    "relevance": "Best match",
    "modified_at:desc": "Newest first",
    "modified_at:asc": "Oldest first",
    "size_bytes:desc": "Largest first",
    "basename:asc": "Name A–Z",
}
MAX_OFFSET = 100_000
SNIPPET_LENGTH = 240


def _int_arg(args: Mapping, name: str, default: int, low: int, high: int) -> int:
    raw = (args.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name}: must be a whole number") from None
    if not low <= value <= high:
        raise InvalidInput(f"{name}: must be between {low} and {high}")
    return value


def parse_search(args: Mapping) -> dict:
    """The search form's query string as documents.search() arguments; InvalidInput when bad."""
    q = (args.get("q") or "").strip()
    if len(q) > 1000:
        raise InvalidInput("q: must be at most 1000 characters")
    sort = args.get("sort") or "relevance"
    if sort not in SORTS:
        raise InvalidInput("sort: must be one of " + ", ".join(SORTS))
    limit = _int_arg(args, "limit", 20, 1, 100)
    page = _int_arg(args, "page", 1, 1, MAX_OFFSET // limit + 1)
    doc_type = (args.get("type") or "").strip()
    if len(doc_type) > 50:
        raise InvalidInput("type: must be at most 50 characters")
    return {"q": q, "source_id": (args.get("source") or "").strip() or None,
            "type": doc_type or None, "limit": limit, "offset": (page - 1) * limit,
            "sort": sort, "snippet_length": SNIPPET_LENGTH}


def _run_search(args: Mapping) -> tuple[dict, dict | None, str | None]:
    """(parsed form, results or None, error message or None)."""
    try:
        form = parse_search(args)
    except InvalidInput as exc:
        form = {"q": (args.get("q") or "")[:1000], "source_id": args.get("source"),
                "type": args.get("type"), "limit": 20, "offset": 0, "sort": "relevance"}
        return form, None, exc.detail
    if not form["q"]:
        return form, None, None
    try:
        return form, documents.search(form), None
    except TrawlError as exc:
        return form, None, exc.detail
    except SearchBackendError as exc:
        return form, None, f"The search engine failed: {exc}"


def _page_url(form: dict, page: int) -> str:
    params = {"q": form["q"], "source": form["source_id"] or None, "type": form["type"] or None,
              "sort": form["sort"] if form["sort"] != "relevance" else None,
              "limit": form["limit"] if form["limit"] != 20 else None,
              "page": page if page > 1 else None}
    return url_for("ui.index", **{k: v for k, v in params.items() if v is not None})


@bp.get("/")
def index():
    """Search: the whole page, or only the results for htmx (search as you type)."""
    form, result, error = _run_search(request.args)
    pages = math.ceil(result["total"] / form["limit"]) if result else 0
    page = form["offset"] // form["limit"] + 1
    context = {
        "form": form, "result": result, "error": error, "page": page,
        "pages": pages, "page_url": lambda n: _page_url(form, n),
        "sources": ui_support.source_choices(), "types": ui_support.document_types(),
        "sort_labels": SORT_LABELS, "page_sizes": PAGE_SIZES,
    }
    if not form["q"] and not error:
        context["file_total"] = ui_support.document_total()
    resp = render("index.html", "_results.html", 400 if error else 200, **context)
    if is_htmx():  # the address bar shows the short form of the search (shared links, history)
        resp.headers["HX-Push-Url"] = request.full_path if error else _page_url(form, page)
    return resp


@bp.get("/documents/<doc_id>")
def document(doc_id: str):
    """One document: facts, metadata, and a paged text preview with highlights (or the image)."""
    doc = documents.get(doc_id)
    q = (request.args.get("q") or "").strip()[:1000]
    preview = None
    if not documents.is_image(doc):
        try:
            page = int(request.args.get("page", ""))
        except ValueError:
            page = ui_support.first_match_page(doc, q)
        preview = documents.text_page(doc, q, max(1, page))
    return render_template("document.html", doc=doc, q=q, preview=preview,
                           back_url=_back_url())


def _back_url() -> str | None:
    """The search this document was opened from (same-site referrer of the search page)."""
    ref = request.referrer or ""
    root = request.host_url.rstrip("/")
    if ref.startswith(root + "/?") or ref == root + "/":
        return ref[len(root):]
    return None


@bp.get("/documents/<doc_id>/image")
def document_image(doc_id: str):
    """The scaled image (or a RAW file's preview) of an image document."""
    doc = documents.get(doc_id)
    if not documents.is_image(doc):
        abort(404)
    data, mimetype = documents.image_preview(doc)
    resp = Response(data, mimetype=mimetype)
    resp.headers["Content-Disposition"] = documents.content_disposition("inline", doc["basename"])
    resp.headers["Cache-Control"] = "private, max-age=300"
    return resp


@bp.post("/documents/<doc_id>/download")
def document_download(doc_id: str):
    """Create a short-lived download link for the logged-in user and follow it."""
    doc = documents.get(doc_id)
    documents.open_path(doc)  # a vanished or moved file gets our error page, not the API's JSON
    link = documents.download_link(doc, g.user, session.session_id())
    return redirect(link["url"], 303)
