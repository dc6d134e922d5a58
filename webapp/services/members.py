"""What the page of a container shows of what it holds: an archive's members as a tree of
folders, an e-mail's attachments, and the e-mail itself as mail (its header block and body).

The members are read from the file records (a member's record names the file on disk that
holds it, `container`, and its path is `<container>!/<name>`), not from the search index: one
indexed query per page, whatever the archive holds.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import func, select

from webapp.extensions import db
from webapp.indexing.scanner import doc_id
from webapp.models import IndexedFile

MAX_LISTED = 500  # members listed on a container's page; the rest are counted ("N more")
SEPARATOR = "!/"  # between a container's path and a member's name inside it
_HEADER_LINE = re.compile(r"(?:From|To|Cc): .*")
_DIGITS = re.compile(r"(\d+)")
MAIL_HEADERS = (("from", "From"), ("to", "To"), ("cc", "Cc"))


def _like_prefix(prefix: str) -> str:
    """A LIKE pattern matching what starts with `prefix` (its wildcards escaped with `\\`)."""
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def listing(doc: dict) -> dict | None:
    """The members directly inside a container document (not those of a container inside it:
    its own page lists them), as a tree: {"tree", "total", "more", "cut"}; None when it holds
    none. The first MAX_LISTED in the container's own order are listed. A tree node is
    {"name", "folder": True, "children"} or {"name", "id", "type", "size", "status",
    "subject"}; folders first, then by name."""
    prefix = doc["path"] + SEPARATOR
    pattern = _like_prefix(prefix)
    direct = (
        IndexedFile.source_id == doc["source_id"],
        IndexedFile.container == doc["path"].split(SEPARATOR, 1)[0],
        IndexedFile.path.like(pattern, escape="\\"),
        ~IndexedFile.path.like(pattern[:-1] + "%" + SEPARATOR + "%", escape="\\"),
    )
    total = db.session.scalar(select(func.count()).select_from(IndexedFile).where(*direct)) or 0
    if not total:
        return None
    rows = db.session.execute(
        select(IndexedFile.path, IndexedFile.doc_type, IndexedFile.size_bytes, IndexedFile.status)
        .where(*direct)
        .order_by(IndexedFile.id)  # the container's own order (members are written in it)
        .limit(MAX_LISTED)
    ).all()
    return {
        "tree": _sorted(_tree(doc, prefix, rows)),
        "total": total,
        "more": max(0, total - len(rows)),
        "cut": bool((doc.get("metadata") or {}).get("cut")),
    }


def _tree(doc: dict, prefix: str, rows: list) -> dict[str, dict]:
    """The members' rows (path, type, size, status) as nested folders, unsorted."""
    subjects = _mailbox_subjects(doc, {path[len(prefix) :] for path, *_ in rows})
    root: dict[str, Any] = {"children": {}}
    for path, doc_type, size, status in rows:
        name = path[len(prefix) :]
        *folders, leaf = name.split("/")
        node = root
        for folder in folders:
            node = node["children"].setdefault(folder + "/", {"name": folder, "folder": True, "children": {}})
        node["children"][leaf] = {
            "name": leaf,
            "id": doc_id(doc["source_id"], path),
            "type": doc_type,
            "size": size,
            "status": status,
            "subject": subjects.get(name),
        }
    return root["children"]


def _sorted(children: dict[str, dict]) -> list[dict]:
    """A folder's entries: its folders first, then its files, each by name (case-blind, the
    numbers in it by value: `message-2` before `message-10`)."""
    out = []
    for node in sorted(children.values(), key=lambda n: (not n.get("folder"), _natural(n["name"]))):
        if node.get("folder"):
            node = {**node, "children": _sorted(node["children"])}
        out.append(node)
    return out


def _natural(name: str) -> list:
    """A sort key of a name with its numbers by value."""
    return [
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(name.lower()) if part
    ]


def _mailbox_subjects(doc: dict, names: set[str]) -> dict[str, str]:
    """The subjects of these messages of a mailbox (its text lists `message-N.eml Subject`
    in order), by member name."""
    if (doc.get("metadata") or {}).get("format") != "mbox":
        return {}
    subjects: dict[str, str] = {}
    for line in (doc.get("content") or "").splitlines():
        name, _, subject = line.partition(" ")
        if name in names:
            subjects[name] = subject
            if len(subjects) == len(names):
                break
    return subjects


def mail(doc: dict) -> dict:
    """An e-mail as mail: {"headers": [(label, value)], "subject", "date" (ISO, with its zone,
    or None), "body"}; the body is the text without the header lines it starts with."""
    meta = doc.get("metadata") or {}
    headers = [(label, str(meta[key])) for key, label in MAIL_HEADERS if meta.get(key)]
    lines = (doc.get("content") or "").split("\n")
    skip = 0
    while skip < len(lines) and _HEADER_LINE.fullmatch(lines[skip]):
        skip += 1
    if skip and skip < len(lines) and not lines[skip].strip():
        body = "\n".join(lines[skip + 1 :])
    else:
        body = doc.get("content") or ""
    return {"headers": headers, "subject": doc.get("title"), "date": meta.get("date"), "body": body}
