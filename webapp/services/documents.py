"""Documents: search, full document, previews, download links and downloads of the original file."""

from __future__ import annotations

import io
import math
import os
from urllib.parse import quote

from flask import current_app
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from webapp.exceptions import Forbidden, NotFound, Unauthorized
from webapp.extensions import db
from webapp.indexing.scanner import within
from webapp.models import Source, User
from webapp.runtime import get_search
from webapp.search import DEFAULT_MATCHING_STRATEGY, SearchPage, SearchQuery
from webapp.search.query import TermMatcher, parse_query
from webapp.search.snippets import highlight_all
from webapp.services.sources import inside_allowed_roots

PREVIEW_PAGE_CHARS = 20_000
IMAGE_TYPES = {"image", "raw_image"}


def search(args: dict) -> dict:
    """Run a validated search request; the response echoes limit and offset."""
    query = SearchQuery(q=args["q"], source_id=args.get("source_id") or None,
                        type=args.get("type") or None, limit=args["limit"],
                        offset=args["offset"], sort=args["sort"],
                        snippet_length=args["snippet_length"],
                        matching_strategy=args.get("matching_strategy") or DEFAULT_MATCHING_STRATEGY)
    page: SearchPage = get_search().search(query)
    return {"results": page.results, "total": page.total, "limit": query.limit,
            "offset": query.offset, "processing_time_ms": page.processing_time_ms}


def get(doc_id: str) -> dict:
    """The full indexed document, or 404."""
    doc = get_search().get(doc_id)
    if doc is None:
        raise NotFound(f"Document '{doc_id}' not found")
    return doc


def open_path(doc: dict) -> str:
    """The document's file, after checking it still resolves inside its source root."""
    source = db.session.get(Source, doc["source_id"])
    if source is None:
        raise NotFound("The source of this document no longer exists")
    root = os.path.realpath(source.root_path)
    if not inside_allowed_roots(root):
        raise Forbidden("The source folder now resolves outside the allowed roots")
    real = os.path.realpath(doc["path"])
    if not within(real, root):
        raise Forbidden("The file now resolves outside its source folder")
    if not os.path.isfile(real):
        raise NotFound("File no longer exists")
    return real


# -- previews ------------------------------------------------------------------------------------

def text_page(doc: dict, q: str, page: int) -> dict:
    """One page of the document's text, HTML-escaped, with the query's matches in <em>."""
    content = doc.get("content") or ""
    pages = max(1, math.ceil(len(content) / PREVIEW_PAGE_CHARS))
    page = min(page, pages)
    chunk = content[(page - 1) * PREVIEW_PAGE_CHARS: page * PREVIEW_PAGE_CHARS]
    matcher = TermMatcher.from_query(parse_query(q)) if q.strip() else TermMatcher(())
    body = highlight_all(chunk, matcher)
    return {"html": body, "page": page, "pages": pages, "matches": body.count("<em>")}


def image_preview(doc: dict) -> tuple[bytes, str]:
    """The image (or a RAW file's embedded preview) scaled to PREVIEW_MAX_PX, as JPEG or PNG."""
    from PIL import Image

    path = open_path(doc)
    max_px = current_app.config["PREVIEW_MAX_PX"]
    if doc["type"] == "raw_image":
        img = _raw_image(path)
    else:
        img = Image.open(path)
        img.seek(0)
    img.thumbnail((max_px, max_px))
    out = io.BytesIO()
    if img.mode in ("RGBA", "LA", "P") and doc["type"] != "raw_image":
        img.save(out, "PNG")
        return out.getvalue(), "image/png"
    img.convert("RGB").save(out, "JPEG", quality=85)
    return out.getvalue(), "image/jpeg"


def _raw_image(path: str):
    import rawpy
    from PIL import Image

    try:
        with rawpy.imread(path) as raw:
            try:
                thumb = raw.extract_thumb()
            except (rawpy.LibRawNoThumbnailError, rawpy.LibRawUnsupportedThumbnailError):
                return Image.fromarray(raw.postprocess(half_size=True))
            if thumb.format == rawpy.ThumbFormat.JPEG:
                return Image.open(io.BytesIO(thumb.data))
            return Image.fromarray(thumb.data)
    except (rawpy.LibRawError, OSError) as exc:
        raise NotFound(f"No preview image in this RAW file ({type(exc).__name__})") from exc


def is_image(doc: dict) -> bool:
    """Whether the preview of this document is an image."""
    return doc["type"] in IMAGE_TYPES


# -- downloads -----------------------------------------------------------------------------------

def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt="trawl-download")


def download_link(doc: dict, user_id: int) -> dict:
    """A signed, short-lived URL bound to this document and user."""
    token = _serializer().dumps({"doc": doc["id"], "user": user_id, "type": "download"})
    return {"url": f"/api/documents/{quote(doc['id'])}/download?token={token}",
            "expires_in": current_app.config["DOWNLOAD_LINK_SECONDS"],
            "filename": doc["basename"]}


def check_download_token(token: str, doc_id: str) -> None:
    """401 for a missing, invalid or expired token; 403 for a token of another document."""
    if not token:
        raise Unauthorized("Missing download token")
    try:
        data = _serializer().loads(token, max_age=current_app.config["DOWNLOAD_LINK_SECONDS"])
    except SignatureExpired as exc:
        raise Unauthorized("Download link has expired") from exc
    except BadSignature as exc:
        raise Unauthorized("Invalid download token") from exc
    if not isinstance(data, dict) or data.get("type") != "download":
        raise Unauthorized("Invalid download token")
    if data.get("doc") != doc_id:
        raise Forbidden("This download link is for another document")
    if not isinstance(data.get("user"), int) or db.session.get(User, data["user"]) is None:
        raise Unauthorized("Invalid download token")  # the account that made the link is gone


def content_disposition(kind: str, filename: str) -> str:
    """RFC 6266 header with an ASCII fallback and the UTF-8 name."""
    fallback = filename.encode("ascii", "replace").decode().replace('"', "_").replace("?", "_")
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
