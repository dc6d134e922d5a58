"""An index written with an older schema is re-indexed in place when opened, text kept."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import tantivy

from tests.test_search_backend import CORPUS
from webapp.search import SearchQuery
from webapp.search.content_store import ContentStore
from webapp.search.tantivy_backend import FIELD_WEIGHTS, TOKENIZER, TantivyBackend, build_analyzer

NEW_FIELDS = ("year", "folders")


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
    index.register_tokenizer(TOKENIZER, build_analyzer())
    writer = index.writer(32_000_000, 1)
    for doc in CORPUS:
        fields = shaper._to_document(dict(doc, title=doc.get("title"))).to_dict()
        writer.add_document(tantivy.Document(
            **{k: v for k, v in fields.items() if k not in NEW_FIELDS}))
    writer.commit()
    writer.wait_merging_threads()
    ContentStore(directory).put(CORPUS)


def _open_and_count(directory: str, out) -> None:
    out.put(TantivyBackend(directory).count())


def test_an_older_index_is_rebuilt_and_searchable_with_the_new_fields(tmp_path):
    directory = tmp_path / "ix"
    directory.mkdir()
    write_old_index(directory)
    try:
        tantivy.Index(TantivyBackend(None).schema, str(directory), reuse=True)
        raise AssertionError("the old index should not open with the new schema")
    except ValueError as exc:
        assert "schema does not match" in str(exc)
    ctx = multiprocessing.get_context("spawn")  # processes starting together take turns
    out = ctx.Queue()
    procs = [ctx.Process(target=_open_and_count, args=(str(directory), out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert sorted(out.get(timeout=5) for _ in procs) == [len(CORPUS)] * 2
    backend = TantivyBackend(directory)
    page = backend.search(SearchQuery(q="invoice path:/data/docs", facets=("year",)))
    assert [r["basename"] for r in page.results] == ["2024-invoice_acme.pdf"]
    assert page.facet_distribution == {"year": {"2023": 1}}
    assert "<em>invoice</em>" in page.results[0]["snippet"]  # the text came along
    assert backend.get("docs--cv")["content"].startswith("Curriculum vitae")
    assert not (tmp_path / "ix.rebuild").exists()
