"""Check that records, search index and disk agree for a source, and repair what does not."""

from __future__ import annotations

from flask import current_app

from webapp.extensions import db
from webapp.indexing import copies, thumbstore
from webapp.indexing.globs import PatternSet
from webapp.indexing.healing import readable_again
from webapp.indexing.records import delete_records
from webapp.indexing.scanner import doc_id, root_problem, walk
from webapp.models import IndexedFile, get_source
from webapp.runtime import get_meaning, get_search

SAMPLE = 20


def verify_source(source_id: str, repair: bool = True) -> dict:
    """Counts of each disagreement (with a sample of paths); repaired when asked.

    Repair deletes orphan documents and records of vanished files, and drops records whose
    document is missing so that the next scan extracts those files again. Failed records of
    files that vanished or were unreadable but now read are reported; the next scan retries
    them by itself.
    """
    source = get_source(source_id)
    problem = root_problem(source.root_path, current_app.config["ALLOWED_ROOTS"])
    if problem:
        return {"source_id": source_id, "problems": 1, "root": problem, "repaired": False}
    # a member's record (`a.zip!/b.txt`) stands or falls with the file on disk holding it
    holders = dict(db.session.query(IndexedFile.path, IndexedFile.container).filter_by(source_id=source.id))
    records = set(holders)
    by_id = {doc_id(source.id, p): p for p in records}
    indexed = get_search().ids(source.id)
    patterns = PatternSet(source.include_patterns, source.exclude_patterns)
    on_disk = {f.path for f in walk(source.root_path, patterns, lambda path, msg: None)}
    orphans = sorted(indexed - set(by_id))
    missing_docs = sorted(by_id[i] for i in set(by_id) - indexed)
    vanished = sorted(p for p, holder in holders.items() if (holder or p) not in on_disk)
    unrecorded = sorted(on_disk - records)
    healed = readable_again(source.id)  # the next scan extracts them again
    report = {
        "source_id": source.id,
        "records": len(records),
        "documents": len(indexed),
        "files_on_disk": len(on_disk),
        "orphan_documents": len(orphans),
        "records_without_document": len(missing_docs),
        "records_of_vanished_files": len(vanished),
        "files_not_indexed": len(unrecorded),
        "failed_files_now_readable": len(healed),
        "sample": {
            "orphan_documents": orphans[:SAMPLE],
            "records_without_document": missing_docs[:SAMPLE],
            "records_of_vanished_files": vanished[:SAMPLE],
            "files_not_indexed": unrecorded[:SAMPLE],
            "failed_files_now_readable": healed[:SAMPLE],
        },
    }
    report["problems"] = len(orphans) + len(missing_docs) + len(vanished) + len(unrecorded) + len(healed)
    report["repaired"] = False
    if repair and report["problems"]:
        _repair(source.id, orphans, vanished, missing_docs)
        report["repaired"] = True
        report["note"] = (
            (
                "Orphans and vanished files removed; run a scan to index the files "
                "not indexed and retry the failed files that now read"
            )
            if unrecorded or missing_docs or healed
            else ""
        )
    return report


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
