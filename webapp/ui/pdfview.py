"""What the document page's PDF viewer (static/js/pdf-viewer.mjs, pdf.js) fetches: the PDF itself,
inline, and the pages holding a match of the search with their hit boxes."""

from __future__ import annotations

from flask import abort, g, jsonify, request, send_file

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
    A sandbox policy keeps the PDF's own scripts and forms inert if it is opened directly."""
    doc = _pdf(doc_id)
    resp = send_file(
        files.download_target(doc),
        mimetype="application/pdf",
        conditional=True,
        max_age=0,
        etag=not doc.get("container_id"),
    )
    resp.headers["Content-Disposition"] = files.content_disposition("inline", doc["basename"])
    resp.headers["Cache-Control"] = "private, no-cache"
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
