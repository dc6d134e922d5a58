"""Identical texts in one source: the hash of a file's extracted text, and which of the files
that share it is the primary (the one listed and embedded; the others are its copies).

A text's primary in a source is the record of the smallest path among those holding it, a file
on disk before a member of an archive or mailbox (people look for the file itself): a rule with
no state of its own, so the search index's `copy` flags (search/__init__.py, `Doc.copy`)
can always be told from the records. The scan's coordinator, the only writer of its source,
keeps them true: before a write it plans the flags (`plan`), the documents it writes carry
theirs, and `apply` rewrites the few documents not written whose flag changed (a primary gone,
or a new copy that sorts before it). Copies in other sources are not collapsed here: each
source's users see its primary (see docs/architecture.md, "Copies").
"""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field

from flask import Flask
from sqlalchemy import select, update

from webapp.extensions import db
from webapp.indexing.scanner import MEMBER_SEPARATOR, doc_id
from webapp.models import IndexedFile
from webapp.runtime import get_meaning, get_search
from webapp.search.tidy import METADATA_KINDS

CHUNK = 500  # values per IN (...): every database accepts that many parameters


# Types whose text is a summary of the file's metadata or a list of what it holds (an image's
# format and size, a song's tags, an archive's member names), not its contents: a hundred
# different screenshots read alike, so they are never copies of each other.
DESCRIBED_TYPES = METADATA_KINDS | {"archive", "file"}


def primary_order(path: str) -> tuple[bool, str]:
    """How the holders of one text are ordered, the primary first: files on disk before
    members of containers, then by path."""
    return MEMBER_SEPARATOR in path, path


def text_hash(title: str | None, content: str | None, doc_type: str) -> str | None:
    """SHA-256 of a document's text as indexed (title and content, NFC, runs of white space as
    one space); None when it has no content of its own (an empty file, a title alone, a
    described type): such a document is a copy of nothing."""
    if doc_type in DESCRIBED_TYPES or not (content or "").strip():
        return None
    text = " ".join(f"{title or ''}\n{content}".split())
    text = unicodedata.normalize("NFC", text)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _chunks(values: list) -> Iterable[list]:
    for i in range(0, len(values), CHUNK):
        yield values[i : i + CHUNK]


def hashes_of(source_id: str, paths: list[str]) -> dict[str, str]:
    """{path: text hash} of the source's records of these paths that have one."""
    found: dict[str, str] = {}
    for chunk in _chunks(paths):
        rows = db.session.execute(
            select(IndexedFile.path, IndexedFile.text_hash).where(
                IndexedFile.source_id == source_id,
                IndexedFile.path.in_(chunk),
                IndexedFile.text_hash.is_not(None),
            )
        )
        found.update({p: h for p, h in rows})
    return found


def holders(source_id: str, hashes: list[str]) -> dict[str, set[str]]:
    """{text hash: paths} of the source's records holding these texts."""
    found: dict[str, set[str]] = {}
    for chunk in _chunks(hashes):
        rows = db.session.execute(
            select(IndexedFile.text_hash, IndexedFile.path).where(
                IndexedFile.text_hash.in_(chunk), IndexedFile.source_id == source_id
            )
        )
        for h, p in rows:
            found.setdefault(h, set()).add(p)
    return found


@dataclass
class Plan:
    """The copy flags of one write: `hidden`, the written paths that are copies; `changed`,
    the paths not written whose flag changes (True: now a copy, False: now the primary)."""

    hidden: set[str] = field(default_factory=set)
    changed: dict[str, bool] = field(default_factory=dict)


def plan(source_id: str, removed: list[str], written: dict[str, str | None]) -> Plan:
    """The flags after the records of `removed` go and those of `written` ({path: text hash})
    are written, from the records as they are now (before the write)."""
    old = hashes_of(source_id, removed + list(written))
    affected = set(old.values()) | {h for h in written.values() if h}
    before = holders(source_id, sorted(affected))
    after = {h: set(paths) for h, paths in before.items()}
    for path, h in old.items():
        after[h].discard(path)
    for path, h in written.items():
        if h:
            after.setdefault(h, set()).add(path)
    out = Plan()
    for h, paths in after.items():
        primary = min(paths, key=primary_order) if paths else None
        out.hidden |= {p for p in paths if p != primary and p in written}
        was = min(before[h], key=primary_order) if before.get(h) else None
        if primary == was:
            continue
        if primary is not None and primary not in written:
            out.changed[primary] = False
        if was is not None and was in paths and was not in written:
            out.changed[was] = True
    return out


def apply(app: Flask | None, source_id: str, planned: Plan) -> None:
    """After the write: flag the documents not written whose role changed. A new primary is
    read for meaning again (a copy was marked done without vectors); a new copy's vectors go."""
    if not planned.changed:
        return
    get_search(app).mark_copies({doc_id(source_id, p): flag for p, flag in planned.changed.items()})
    hidden = [p for p, flag in planned.changed.items() if flag]
    shown = [p for p, flag in planned.changed.items() if not flag]
    if hidden:
        get_meaning(app).delete_ids([doc_id(source_id, p) for p in hidden])
    for chunk in _chunks(shown):
        db.session.execute(
            update(IndexedFile)
            .where(IndexedFile.source_id == source_id, IndexedFile.path.in_(chunk))
            .values(embedded=False)
        )
    db.session.commit()


def copies_among(source_id: str, rows: list) -> set[str]:
    """The paths of these records (with `path` and `text_hash`) that are copies: a record of
    the same text with a smaller path is in the source (the meaning phase reads it once)."""
    hashes = sorted({r.text_hash for r in rows if r.text_hash})
    if not hashes:
        return set()
    first = {h: min(paths, key=primary_order) for h, paths in holders(source_id, hashes).items()}
    return {r.path for r in rows if r.text_hash and first.get(r.text_hash, r.path) < r.path}


def read_elsewhere(source_id: str, rows: list) -> dict[str, list[str]]:
    """{path: ids of the primaries of its text in other sources, read for meaning} of these
    records (with `path` and `text_hash`): their vectors are this text's too."""
    by_hash: dict[str, list[str]] = {}
    seen: set[tuple[str, str]] = set()  # (hash, source): its first path is its primary
    hashes = sorted({r.text_hash for r in rows if r.text_hash})
    for chunk in _chunks(hashes):
        found = db.session.execute(
            select(IndexedFile.text_hash, IndexedFile.source_id, IndexedFile.path).where(
                IndexedFile.text_hash.in_(chunk),
                IndexedFile.source_id != source_id,
                IndexedFile.embedded.is_(True),
            )
        )  # sorted here: an ORDER BY path would have SQLite walk a path index, not the hashes
        for h, s, p in sorted(found, key=lambda row: primary_order(row[2])):
            if (h, s) not in seen:
                seen.add((h, s))
                by_hash.setdefault(h, []).append(doc_id(s, p))
    return {r.path: by_hash[r.text_hash] for r in rows if r.text_hash in by_hash}
