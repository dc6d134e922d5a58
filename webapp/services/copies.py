"""Copies: the other files that hold a result's text (same text hash), among the sources the
asker may see: the `copies` of search results, similar documents and the document page.

Within a source the index lists a text once, by its primary (indexing/copies.py); this names
the others, and those in other sources the asker sees. What the asker may not see is not named.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import select

from webapp.extensions import db
from webapp.indexing.scanner import doc_id
from webapp.models import IndexedFile

MAX_COPIES = 100  # named per result: a text held by thousands of files names the first 100
CHUNK = 500  # values per IN (...)


def _source_of(ident: str) -> str:
    return ident.rsplit("--", 1)[0]


def _hashes(results: Iterable[dict]) -> dict[str, str]:
    """{document id: text hash} of these results (those with a text hash)."""
    wanted = {(_source_of(r["id"]), r["path"]): r["id"] for r in results}
    found: dict[str, str] = {}
    keys = list(wanted)
    for i in range(0, len(keys), CHUNK):
        chunk = keys[i : i + CHUNK]
        rows = db.session.execute(
            select(IndexedFile.source_id, IndexedFile.path, IndexedFile.text_hash).where(
                IndexedFile.source_id.in_({s for s, _ in chunk}),
                IndexedFile.path.in_({p for _, p in chunk}),
                IndexedFile.text_hash.is_not(None),
            )
        )
        found.update({wanted[(s, p)]: h for s, p, h in rows if (s, p) in wanted})
    return found


def _holders(hashes: set[str], visible: set[str] | None) -> dict[str, list[tuple[str, str]]]:
    """{text hash: [(source id, path)...]} of the records holding these texts, in the sources
    `visible` (None: all), by path."""
    found: dict[str, list[tuple[str, str]]] = {}
    ordered = sorted(hashes)
    for i in range(0, len(ordered), CHUNK):
        query = select(IndexedFile.text_hash, IndexedFile.source_id, IndexedFile.path).where(
            IndexedFile.text_hash.in_(ordered[i : i + CHUNK])
        )
        if visible is not None:
            query = query.where(IndexedFile.source_id.in_(sorted(visible)))
        # no ORDER BY: SQLite would then walk the source's (source_id, path) index instead
        # of looking the hashes up
        for h, s, p in db.session.execute(query):
            found.setdefault(h, []).append((s, p))
    return {h: sorted(places, key=lambda sp: (sp[1], sp[0])) for h, places in found.items()}


def attach(results: list[dict], visible: set[str] | None) -> list[dict]:
    """Set `copies` on each result: [{"id", "path"}] of the other files of its text that
    `visible` (the asker's sources, None: all) holds; [] when none. Returns the results."""
    hashes = _hashes(results)
    holders = _holders(set(hashes.values()), visible) if hashes else {}
    for result in results:
        own = (_source_of(result["id"]), result["path"])
        others = [
            {"id": doc_id(s, p), "path": p}
            for s, p in holders.get(hashes.get(result["id"], ""), [])
            if (s, p) != own and p != result["path"]  # the same file under an overlapping source
        ]
        result["copies"] = others[:MAX_COPIES]
    return results


def of_document(doc: dict, visible: set[str] | None) -> list[dict]:
    """The `copies` of one document (its page's "also at")."""
    return attach([{"id": doc["id"], "path": doc["path"]}], visible)[0]["copies"]


def listed_once(results: list[dict], visible: set[str] | None, besides: dict | None = None) -> list[dict]:
    """The results with each text once (the first, best-placed, stays) and none of the text of
    the document `besides` (its copies are not like it, they are it), `copies` set."""
    hashes = _hashes([*results, *([besides] if besides else [])])
    seen = {hashes[besides["id"]]} if besides and besides["id"] in hashes else set()
    kept = []
    for result in results:
        h = hashes.get(result["id"])
        if h is None or h not in seen:
            kept.append(result)
            if h is not None:
                seen.add(h)
    return attach(kept, visible)
