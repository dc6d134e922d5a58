"""Documents: search, full document, previews, download links and downloads of the original file."""

from __future__ import annotations

import html
import math
import mimetypes
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from typing import IO
from urllib.parse import quote

from flask import current_app
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from sqlalchemy import select

from webapp.exceptions import (
    Forbidden,
    NotFound,
    QuerySyntaxError,
    Unauthorized,
    Unavailable,
    Unprocessable,
)
from webapp.extensions import db
from webapp.indexing import membercache, thumbstore
from webapp.indexing.extractors import (
    VANISHED_MESSAGE,
    ExtractionError,
    ExtractionSettings,
    copy_member,
)
from webapp.indexing.scanner import within
from webapp.metrics import search_duration
from webapp.models import IndexedFile, Source, User
from webapp.previews.markdown import render_markdown
from webapp.previews.render import PreviewLimits
from webapp.runtime import get_previews, get_search
from webapp.search import SearchPage, SearchQuery
from webapp.search.query import TermMatcher, parse_query
from webapp.search.snippets import highlight_all
from webapp.search.syntax import parse_syntax
from webapp.services import auth, meaning, search_args, tokens
from webapp.services.access import can_see, visible_sources
from webapp.services.sources import inside_allowed_roots

PREVIEW_PAGE_CHARS = 20_000
IMAGE_TYPES = {"image", "raw_image"}
# a tag of the sanitizer's output: it always quotes attributes with " and escapes " inside them
_TAG = re.compile(r'(<(?:[^>"]|"[^"]*")*>)')
MATCH_OPEN = '<mark class="match">'


def search(args: dict, user: User | None) -> dict:
    """Run a search request loaded by search_args.load (or the API's schema) over the sources
    `user` may see (None: all); 400 when its query language, type or source is bad. The
    response echoes limit and offset."""
    with search_duration.labels(current_app.config["SEARCH_BACKEND"]).time():
        query: SearchQuery = search_args.to_query(args, visible_sources(user))
        page: SearchPage = meaning.search(query, search_args.semantic_ratio(args))
    results = once_per_file(page.results)
    for result in results:
        result["thumbnail_url"] = thumbnail_url(result["id"])
    out = {
        "results": results,
        "total": page.total,
        "limit": query.limit,
        "offset": query.offset,
        "processing_time_ms": page.processing_time_ms,
    }
    if query.facets:
        out["facet_distribution"] = page.facet_distribution or {}
    return out


def once_per_file(results: list[dict]) -> list[dict]:
    """Each file once: sources allowed to overlap index the same file (the same real path:
    roots are stored resolved) under each of them; the first, best-placed hit stays."""
    seen: set[str] = set()
    kept = []
    for result in results:
        if result["path"] not in seen:
            seen.add(result["path"])
            kept.append(result)
    return kept


def get(doc_id: str, user: User | None) -> dict:
    """The full indexed document, or 404 (also when `user` may not see its source)."""
    doc = get_search().get(doc_id)
    if doc is None or not can_see(visible_sources(user), doc["source_id"]):
        raise NotFound(f"Document '{doc_id}' not found")
    return doc


def open_path(doc: dict) -> str:
    """The document's file (a member's: its container's), after checking it still resolves
    inside its source root and, for a member, that its container did not change since."""
    container = _container(doc)
    source = db.session.get(Source, doc["source_id"])
    if source is None:
        raise NotFound("The source of this document no longer exists")
    root = os.path.realpath(source.root_path)
    if not inside_allowed_roots(root):
        raise Forbidden("The source folder now resolves outside the allowed roots")
    real = os.path.realpath(container.path if container else doc["path"])
    if not within(real, root):
        raise Forbidden("The file now resolves outside its source folder")
    if not os.path.isfile(real):
        raise NotFound(VANISHED_MESSAGE)
    if container is not None:
        st = os.stat(real)
        if (st.st_size, st.st_mtime_ns) != (container.size_bytes, container.mtime_ns):
            raise NotFound(VANISHED_MESSAGE)  # the member we indexed may be gone from it
    return real


def _container(doc: dict) -> IndexedFile | None:
    """The record of the file on disk holding a member; None for a plain file."""
    if not doc.get("container_id"):
        return None
    outer = db.session.execute(
        select(IndexedFile.container).where(
            IndexedFile.source_id == doc["source_id"], IndexedFile.path == doc["path"]
        )
    ).scalar()
    record = (
        outer
        and db.session.execute(
            select(IndexedFile).where(IndexedFile.source_id == doc["source_id"], IndexedFile.path == outer)
        ).scalar()
    )
    if not record:
        raise NotFound(VANISHED_MESSAGE)
    return record


def open_file(doc: dict) -> IO[bytes]:
    """The document's bytes to send: its file, or a member read out of its container (through
    any nesting) into an unnamed temporary file under DATA_DIR; the container is only read."""
    real = open_path(doc)
    container = _container(doc)
    if container is None:
        return open(real, "rb")
    settings = ExtractionSettings.from_config(current_app.config)
    os.makedirs(settings.spool_dir, exist_ok=True)
    names = doc["path"][len(container.path) + 2 :].split("!/")
    held = None  # the temporary file of the level being read (a nested container)
    try:
        for depth, name in enumerate(names):
            last = depth == len(names) - 1
            out: IO[bytes] = (
                tempfile.TemporaryFile(dir=settings.spool_dir)
                if last
                else tempfile.NamedTemporaryFile(dir=settings.spool_dir, suffix="-" + os.path.basename(name))
            )
            try:
                if not copy_member(held.name if held else real, name, out, settings):
                    raise NotFound(VANISHED_MESSAGE)
            except ExtractionError as exc:
                out.close()
                raise NotFound(f"{VANISHED_MESSAGE}: {exc}") from exc
            except NotFound:
                out.close()
                raise
            if held is not None:
                held.close()
            held = out
        held.seek(0)
        return held
    except BaseException:
        if held is not None:
            held.close()
        raise


def download_target(doc: dict) -> str | IO[bytes]:
    """What a download sends: the file's path, or the path of a member's copy read out of its
    container once (membercache: Range requests then answer 206/416 as on plain files); the
    member's bytes when the cache is off."""
    if not doc.get("container_id"):
        return open_path(doc)
    open_path(doc)  # the container still resolves inside its source and did not change
    container = _container(doc)
    cfg = current_app.config
    path = membercache.get(
        cfg["DATA_DIR"],
        doc["id"],
        f"{container.size_bytes}-{container.mtime_ns}",
        lambda: open_file(doc),
        cfg["MEMBER_CACHE_MB"] * 1024 * 1024,
    )
    return path if path is not None else open_file(doc)


def local_copy(doc: dict) -> tuple[str, Callable[[], None]]:
    """A path to the document's bytes for a renderer, and what to call when done with it."""
    if not doc.get("container_id"):
        return open_path(doc), lambda: None
    with open_file(doc) as data:
        settings = ExtractionSettings.from_config(current_app.config)
        fd, path = tempfile.mkstemp(dir=settings.spool_dir, suffix="-" + doc["basename"])
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(data, out)
    return path, lambda: os.unlink(path)


# -- previews ------------------------------------------------------------------------------------


def text_page(doc: dict, q: str, page: int) -> dict:
    """One page of the document's text, HTML-escaped, with the query's matches in <em>."""
    content = doc.get("content") or ""
    pages = max(1, math.ceil(len(content) / PREVIEW_PAGE_CHARS))
    page = min(page, pages)
    chunk = content[(page - 1) * PREVIEW_PAGE_CHARS : page * PREVIEW_PAGE_CHARS]
    body = highlight_all(chunk, _matcher(q))
    return {"html": body, "page": page, "pages": pages, "matches": body.count("<em>")}


def _free_text(q: str) -> str:
    """A search's free text (not -exclusions nor filter values)."""
    try:
        return parse_syntax(q).text
    except QuerySyntaxError:  # a half-typed term: mark the words as written
        return q


def _matcher(q: str) -> TermMatcher:
    """What to mark for a search's q: its free text."""
    text = _free_text(q)
    return TermMatcher.from_query(parse_query(text)) if text.strip() else TermMatcher(())


def image_preview(doc: dict) -> tuple[bytes, str]:
    """The image (or a RAW file's embedded preview) scaled to PREVIEW_MAX_PX, as JPEG or PNG.

    Decoded in a child process with pixel, memory and time bounds; an image that is too large,
    damaged or unreadable raises PreviewRefused (422), a full set of preview slots 503.
    """
    path, done = local_copy(doc)
    try:
        return get_previews().render(path, doc["type"], _limits())
    finally:
        done()


def is_image(doc: dict) -> bool:
    """Whether the preview of this document is an image."""
    return doc["type"] in IMAGE_TYPES


def preview_kind(doc: dict) -> str:
    """How the document page shows this document: image, pdf (drawn pages), markdown, audio,
    video, or text (the extracted text, paged and highlighted)."""
    if is_image(doc):
        return "image"
    if doc["type"] == "pdf" and (doc.get("metadata") or {}).get("page_count"):
        return "pdf"
    if doc["type"] == "markdown":
        return "markdown"
    mimetype = media_mimetype(doc)
    return mimetype.split("/")[0] if mimetype else "text"


# -- thumbnails ----------------------------------------------------------------------------------


def thumbnail_url(doc_id: str) -> str | None:
    """The API path of a document's thumbnail, or None when it has none."""
    if not thumbstore.exists(current_app.config["DATA_DIR"], doc_id):
        return None
    return f"/api/documents/{quote(doc_id)}/thumbnail"


def thumbnail_file(doc_id: str, user: User | None) -> str:
    """The thumbnail file of an indexed document; 404 when the document (for `user`) or its
    thumbnail is missing."""
    get(doc_id, user)
    path = thumbstore.path_for(current_app.config["DATA_DIR"], doc_id)
    if path is None or not os.path.isfile(path):
        raise NotFound("This document has no thumbnail")
    return path


# -- PDF pages, Markdown, media ------------------------------------------------------------------


def page_count(doc: dict) -> int:
    """Pages of a PDF as counted at extraction (0 when unknown)."""
    count = (doc.get("metadata") or {}).get("page_count")
    return count if isinstance(count, int) and count > 0 else 0


def pdf_page_image(doc: dict, page: int, q: str) -> tuple[bytes, str]:
    """Page `page` of a PDF drawn as a JPEG with the matches of q highlighted (whole words the
    search's matcher accepts, as in the text preview); drawn in a capped child like image
    previews (422 for a page that does not exist or cannot be drawn)."""
    path, done = local_copy(doc)
    try:
        return get_previews().render(path, "pdf", _limits(), page=page, matcher=_matcher(q))
    finally:
        done()


def first_pdf_page(doc: dict, q: str) -> int:
    """The first page of a PDF holding a match of q (1 without q, or when the PDF cannot be
    read: the page's own image then says why)."""
    matcher = _matcher(q)
    if not matcher.terms or page_count(doc) <= 1:
        return 1
    path, done = local_copy(doc)
    try:
        return get_previews().first_pdf_page(path, matcher, _limits())
    except (Unprocessable, Unavailable):
        return 1
    finally:
        done()


def pdf_hits(doc: dict, q: str) -> dict:
    """For the PDF viewer: every page's size in points, and the pages holding a match of q
    with their hit boxes as fractions of the page (previews/pdfhits.py); read in a capped
    child (422 when the PDF cannot be read)."""
    path, done = local_copy(doc)
    try:
        return get_previews().pdf_hits(path, _matcher(q), _limits())
    finally:
        done()


def markdown_html(doc: dict, q: str) -> dict | None:
    """The document's Markdown rendered and sanitized, the matches of q in <mark class="match">
    (text between tags only); None when it is too long to render."""
    rendered = render_markdown(doc.get("content") or "")
    if rendered is None or not q.strip():
        return None if rendered is None else {"html": rendered, "matches": 0}
    matcher = _matcher(q)
    parts = _TAG.split(rendered)
    for i in range(0, len(parts), 2):  # even items are text (escaped by the sanitizer)
        if parts[i]:
            marked = highlight_all(html.unescape(parts[i]), matcher)
            parts[i] = marked.replace("<em>", MATCH_OPEN).replace("</em>", "</mark>")
    body = "".join(parts)
    return {"html": body, "matches": body.count(MATCH_OPEN)}


def media_mimetype(doc: dict) -> str | None:
    """audio/... or video/... for a media file the browser may play, else None."""
    if doc["type"] != "media":
        return None
    guessed, _ = mimetypes.guess_type(doc["basename"], strict=False)
    return guessed if guessed and guessed.split("/")[0] in ("audio", "video") else None


def _limits() -> PreviewLimits:
    cfg = current_app.config
    return PreviewLimits(
        max_side=cfg["PREVIEW_MAX_PX"],
        max_pixels=cfg["PREVIEW_MAX_PIXELS"],
        memory_mb=cfg["PREVIEW_MEMORY_MB"],
        timeout=cfg["PREVIEW_TIMEOUT"],
    )


# -- downloads -----------------------------------------------------------------------------------


def _serializer() -> URLSafeTimedSerializer:
    return URLSafeTimedSerializer(current_app.config["SECRET_KEY"], salt="trawl-download")


def download_link(doc: dict, user: User, session_id: str) -> dict:
    """A signed, short-lived URL bound to this document, this user's credential stamp and the
    session that asked for it: logout or a password change ends the link too."""
    token = _serializer().dumps(
        {
            "doc": doc["id"],
            "user": user.id,
            "type": "download",
            "sid": session_id,
            "stp": auth.credential_stamp(user),
        }
    )
    return {
        "url": f"/api/documents/{quote(doc['id'])}/download?token={token}",
        "expires_in": current_app.config["DOWNLOAD_LINK_SECONDS"],
        "filename": doc["basename"],
    }


def check_download_token(token: str, doc_id: str) -> User:
    """The user who made the link; 401 for a missing, invalid or expired token, an ended
    session or API token, or a disabled account; 403 for another document."""
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
    user = db.session.get(User, data["user"]) if isinstance(data.get("user"), int) else None
    if user is None:
        raise Unauthorized("Invalid download token")  # the account that made the link is gone
    sid = data.get("sid")
    if (
        not isinstance(sid, str)
        or not sid
        or auth.session_revoked(sid)
        or not user.active
        or data.get("stp") != auth.credential_stamp(user)
        or not tokens.still_valid(sid)
    ):
        raise Unauthorized("Download link ended with the session that made it")
    return user


def content_disposition(kind: str, filename: str) -> str:
    """RFC 6266 header with an ASCII fallback and the UTF-8 name."""
    fallback = filename.encode("ascii", "replace").decode().replace('"', "_").replace("?", "_")
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
