"""Rewrites a Tantivy index of an older INDEX_VERSION into the current one, in place.

INDEX_VERSION, written to VERSION_FILE in the index folder, names what the index holds: its
schema and its analyzers (tokenizers are not stored with an index, so a changed analyzer
would go unnoticed otherwise). Any change to either moves it on. A new version must not cost
a re-extraction of every file: each document's JSON is stored in the index and its text in
the content store beside it, so the documents are re-indexed from those (by reindex(), the
loop a source rename uses too) into a new index, which then takes the old one's place. The
first process to open an older index rewrites it in a background thread, holding a file
lock; until it is done, every process answers IndexRebuilding (503) for the index.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

import tantivy

from webapp.search import IndexRebuilding, validate_doc
from webapp.search.content_store import FILE_NAME, ContentStore

log = logging.getLogger(__name__)
# 3: stemmed fields (title_stem, content_stem) and the document's language (`lang`).
# 4: the document's date (`date`: when a photo was taken), `camera`, `camera_key` and
# `folder_edges` (the facets and filters of browsing).
# 5: an e-mail's date is the time it was sent (doc_date).
# 6: `copy`, the flag of a document whose text its source holds under a smaller path.
# 7: `container_id`, a member's container (fast), by which a container and its matching
# members are listed once (search.folds).
INDEX_VERSION = 7
VERSION_FILE = "trawl-index.json"
MISMATCH = "schema does not match"
CHUNK = 500  # documents read and written at a time
PROGRESS_SECONDS = 10.0  # how often a rebuild logs how far it is
LOCK_NAME = ".trawl-rebuild.lock"
KEEP = (FILE_NAME, ".tantivy-meta.lock", ".tantivy-writer.lock", LOCK_NAME)
REBUILDING = (
    "The search index is being rebuilt for this version of Trawl "
    "(no file is read again); try again in a few minutes"
)


def index_version(directory: Path) -> int | None:
    """The INDEX_VERSION an index folder was written with (None: no index, 0: unmarked)."""
    if not (directory / "meta.json").exists():
        return None
    try:
        return int(json.loads((directory / VERSION_FILE).read_text()).get("version", 0))
    except (OSError, ValueError, AttributeError):
        return 0


def _mark(directory: Path) -> None:
    (directory / VERSION_FILE).write_text(json.dumps({"version": INDEX_VERSION}) + "\n")


def _open(schema: tantivy.Schema, directory: Path) -> tantivy.Index | None:
    """The index of this version, or None when the one on disk is older. A new folder gets
    an empty index marked with the current version."""
    version = index_version(directory)
    if version is not None and version != INDEX_VERSION:
        return None
    try:
        index = tantivy.Index(schema, str(directory), reuse=True)
    except ValueError as exc:
        if MISMATCH not in str(exc):
            raise
        return None
    if version is None:
        _mark(directory)
    return index


def reindex(
    searcher: tantivy.Searcher,
    addresses: list,
    store: ContentStore,
    writer: tantivy.IndexWriter,
    to_document: Callable[[dict], tantivy.Document],
    replace: bool,
    progress: Callable[[int], None] | None = None,
) -> None:
    """Write the stored documents at `addresses` again, CHUNK at a time, their text read from
    the content store: one loop for a source rename (`replace` the old copies) and a rebuild
    (into a new, empty index). `progress` hears the number of documents written so far."""
    for first in range(0, len(addresses), CHUNK):
        docs = [json.loads(searcher.doc(a).get_first("doc")) for a in addresses[first : first + CHUNK]]
        texts = store.get_many([d["id"] for d in docs])
        for doc in docs:
            doc["content"] = texts.get(doc["id"], "")
            if replace:
                writer.delete_documents_by_term("id", doc["id"])
            writer.add_document(to_document(validate_doc(doc)))
        if progress is not None:
            progress(first + len(docs))


def open_or_rebuild(
    directory: Path,
    schema: tantivy.Schema,
    to_document: Callable[[dict], tantivy.Document],
    register: Callable[[tantivy.Index], None],
) -> tantivy.Index:
    """The index in `directory` with `schema`; IndexRebuilding while an older one is rewritten.

    The first caller to find an older index starts the rewrite in a background thread of its
    process (a web request must not wait minutes), holding a file lock until it is done."""
    index = _open(schema, directory)
    if index is not None:
        _tidy(directory)
        return index
    handle = open(directory / LOCK_NAME, "w")  # noqa: SIM115 - the rebuild thread closes it
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise IndexRebuilding(REBUILDING) from None
    index = _open(schema, directory)  # rebuilt by another process before this one locked
    if index is not None:
        handle.close()
        return index
    thread = threading.Thread(
        target=_rebuild_unlocking,
        name="trawl-index-rebuild",
        daemon=True,
        args=(handle, directory, schema, to_document, register),
    )
    thread.start()
    raise IndexRebuilding(REBUILDING)


def _tidy(directory: Path) -> None:
    """Remove what a rebuild left behind when its process ended before cleaning up."""
    target = _target(directory)
    if not target.exists():
        return
    with open(directory / LOCK_NAME, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return  # a rebuild is running
        shutil.rmtree(target, ignore_errors=True)


def _target(directory: Path) -> Path:
    """Where the new index is written before it takes the old one's place."""
    return directory.parent / f"{directory.name}.rebuild"


def _rebuild_unlocking(handle, directory: Path, schema, to_document, register) -> None:
    """Rebuild, log the outcome, free the lock (closing the file frees it)."""
    started = time.monotonic()
    try:
        moved = _rebuild(directory, schema, to_document, register)
        log.warning(
            "Search index rebuilt for a new schema: %d documents in %.0f s", moved, time.monotonic() - started
        )
    except Exception:  # noqa: BLE001 - a background thread: logged, retried at the next open
        log.exception("Rebuilding the search index failed; the next start tries again")
    finally:
        handle.close()


def _rebuild(directory: Path, schema: tantivy.Schema, to_document, register) -> int:
    """Index every stored document again into `<dir>.rebuild`, then swap it in."""
    old = tantivy.Index.open(str(directory))
    searcher = old.searcher()
    store = ContentStore(directory)
    target = _target(directory)
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    new = tantivy.Index(schema, str(target))
    register(new)
    writer = new.writer(64_000_000, 1)
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False).hits
    addresses = [address for _, address in hits]
    total, started, shown = len(addresses), time.monotonic(), [0.0]

    def progress(done: int) -> None:  # a line every PROGRESS_SECONDS, and the last one
        now = time.monotonic()
        if now - shown[0] >= PROGRESS_SECONDS or done == total:
            shown[0] = now
            log.warning(
                "Search index rebuild: %d of %d documents (%.0f%%, %.0f s)",
                done,
                total,
                100 * done / max(1, total),
                now - started,
            )

    reindex(searcher, addresses, store, writer, to_document, replace=False, progress=progress)
    writer.commit()
    writer.wait_merging_threads()
    del writer, new, searcher, old
    _mark(target)
    _swap(target, directory)
    return len(addresses)


def _swap(source: Path, directory: Path) -> None:
    """Move the new index's files into `directory`; meta.json (the switch) and the version
    last, then the old index's files go. The content store stays where it is."""
    old_files = {n for n in os.listdir(directory) if n not in KEEP and not n.startswith(FILE_NAME)}
    new_files = [n for n in os.listdir(source) if n not in KEEP]
    order = ("meta.json", ".managed.json", VERSION_FILE)  # the version last: a crash before
    for name in sorted(new_files, key=lambda n: n in order and order.index(n) + 1):  # redoes
        os.replace(source / name, directory / name)
    for name in old_files - set(new_files):
        (directory / name).unlink(missing_ok=True)
    for _ in range(20):  # tantivy's threads of the closed index may still touch a lock file
        shutil.rmtree(source, ignore_errors=True)
        if not source.exists():
            break
        time.sleep(0.1)
