"""What the document page's PDF viewer (static/js/pdf-viewer.mjs, pdf.js) fetches: the PDF itself,
inline, and the pages holding a match of the search with their hit boxes."""

from __future__ import annotations

from flask import abort, g, jsonify, redirect, request, send_file, url_for

from webapp.services import documents, files, previews
from webapp.ui.blueprint import bp


def _pdf(doc_id: str) -> dict:
    """The PDF document (404 when the user may not see it, or it is not a PDF with pages)."""
    doc = documents.get(doc_id, g.user)
    if not previews.has_pdf_pages(doc):
        abort(404)
    return doc


@bp.get("/documents/<doc_id>/file")
def document_file(doc_id: str):
    """The original PDF (an archive member's too) for the viewer, honouring Range (206/416).

    Never shown as a page: the browser's own PDF viewer runs a PDF's JavaScript (an
    OpenAction's `app.alert`) even under `sandbox`. A navigation here (a link, the address
    bar, a frame) goes to the document page, whose pdf.js viewer runs nothing; the bytes go
    as an attachment, which a fetch ignores and a browser without Fetch Metadata downloads."""
    doc = _pdf(doc_id)
    if files.shown_as_page(request.headers):
        return redirect(url_for("ui.document", doc_id=doc["id"]), 303)
    resp = send_file(
        files.download_target(doc),
        mimetype="application/pdf",
        conditional=True,
        max_age=0,
        etag=not doc.get("container_id"),
    )
    resp.headers["Content-Disposition"] = files.content_disposition("attachment", doc["basename"])
    resp.headers["Cache-Control"] = "private, no-cache"
    resp.headers["Vary"] = "Sec-Fetch-Dest, Sec-Fetch-Mode"
    resp.headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return resp


@bp.get("/documents/<doc_id>/hits")
def document_hits(doc_id: str):
    """{"sizes": [[w, h] per page, in points], "hits": {"page": [[x0, y0, x1, y1] as fractions
    of the page]}, "searched": pages read} for ?q= (no hits without q)."""
    doc = _pdf(doc_id)
    q = (request.args.get("q") or "").strip()[:1000]
    resp = jsonify(previews.pdf_hits(doc, q))
    resp.headers["Cache-Control"] = "private, max-age=300"
    return resp
