"""The search page and the document page (text or image preview, metadata, download)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

from flask import Response, abort, g, redirect, render_template, request, send_file, url_for
from flask_babel import lazy_gettext as _l

from webapp.exceptions import InvalidInput, TrawlError
from webapp.search import FACETS, IndexRebuilding, SearchBackendError
from webapp.search.syntax import parse_syntax
from webapp.services import (
    copies,
    document_preview,
    documents,
    files,
    previews,
    saved_searches,
    search_args,
    similar,
    ui_support,
)
from webapp.services.access import visible_sources
from webapp.ui import browse, querybox, saved, session
from webapp.ui.blueprint import bp
from webapp.ui.htmx import is_htmx, render

PAGE_SIZES = (10, 20, 50, 100)
SORT_LABELS = {
    "relevance": _l("Best match"),
    "modified_at:desc": _l("Newest first"),
    "modified_at:asc": _l("Oldest first"),
    "size_bytes:desc": _l("Largest first"),
    "basename:asc": _l("Name A–Z"),
}
MAX_OFFSET = 100_000
SNIPPET_LENGTH = 240
# The syntax help beside the search box: (written, means).
SYNTAX_ROWS = (
    ('"two words"', _l("the exact phrase")),
    ('-word, -"a phrase"', _l("leave out documents containing it")),
    ("cats OR dogs", _l("either word (upper-case OR)")),
    ("type:pdf ext:docx", _l("only that type or extension; repeat for several")),
    ("source:notes", _l("only that source (its id)")),
    ("path:projects/2024", _l("only files under that folder")),
    ("title:budget", _l("the word is in the title or file name")),
    ("modified:2024-03", _l("dated that year, month or day (UTC): taken, for photos")),
    ("modified:>2024-01-01, modified:2023..2024-06", _l("date ranges (>, >=, <, <=, a..b)")),
    ("size:>10MB, size:1MB..5MB", _l("size ranges (k, KB, MB, GB)")),
    ('camera:"Canon EOS 5D"', _l("photos taken with that camera")),
)


# the page's facet filters (`folder`: relative to the sources' roots, as `path:` reads it)
FILTER_PARAMS = ("source", "type", "ext", "year", "from", "to", "camera", "folder")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_YEAR = re.compile(r"\d{4}")


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


def _page_arg(args: Mapping, highest: int) -> int:
    """The asked page number, moved into 1..highest (the results clamp it again to the last)."""
    raw = (args.get("page") or "").strip()
    if not raw:
        return 1
    if not re.fullmatch(r"[+-]?\d{1,12}", raw):
        raise InvalidInput("page: must be a whole number")
    return min(max(1, int(raw)), highest)


def read_form(args: Mapping) -> dict:
    """The page's own parameters, trimmed (what the form and the links carry)."""
    form = {name: (args.get(name) or "").strip() for name in ("q", *FILTER_PARAMS)}
    form["sort"] = args.get("sort") or "relevance"
    form["limit"] = (args.get("limit") or "").strip() or "20"
    form["view"] = args.get("view") if args.get("view") in browse.VIEWS else ""
    return querybox.fold_selects(form)


def filter_terms(form: Mapping) -> list[str]:
    """The facet filters of the URL as query-language terms (so one validator reads them)."""
    for name, pattern, example in (
        ("year", _YEAR, "2024"),
        ("from", _DAY, "2024-03-15"),
        ("to", _DAY, "2024-03-15"),
    ):
        if form[name] and not pattern.fullmatch(form[name]):
            raise InvalidInput(f"{name}: is not a date (use {example})")
    terms = [
        f"{field}:{_quoted(form[name])}"
        for name, field in (  # source and type are in the box already (querybox)
            ("ext", "ext"),
            ("year", "modified"),
            ("camera", "camera"),
            ("folder", "path"),
        )
        if form[name]
    ]
    if form["from"] or form["to"]:
        terms.append(f"modified:{form['from']}..{form['to']}")
    return terms


def _quoted(value: str) -> str:
    value = value.replace('"', "")
    return f'"{value}"' if any(c.isspace() for c in value) else value


def parse_search(args: Mapping) -> dict:
    """The search page's query string as documents.search() arguments; InvalidInput when bad.

    The box's text and the facet filters become one `q`, read by the API's own validator.
    Nothing asked (or only a sort) lists the files, newest first unless sorted otherwise."""
    form = read_form(args)
    q = " ".join([form["q"], *filter_terms(form)]).strip()
    sort = form["sort"]
    if not q and sort == "relevance":  # nothing asked yet: the newest files
        sort = "modified_at:desc"
    loaded = search_args.load(
        {
            "q": q,
            "sort": sort,
            "limit": form["limit"],
            "snippet_length": SNIPPET_LENGTH,
            "facets": list(FACETS),
            "facet_folder": form["folder"].strip("/") or None,
        }
    )
    page = _page_arg(args, MAX_OFFSET // loaded["limit"] + 1)
    loaded["offset"] = (page - 1) * loaded["limit"]
    return {"form": form, "args": loaded, "limit": loaded["limit"], "page": page}


def _run_search(args: Mapping) -> tuple[dict, dict | None, str | None]:
    """(parsed form, results or None, error message or None)."""
    try:
        parsed = parse_search(args)
    except InvalidInput as exc:
        form = read_form(args)
        form["q"] = form["q"][:1000]
        return {"form": form, "args": None, "limit": 20, "page": 1}, None, exc.detail
    try:
        result = documents.search(parsed["args"], g.user)
        last = max(1, math.ceil(result["total"] / parsed["limit"]))
        if parsed["page"] > last:  # "page 999 of 71" shows page 71
            parsed["page"] = last
            parsed["args"] = {**parsed["args"], "offset": (last - 1) * parsed["limit"]}
            result = documents.search(parsed["args"], g.user)
        return parsed, result, None
    except TrawlError as exc:
        return parsed, None, exc.detail
    except IndexRebuilding as exc:
        return parsed, None, str(exc)
    except SearchBackendError as exc:
        return parsed, None, f"The search engine failed: {exc}"


def _page_url(form: dict, page: int, **changes: str | None) -> str:
    """The page's address for `form` at `page`, with some parameters changed (None drops)."""
    q = form["q"]
    for field in querybox.SELECT_FIELDS:  # they live in the box: a change edits its term
        if field in changes:
            q = querybox.with_term(q, field, changes.pop(field))
    params = {
        "q": q,
        **{name: form[name] for name in FILTER_PARAMS if name not in querybox.SELECT_FIELDS},
        "sort": form["sort"] if form["sort"] != "relevance" else None,
        "limit": form["limit"] if str(form["limit"]) != "20" else None,
        "page": page if page > 1 else None,
        "view": form.get("view") or None,
    }
    params.update(changes)
    return url_for("ui.index", **{k: v for k, v in params.items() if v})


@bp.get("/")
def index():
    """Search: the whole page, or only the results for htmx (search as you type)."""
    parsed, result, error = _run_search(request.args)
    form, limit, page = parsed["form"], parsed["limit"], parsed["page"]
    pages = math.ceil(result["total"] / limit) if result else 0
    sources = ui_support.source_choices(g.user)
    page_url = lambda n, **changes: _page_url(form, n, **changes)  # noqa: E731
    try:
        spec = parse_syntax(form["q"])
    except TrawlError:
        spec = None
    context = {
        "form": form,
        "result": result,
        "error": error,
        "page": page,
        "pages": pages,
        "browsing": not form["q"] and not any(form[name] for name in FILTER_PARAMS),
        "page_url": page_url,
        "view": browse.view_of(form, spec),
        "facets": browse.facet_groups(result, form, dict(sources), page_url) if result else [],
        "sources": sources,
        "filter_count": sum(1 for name in FILTER_PARAMS if form[name]),
        "sort_labels": SORT_LABELS,
        "page_sizes": PAGE_SIZES,
        "syntax_rows": SYNTAX_ROWS,
    }
    if not is_htmx():  # the form's choices and the saved searches: the whole page only (an
        context["types"] = ui_support.document_types(g.user)  # answer while typing is the
        context["saved"] = [
            {**s, "url": saved.search_url(s)}  # results alone)
            for s in saved_searches.list_json(g.user)
        ]
    resp = render("index.html", "_results.html", 400 if error else 200, **context)
    if is_htmx():  # the address bar shows the short form of the search (shared links, history)
        url = request.full_path if error else _page_url(form, page)
        # typing, or Enter on the search already shown: the address is replaced, not a step
        same = _shown_address() == url
        typing = request.headers.get("X-Trawl-Typing") == "1" or same
        resp.headers["HX-Replace-Url" if typing else "HX-Push-Url"] = url
        resp.vary.add("X-Trawl-Typing")
        resp.vary.add("HX-Current-URL")
    return resp


def _shown_address() -> str | None:
    """The path and query of the page the browser shows (htmx's HX-Current-URL), or None."""
    shown = urlsplit(request.headers.get("HX-Current-URL", ""))
    if not shown.path:
        return None
    return shown.path + (f"?{shown.query}" if shown.query else "")


SIMILAR_SHOWN = 8  # documents in the page's "Similar documents" list


@bp.get("/documents/<doc_id>/similar")
def document_similar(doc_id: str):
    """The document page's "Similar documents" as result cards (an htmx fragment); a plain
    request goes to the page with them shown."""
    if not is_htmx():
        return redirect(url_for("ui.document", doc_id=doc_id, similar=1, _anchor="similar"))
    found = similar.similar(doc_id, g.user, SIMILAR_SHOWN)["results"]
    resp = Response(render_template("_similar.html", doc_id=doc_id, similar=found))
    resp.vary.add("HX-Request")
    return resp


@bp.get("/documents/<doc_id>")
def document(doc_id: str):
    """One document: facts, metadata and its preview (services/document_preview.py chooses
    it: the image, PDF pages, rendered Markdown, a player, an e-mail, an archive's tree,
    slides, a comic's pages or the paged text; `view=text` asks for the text)."""
    doc = documents.get(doc_id, g.user)
    q = (request.args.get("q") or "").strip()[:1000]
    shown = document_preview.build(
        doc,
        q,
        _page_number(),
        request.args.get("view") == "text",
        lambda sibling: url_for("ui.document", doc_id=sibling, q=q or None),
    )
    return render_template(
        "document.html",
        doc=doc,
        q=q,
        shown=shown,
        back_url=_back_url(),
        doc_id=doc["id"],
        problem=documents.read_problem(doc),
        copies=copies.of_document(doc, visible_sources(g.user)),  # "also at": what the user may see
        # loaded by htmx once the page shows (`_similar.html`); `similar=1`: without JavaScript
        similar=similar.similar(doc_id, g.user, SIMILAR_SHOWN)["results"]
        if request.args.get("similar")
        else None,
    )


def _page_number() -> int | None:
    """The preview page the request asks for (`?page=`), or None."""
    try:
        return int(request.args.get("page", ""))
    except ValueError:
        return None


def _back_url() -> str | None:
    """The search this document was opened from (same-site referrer of the search page)."""
    ref = request.referrer or ""
    root = request.host_url.rstrip("/")
    if ref.startswith(root + "/?") or ref == root + "/":
        return ref[len(root) :]
    return None


@bp.get("/documents/<doc_id>/image")
def document_image(doc_id: str):
    """The scaled image (or a RAW file's preview) of an image document."""
    doc = documents.get(doc_id, g.user)
    if document_preview.kind_of(doc) != document_preview.Kind.IMAGE:
        abort(404)
    data, mimetype = previews.image_preview(doc)
    resp = Response(data, mimetype=mimetype)
    resp.headers["Content-Disposition"] = files.content_disposition("inline", doc["basename"])
    resp.headers["Cache-Control"] = "private, max-age=300"
    return resp


@bp.get("/documents/<doc_id>/pages/<int:page>")
def document_pdf_page(doc_id: str, page: int):
    """Page `page` of a PDF document as an image, the ?q= matches highlighted on it."""
    doc = documents.get(doc_id, g.user)
    if not previews.has_pdf_pages(doc):
        abort(404)
    q = (request.args.get("q") or "").strip()[:1000]
    data, mimetype = previews.pdf_page_image(doc, page, q)
    resp = Response(data, mimetype=mimetype)
    resp.headers["Cache-Control"] = "private, max-age=300"
    return resp


@bp.get("/documents/<doc_id>/comic/<int:page>")
def document_comic_page(doc_id: str, page: int):
    """Page `page` of a comic (cbz, cbr) as an image."""
    return _drawn(doc_id, document_preview.Kind.PAGES, lambda doc: previews.comic_page_image(doc, page))


@bp.get("/documents/<doc_id>/slides/pictures/<int:number>")
def document_slide_picture(doc_id: str, number: int):
    """Picture `number` of a presentation (counted slide after slide) as an image."""
    return _drawn(doc_id, document_preview.Kind.SLIDES, lambda doc: previews.slide_picture_image(doc, number))


def _drawn(doc_id: str, kind: document_preview.Kind, draw) -> Response:
    """A picture drawn from a document whose preview is of `kind` (404 for any other), kept
    by the browser for a while."""
    doc = documents.get(doc_id, g.user)
    if document_preview.kind_of(doc) != kind:
        abort(404)
    data, mimetype = draw(doc)
    resp = Response(data, mimetype=mimetype)
    resp.headers["Cache-Control"] = "private, max-age=300"
    return resp


@bp.get("/documents/<doc_id>/media")
def document_media(doc_id: str):
    """The audio or video file for the page's player, inline, honouring Range (206/416); a
    navigation here goes to the document page (raw bytes are never shown as a page)."""
    doc = documents.get(doc_id, g.user)
    mimetype = files.media_mimetype(doc)
    if mimetype is None:
        abort(404)
    if files.shown_as_page(request.headers):
        return redirect(url_for("ui.document", doc_id=doc["id"]), 303)
    resp = send_file(
        files.download_target(doc),
        mimetype=mimetype,
        conditional=True,
        max_age=0,
        etag=not doc.get("container_id"),
    )
    resp.headers["Content-Disposition"] = files.content_disposition("inline", doc["basename"])
    resp.headers["Cache-Control"] = "private, no-cache"
    resp.headers["Vary"] = "Sec-Fetch-Dest, Sec-Fetch-Mode"
    return resp


@bp.post("/documents/<doc_id>/download")
def document_download(doc_id: str):
    """Create a short-lived download link for the logged-in user and follow it."""
    doc = documents.get(doc_id, g.user)
    files.open_path(doc)  # a vanished or moved file gets our error page, not the API's JSON
    link = files.download_link(doc, g.user, session.session_id())
    return redirect(link["url"], 303)
