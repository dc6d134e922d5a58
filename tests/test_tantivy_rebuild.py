"""An index written with an older schema is re-indexed in place in the background, text kept."""

from __future__ import annotations

import fcntl
import multiprocessing
import shutil
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import tantivy

from tests.test_search_backend import CORPUS
from webapp.search import IndexRebuilding, SearchQuery
from webapp.search.content_store import ContentStore
from webapp.search.ranking import FIELD_WEIGHTS
from webapp.search.tantivy_backend import TantivyBackend
from webapp.search.tantivy_rebuild import INDEX_VERSION, LOCK_NAME, VERSION_FILE, index_version
from webapp.search.tantivy_text import TOKENIZER, folding

NEW_FIELDS = (
    "year",
    "folders",
    "title_stem",
    "content_stem",
    "lang",
    "date",
    "camera",
    "camera_key",
    "folder_edges",
)


def old_schema() -> tantivy.Schema:
    """The schema before `year` and `folders` existed."""
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", tokenizer_name="raw")
    for name in ("source_id", "type", "extension", "basename_sort"):
        sb.add_text_field(name, tokenizer_name="raw", fast=True)
    for name in FIELD_WEIGHTS:
        sb.add_text_field(name, tokenizer_name=TOKENIZER)
    sb.add_integer_field("modified_at", indexed=True, fast=True)
    sb.add_integer_field("size_bytes", indexed=True, fast=True)
    sb.add_bytes_field("doc", stored=True)
    return sb.build()


def write_old_index(directory: Path) -> None:
    """CORPUS indexed with the old schema, texts in the content store, as an older Trawl did."""
    shaper = TantivyBackend(None)  # only to shape documents the way the backend does
    index = tantivy.Index(old_schema(), str(directory))
    index.register_tokenizer(TOKENIZER, folding())
    writer = index.writer(32_000_000, 1)
    for doc in CORPUS:
        fields = shaper._to_document(dict(doc, title=doc.get("title"))).to_dict()
        writer.add_document(tantivy.Document(**{k: v for k, v in fields.items() if k not in NEW_FIELDS}))
    writer.commit()
    writer.wait_merging_threads()
    ContentStore(directory).put(CORPUS)


def _count_when_ready(backend: TantivyBackend, seconds: float = 60) -> int:
    """The document count once the background rebuild is done."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return backend.count()
        except IndexRebuilding:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _open_and_count(directory: str, out) -> None:
    out.put(_count_when_ready(TantivyBackend(directory)))


@contextmanager
def rebuild_lock_held(directory: Path):
    """What a process rebuilding the index holds."""
    with open(directory / LOCK_NAME, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


def test_an_older_index_is_rebuilt_in_the_background_with_the_new_fields(tmp_path):
    directory = tmp_path / "ix"
    directory.mkdir()
    write_old_index(directory)
    with pytest.raises(ValueError, match="schema does not match"):
        tantivy.Index(TantivyBackend(None).schema, str(directory), reuse=True)
    with rebuild_lock_held(directory):  # another process is at it: say so, do not wait
        with pytest.raises(IndexRebuilding, match="being rebuilt"):
            TantivyBackend(directory).count()
    ctx = multiprocessing.get_context("spawn")  # processes starting together: one rebuilds
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_count, args=(str(directory), out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(90)
    assert sorted(out.get(timeout=5) for _ in procs) == [len(CORPUS)] * 2
    backend = TantivyBackend(directory)
    page = backend.search(SearchQuery(q="invoice path:/data/docs", facets=("year",)))
    assert [r["basename"] for r in page.results] == ["2024-invoice_acme.pdf"]
    assert page.facet_distribution == {"year": {"2023": 1}}
    assert "<em>invoice</em>" in page.results[0]["snippet"]  # the text came along
    assert backend.get("docs--cv")["content"].startswith("Curriculum vitae")
    assert not (tmp_path / "ix.rebuild").exists()


def test_search_answers_from_the_older_index_while_it_is_rebuilt(app, client, auth):
    """Words are found in the older index meanwhile (without stems); what it cannot answer
    (a `path:` filter: it has no folders field) is a 503 saying why."""
    directory = Path(app.config["SEARCH_INDEX_DIR"])
    app.extensions.pop("trawl.search", None)  # as if the app started on an older index
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    write_old_index(directory)
    with rebuild_lock_held(directory):
        resp = client.post("/api/search", headers=auth, json={"q": "invoice"})
        assert resp.status_code == 200, resp.get_json()
        assert [r["basename"] for r in resp.get_json()["results"]] == ["2024-invoice_acme.pdf"]
        assert "<em>invoice</em>" in resp.get_json()["results"][0]["snippet"]
        listing = {"q": "", "sort": "modified_at:desc", "facets": ["type", "camera", "folder"]}
        resp = client.post("/api/search", headers=auth, json=listing)  # by modified_at meanwhile
        assert resp.status_code == 200 and resp.get_json()["total"] == len(CORPUS)
        assert resp.get_json()["facet_distribution"]["folder"] == {}
        resp = client.post("/api/search", headers=auth, json={"q": "invoice path:/data/docs"})
        assert resp.status_code == 503 and resp.headers["Retry-After"] == "60"
        assert "being rebuilt" in resp.get_json()["detail"]
    with app.app_context():
        from webapp.runtime import get_search

        assert _count_when_ready(get_search(app)) == len(CORPUS)
    found = client.post("/api/search", headers=auth, json={"q": "invoice"}).get_json()
    assert found["total"] == 1


def test_an_index_of_an_older_version_is_rebuilt_once_with_stems(tmp_path, caplog):
    """The same schema with an older INDEX_VERSION (an analyzer changed) is rebuilt in the
    background too, once: the stemmed fields are written, the version moves on."""
    directory = tmp_path / "ix"
    TantivyBackend(directory).upsert(CORPUS)
    assert index_version(directory) == INDEX_VERSION
    (directory / VERSION_FILE).write_text('{"version": 2}\n')
    with pytest.raises(IndexRebuilding):
        TantivyBackend(directory).count()
    with caplog.at_level("WARNING", logger="webapp.search.tantivy_rebuild"):
        assert _count_when_ready(TantivyBackend(directory)) == len(CORPUS)
    assert f"rebuild: {len(CORPUS)} of {len(CORPUS)} documents (100%" in caplog.text
    assert index_version(directory) == INDEX_VERSION
    backend = TantivyBackend(directory)  # opens at once: nothing more to rebuild
    assert sorted(r["id"] for r in backend.search(SearchQuery(q="notes ")).results) == [
        "docs--garden"
    ]  # `notes` by its stem in the text, `garden_notes.md` by name
    assert backend.search(SearchQuery(q="shopped ")).total == 1  # `shopping`, by its stem
