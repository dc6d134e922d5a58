"""Document endpoints: full document, preview, download link, download."""

from __future__ import annotations

from flask import Response, render_template, send_file
from flask.views import MethodView

from webapp.api.common import Blueprint, authenticated, errors, requester, session_id, token_or_session
from webapp.api.schemas import (
    DocumentSchema,
    DownloadArgsSchema,
    DownloadLinkSchema,
    PreviewArgsSchema,
    SimilarArgsSchema,
    SimilarSchema,
)
from webapp.services import documents, files, previews, similar

blp = Blueprint(
    "documents",
    __name__,
    url_prefix="/api/documents",
    description="Indexed documents and their original files",
)


@blp.route("/<string:doc_id>")
class Document(MethodView):
    @authenticated(blp)
    @blp.response(200, DocumentSchema)
    @errors(blp, 404)
    def get(self, doc_id):
        """The full document: extracted content and metadata."""
        return documents.get(doc_id, requester())


@blp.route("/<string:doc_id>/similar")
class Similar(MethodView):
    @authenticated(blp)
    @blp.arguments(SimilarArgsSchema, location="query")
    @blp.response(200, SimilarSchema)
    @errors(blp, 400, 404)
    def get(self, args, doc_id):
        """More like this: the documents closest in meaning that you may see (an empty list
        while the document is not embedded yet)."""
        return similar.similar(doc_id, requester(), args["limit"])


@blp.route("/<string:doc_id>/preview")
class Preview(MethodView):
    @authenticated(blp)  # outermost: an anonymous request is 401 whatever its arguments
    @blp.arguments(PreviewArgsSchema, location="query")
    @blp.response(
        200,
        description="An image (JPEG/PNG) for images and RAW files, "
        "otherwise an HTML page of the text with the ?q= matches in <em>",
        content_type="text/html",
    )
    @errors(blp, 400, 403, 404, 422, 503)
    def get(self, args, doc_id):
        """A readable preview: scaled image, or the text page by page."""
        doc = documents.get(doc_id, requester())
        if previews.is_image(doc):
            data, mimetype = previews.image_preview(doc)
            resp = Response(data, mimetype=mimetype)
            resp.headers["Content-Disposition"] = files.content_disposition("inline", doc["basename"])
            return resp
        files.open_path(doc)  # same re-check as for files served: swapped or gone is refused
        page = previews.text_page(doc, args["q"], args["page"])
        html = render_template("preview.html", doc=doc, q=args["q"], **page)
        return Response(html, mimetype="text/html")


@blp.route("/<string:doc_id>/thumbnail")
class Thumbnail(MethodView):
    @token_or_session(blp)
    @blp.response(200, description="A small JPEG (made when the file was indexed)", content_type="image/jpeg")
    @errors(blp, 404)
    def get(self, doc_id):
        """The document's thumbnail: images, RAW previews, first PDF pages, book and comic
        covers. 404 when the document has none (search results say so: thumbnail_url null)."""
        resp = send_file(
            documents.thumbnail_file(doc_id, requester()), mimetype="image/jpeg", conditional=True, max_age=0
        )
        resp.headers["Cache-Control"] = "private, no-cache"  # revalidated by ETag
        return resp


@blp.route("/<string:doc_id>/download-link")
class DownloadLink(MethodView):
    @authenticated(blp)
    @blp.response(200, DownloadLinkSchema)
    @errors(blp, 404)
    def post(self, doc_id):
        """A short-lived link to download the original file."""
        user = requester()
        return files.download_link(documents.get(doc_id, user), user, session_id())


@blp.route("/<string:doc_id>/download")
class Download(MethodView):
    @blp.arguments(DownloadArgsSchema, location="query")
    @blp.response(200, description="The original file, streamed", content_type="application/octet-stream")
    @errors(blp, 401, 403, 404)
    def get(self, args, doc_id):
        """The original file; authenticated by the link's token instead of a bearer token."""
        user = files.check_download_token(args["token"], doc_id)
        doc = documents.get(doc_id, user)
        resp = send_file(
            files.download_target(doc),
            mimetype="application/octet-stream",
            conditional=True,
            max_age=0,
            download_name=doc["basename"],
            etag=not doc.get("container_id"),
        )
        resp.headers["Content-Disposition"] = files.content_disposition("attachment", doc["basename"])
        return resp
