"""A document's file: opened after the path checks (a member read out of its container),
what a download sends, signed download links and their checks, the headers files go with."""

from __future__ import annotations

import mimetypes
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import IO
from urllib.parse import quote

from flask import current_app
from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from sqlalchemy import select

from webapp.exceptions import Forbidden, NotFound, Unauthorized
from webapp.extensions import db
from webapp.indexing import membercache
from webapp.indexing.extractors import (
    VANISHED_MESSAGE,
    ExtractionError,
    ExtractionSettings,
    copy_member,
)
from webapp.indexing.scanner import within
from webapp.models import IndexedFile, Source, User
from webapp.services import auth, tokens
from webapp.services.sources import inside_allowed_roots


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


def media_mimetype(doc: dict) -> str | None:
    """audio/... or video/... for a media file the browser may play, else None."""
    if doc["type"] != "media":
        return None
    guessed, _ = mimetypes.guess_type(doc["basename"], strict=False)
    return guessed if guessed and guessed.split("/")[0] in ("audio", "video") else None


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


# Sec-Fetch-Dest values of a request whose answer the browser shows as a page (top level, a
# frame, an <embed> or <object>): there a PDF opens in the browser's own viewer, which runs
# the file's JavaScript, whatever sandbox policy the response carries.
PAGE_DESTINATIONS = frozenset({"document", "iframe", "frame", "embed", "object", "fencedframe"})


def shown_as_page(headers: Mapping[str, str]) -> bool:
    """Whether a request for a file's bytes is a navigation the browser would render itself
    (by its Fetch Metadata headers); Trawl's own viewers fetch (pdf.js) or load media."""
    dest = (headers.get("Sec-Fetch-Dest") or "").lower()
    mode = (headers.get("Sec-Fetch-Mode") or "").lower()
    return dest in PAGE_DESTINATIONS or mode in ("navigate", "nested-navigate")


def content_disposition(kind: str, filename: str) -> str:
    """RFC 6266 header with an ASCII fallback and the UTF-8 name."""
    fallback = filename.encode("ascii", "replace").decode().replace('"', "_").replace("?", "_")
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
