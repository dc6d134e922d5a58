"""Small read-only queries the web UI needs beyond the API's services (filter choices, previews)."""

from __future__ import annotations

import html
import math
import os
import re
from collections.abc import Callable
from urllib.parse import unquote, urlsplit

from webapp.extensions import db
from webapp.indexing.scanner import doc_id, root_problem, within
from webapp.models import IndexedFile, Source, User
from webapp.services import previews, sources, status
from webapp.services.access import can_see, visible_sources

MAX_PAGES_SCANNED = 50  # looking for the first page with a match stops here (huge documents)
MAX_SIBLING_LINKS = 200  # relative links of a rendered document looked up
# a link of the sanitizer's output (it quotes attributes with " and escapes " inside them)
_HREF = re.compile(r'(<a\b[^>]*?\shref=")([^"]*)(")')


def source_choices(user: User) -> list[tuple[str, str]]:
    """(id, name) of every source the user may see, ordered by name, for the search filter."""
    visible = visible_sources(user)
    return [
        (sid, name)
        for sid, name in db.session.query(Source.id, Source.name).order_by(Source.name, Source.id)
        if can_see(visible, sid)
    ]


def _records(user: User):
    """The file records of the sources the user may see."""
    query = db.session.query(IndexedFile)
    visible = visible_sources(user)
    return query if visible is None else query.filter(IndexedFile.source_id.in_(visible))


def document_types(user: User) -> list[str]:
    """The document types in the sources the user may see, sorted (the filter's choices)."""
    rows = _records(user).with_entities(IndexedFile.doc_type).distinct()
    return sorted({t for (t,) in rows if t})


def document_total(user: User) -> int:
    """How many files the database records across the sources the user may see."""
    return _records(user).count()


def first_match_page(doc: dict, q: str) -> int:
    """The first preview page holding a match of q (1 when none is found)."""
    content = doc.get("content") or ""
    pages = max(1, math.ceil(len(content) / previews.PREVIEW_PAGE_CHARS))
    if not q.strip() or pages == 1:
        return 1
    for page in range(1, min(pages, MAX_PAGES_SCANNED) + 1):
        if previews.text_page(doc, q, page)["matches"]:
            return page
    return 1


def source_rows(user: User) -> list[dict]:
    """Per source the user may see, ordered by name: its API object ("source") and its status
    object ("info")."""
    by_source = sources.counts()
    visible = visible_sources(user)
    rows = []
    for source in db.session.query(Source).order_by(Source.name, Source.id):
        if not can_see(visible, source.id):
            continue
        counts = by_source.get(source.id, {})
        rows.append({"source": sources.to_json(source, counts), "info": status.source_status(source, counts)})
    return rows


def folder_problems(user: User) -> list[dict]:
    """The visible sources whose folder cannot be read now (missing, unreadable, moved outside
    the allowed roots): name, folder and why, for the status badge."""
    visible = visible_sources(user)
    roots = sources.allowed_roots()
    out = []
    for source in db.session.query(Source).order_by(Source.name, Source.id):
        if can_see(visible, source.id):
            problem = root_problem(source.root_path, roots)
            if problem:
                out.append(
                    {"id": source.id, "name": source.name, "root_path": source.root_path, "problem": problem}
                )
    return out


def link_siblings(rendered: str, doc: dict, page_url: Callable[[str], str]) -> str:
    """Relative links of a rendered document (`[setup](docs/setup.md)`) made to go to the page
    (`page_url(doc id)`) of that file beside it in the same source. A relative link to a file
    that is not indexed, or that leaves the source's folder, stops being a link (it could only
    lead to an error) and says so in its title."""
    source = db.session.get(Source, doc["source_id"])
    folder = None if "!/" in doc["path"] else os.path.dirname(doc["path"])  # archive members:
    looked = 0  # no folder

    def retarget(match: re.Match) -> str:
        nonlocal looked
        href = html.unescape(match.group(2))
        parts = urlsplit(href)
        if parts.scheme or parts.netloc or href.startswith(("/", "#")) or not parts.path:
            return match.group(0)  # absolute, another site, or an anchor of this page
        looked += 1
        path = os.path.normpath(os.path.join(folder or "/", unquote(parts.path)))
        found = (
            source is not None
            and folder is not None
            and looked <= MAX_SIBLING_LINKS
            and within(path, source.root_path)
            and db.session.query(IndexedFile.id).filter_by(source_id=source.id, path=path).first() is not None
        )
        if not found:
            opening = match.group(1)[: -len('href="')]
            return (
                f'{opening}title="{html.escape(href)} is not in the index" '
                f'data-missing-link="{html.escape(href)}"'
            )
        url = page_url(doc_id(source.id, path)) + (f"#{parts.fragment}" if parts.fragment else "")
        return match.group(1) + html.escape(url) + match.group(3)

    return _HREF.sub(retarget, rendered)
