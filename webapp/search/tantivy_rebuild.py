"""Rewrites a Tantivy index made with an older schema into the current one, in place.

Tantivy refuses to open an index whose schema differs from the one asked for. A new field
(e.g. `folders` for `path:` filters) must not cost a re-extraction of every file: each
document's JSON is stored in the index and its text in the content store beside it, so the
documents are re-indexed from those into a new index, which then takes the old one's place.
Processes starting together take turns on a file lock; the first one rebuilds.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import tantivy

from webapp.search import validate_doc
from webapp.search.content_store import FILE_NAME, ContentStore

log = logging.getLogger(__name__)
MISMATCH = "schema does not match"
CHUNK = 500  # documents read and written at a time
KEEP = (FILE_NAME, ".tantivy-meta.lock", ".tantivy-writer.lock", ".trawl-rebuild.lock")


@contextmanager
def _exclusive(directory: Path) -> Iterator[None]:
    """One process at a time (the lock frees itself if its holder dies)."""
    with open(directory / ".trawl-rebuild.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def open_or_rebuild(
    directory: Path, schema: tantivy.Schema, to_document: Callable[[dict], tantivy.Document],
    register: Callable[[tantivy.Index], None],
) -> tantivy.Index:
    """The index in `directory` with `schema`, rebuilt first when it was made with another."""
    try:
        return tantivy.Index(schema, str(directory), reuse=True)
    except ValueError as exc:
        if MISMATCH not in str(exc):
            raise
    with _exclusive(directory):
        try:  # another process may have rebuilt it while this one waited
            return tantivy.Index(schema, str(directory), reuse=True)
        except ValueError as exc:
            if MISMATCH not in str(exc):
                raise
        moved = _rebuild(directory, schema, to_document, register)
        log.warning("Search index rebuilt for a new schema: %d documents", moved)
        return tantivy.Index(schema, str(directory), reuse=True)


def _rebuild(directory: Path, schema: tantivy.Schema, to_document, register) -> int:
    """Index every stored document again into `<dir>.rebuild`, then swap it in."""
    old = tantivy.Index.open(str(directory))
    searcher = old.searcher()
    store = ContentStore(directory)
    target = directory.parent / f"{directory.name}.rebuild"
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir()
    new = tantivy.Index(schema, str(target))
    register(new)
    writer = new.writer(64_000_000, 1)
    hits = searcher.search(tantivy.Query.all_query(), max(1, searcher.num_docs), count=False).hits
    addresses = [address for _, address in hits]
    for first in range(0, len(addresses), CHUNK):
        docs = [json.loads(searcher.doc(a).get_first("doc")) for a in addresses[first:first + CHUNK]]
        store.put([d for d in docs if "content" in d])  # older layout: text in the JSON
        texts = store.get_many([d["id"] for d in docs if "content" not in d])
        for doc in docs:
            doc.setdefault("content", texts.get(doc["id"], ""))
            writer.add_document(to_document(validate_doc(doc)))
    writer.commit()
    writer.wait_merging_threads()
    del writer, new, searcher, old
    _swap(target, directory)
    return len(addresses)


def _swap(source: Path, directory: Path) -> None:
    """Move the new index's files into `directory`; meta.json last (the switch), then the old
    index's files go. The content store stays where it is."""
    old_files = {n for n in os.listdir(directory) if n not in KEEP and not n.startswith(FILE_NAME)}
    new_files = [n for n in os.listdir(source) if n not in KEEP]
    for name in sorted(new_files, key=lambda n: (n == "meta.json", n == ".managed.json")):
        os.replace(source / name, directory / name)
    for name in old_files - set(new_files):
        (directory / name).unlink(missing_ok=True)
    shutil.rmtree(source, ignore_errors=True)
