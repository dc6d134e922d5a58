"""Check that records, search index, vectors and disk agree for a source, and repair what does
not."""

from __future__ import annotations

from flask import current_app
from sqlalchemy import update

from webapp.extensions import db
from webapp.indexing import copies, thumbstore
from webapp.indexing.background import PhaseInfo
from webapp.indexing.embed_phase import KIND
from webapp.indexing.globs import PatternSet
from webapp.indexing.healing import readable_again
from webapp.indexing.records import delete_records
from webapp.indexing.scanner import doc_id, root_problem, walk
from webapp.indexing.state import writer_lock
from webapp.models import IndexedFile, Source, get_source
from webapp.runtime import get_meaning, get_search

SAMPLE = 20


def verify_source(source_id: str, repair: bool = True) -> dict:
    """Counts of each disagreement (with a sample of paths); repaired when asked.

    Repair deletes orphan documents and records of vanished files, and drops records whose
    document is missing so that the next scan extracts those files again. Failed records of
    files that vanished or were unreadable but now read are reported; the next scan retries
    them by itself. Vector files that cannot be read (every byte checked against its
    checksum) are dropped and the source's documents embedded again.
    """
    source = get_source(source_id)
    problem = root_problem(source.root_path, current_app.config["ALLOWED_ROOTS"])
    if problem:
        return {"source_id": source_id, "problems": 1, "root": problem, "repaired": False}
    found = _disagreements(source)
    report = {
        "source_id": source.id,
        "records": found.pop("records"),
        "documents": found.pop("documents"),
        "files_on_disk": found.pop("files_on_disk"),
        **{kind: len(paths) for kind, paths in found.items()},
        "sample": {kind: paths[:SAMPLE] for kind, paths in found.items()},
        "vectors": _vector_problem(source),
    }
    report["problems"] = sum(len(paths) for paths in found.values()) + bool(report["vectors"])
    report["repaired"] = False
    if repair and report["problems"]:
        if report["vectors"]:
            rebuild_vectors(source.id)
        _repair(
            source.id,
            found["orphan_documents"],
            found["records_of_vanished_files"],
            found["records_without_document"],
        )
        report["repaired"] = True
        report["note"] = _repair_note(found, bool(report["vectors"]))
    return report


def _disagreements(source: Source) -> dict:
    """The counts of records, documents and files on disk, and the paths (or ids) of each kind
    of disagreement between them."""
    # a member's record (`a.zip!/b.txt`) stands or falls with the file on disk holding it
    holders = dict(db.session.query(IndexedFile.path, IndexedFile.container).filter_by(source_id=source.id))
    records = set(holders)
    by_id = {doc_id(source.id, p): p for p in records}
    indexed = get_search().ids(source.id)
    patterns = PatternSet(source.include_patterns, source.exclude_patterns)
    on_disk = {f.path for f in walk(source.root_path, patterns, lambda path, msg: None)}
    return {
        "records": len(records),
        "documents": len(indexed),
        "files_on_disk": len(on_disk),
        "orphan_documents": sorted(indexed - set(by_id)),
        "records_without_document": sorted(by_id[i] for i in set(by_id) - indexed),
        "records_of_vanished_files": sorted(
            p for p, holder in holders.items() if (holder or p) not in on_disk
        ),
        "files_not_indexed": sorted(on_disk - records),
        "failed_files_now_readable": readable_again(source.id),  # the next scan extracts them again
    }


def _repair_note(found: dict, vectors: bool) -> str:
    """What a repair left to the next scan, and whether the vectors were dropped."""
    rescan = (
        found["files_not_indexed"] or found["records_without_document"] or found["failed_files_now_readable"]
    )
    note = (
        "Orphans and vanished files removed; run a scan to index the files "
        "not indexed and retry the failed files that now read"
        if rescan
        else ""
    )
    return note + ("; the vectors were dropped: the source is embedded again" if vectors else "")


def _repair(source_id: str, orphans: list[str], vanished: list[str], missing: list[str]) -> None:
    search = get_search()
    stale = sorted(set(vanished) | set(missing))
    planned = copies.plan(source_id, stale, {})  # a copy of a vanished primary is listed again
    gone = orphans + [doc_id(source_id, p) for p in vanished]
    if gone:
        search.delete_ids(gone)
        get_meaning().delete_ids(gone)
        thumbstore.remove(current_app.config["DATA_DIR"], gone)
    if stale:
        delete_records(source_id, stale)
        copies.apply(None, source_id, planned)


def _vector_problem(source: Source) -> str | None:
    """Why the source's vector files cannot be read (every byte checked), or None."""
    return get_meaning().check(source.id) if source.semantic else None


def rebuild_vectors(source_id: str) -> None:
    """Drop the source's vectors and mark its documents to be embedded again (a vector file was
    unreadable); the caller queues the phase."""
    with writer_lock(source_id):  # after an embedding write in progress, not within
        get_meaning().delete_source(source_id)
        db.session.execute(
            update(IndexedFile).where(IndexedFile.source_id == source_id).values(embedded=False)
        )
        db.session.commit()
    PhaseInfo(KIND, source_id).ran(0, 0)  # the error that stopped the phase is gone
