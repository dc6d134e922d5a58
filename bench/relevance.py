"""Relevance benchmark: `python -m bench.relevance` (also `make bench-relevance`).

The CISI collection (../shared/relevance/cisi) is written as Markdown files into a tree,
indexed by a real Trawl (launcher, HTTP API, RQ worker) and every judged query is run over
HTTP (top 100), once as the full question and once cut to its three rarest words. In the same
run two plain BM25 references are built with Tantivy on the same texts (OR query over title
and body): one with the `default` tokenizer, one with `en_stem` (English Snowball stems);
Trawl is compared against the better of the two per query set. The queries are also split in
two halves (odd and even position) to see whether a gain holds on both. nDCG@10, MAP@100,
P@10, Recall@100 and the number of
queries without any result are written to bench/results/relevance-<date>.json.

`--in-process` skips the service and searches a TantivyBackend directly (seconds, for tuning).

`--meaning` runs the service with meaning: its documents get their passage vectors (the text
the service indexed, cut by its own `passages`, embedded by the bundled model: see
bench/semantic.py, `http_embed`), then the default search (hybrid) and the same service by
words only are evaluated beside the references; results in relevance-<date>-meaning.json.
`--vectors FILE` keeps the vectors between runs (embedding CISI's ~1,900 passages takes 5 to
45 minutes depending on the machine's load). Without it the source's meaning is off, so the
words-only figures never depend on how far an embedding job got.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from datetime import date
from pathlib import Path

from bench import semantic
from bench.cisi import (
    CISI,
    DEPTH,
    RESULTS,
    Collection,
    Search,
    file_name,
    key_of,
    load,
    references,
    run_sets,
    table,
    write_tree,
)

# --- Trawl ------------------------------------------------------------------------------------


def trawl_http_search(svc, strategy: str | None, ratio: float | None = None) -> Search:
    """A search function over a running Trawl's HTTP API (top DEPTH, the given strategy and,
    when not None, `hybrid.semantic_ratio`)."""

    def search(text: str) -> list[str]:
        body: dict = {"q": text, "limit": DEPTH, "snippet_length": 50}
        if strategy:
            body["matching_strategy"] = strategy
        if ratio is not None:
            body["hybrid"] = {"semantic_ratio": ratio}
        resp = svc.http.post(f"{svc.base}/api/search", json=body, timeout=60)
        if resp.status_code == 400:  # a question the query language refuses: say which
            raise RuntimeError(f"{text!r}: {resp.json().get('detail')}")
        resp.raise_for_status()
        # a result stands for its copies (the page shows them on its card: "also at ..."); a
        # collection holding identical documents (the man pages' aliases) judges one of them
        return [
            key_of(name)
            for r in resp.json()["results"]
            for name in (r["basename"], *(Path(c["path"]).name for c in r.get("copies") or []))
        ]

    return search


def trawl_in_process(coll: Collection, folder: Path):
    """A TantivyBackend holding the collection as the scanner would give it (for tuning)."""
    from webapp.search.tantivy_backend import TantivyBackend

    backend = TantivyBackend(folder)
    docs = []
    for key, (title, body) in coll.docs.items():
        name = file_name(key)
        docs.append(
            {
                "id": f"cisi--{key}",
                "source_id": "cisi",
                "source_name": "CISI",
                "path": f"/bench/cisi/{name}",
                "basename": name,
                "extension": "md",
                "type": "markdown",
                "size_bytes": len(body),
                "modified_at": 0,
                "indexed_at": 0,
                "content": f"# {title}\n\n{body}\n",
                "title": title or None,
                "metadata": {},
            }
        )
    backend.upsert(docs)
    return backend


def backend_search(backend, strategy: str) -> Search:
    """A search function over a backend object (no HTTP)."""
    from webapp.search import SearchQuery

    def search(text: str) -> list[str]:
        page = backend.search(SearchQuery(q=text, limit=DEPTH, snippet_length=50, matching_strategy=strategy))
        return [key_of(r["basename"]) for r in page.results]

    return search


def run_http(coll: Collection, work: Path, meaning: bool = False, vectors: Path | None = None) -> dict:
    """Index the tree through a real Trawl and evaluate it beside the references. By words
    (the source's meaning off, so no embedding runs meanwhile); with `meaning`, the documents
    get their passage vectors (bench/semantic.py: http_embed) and the default search, which
    fuses meaning, is compared with the same service by words (`semantic_ratio` 0)."""
    from bench.trawl_runner import TrawlService

    corpus = work / "cisi-tree"
    write_tree(coll, corpus)
    with TrawlService(work / "trawl-data", corpus, workers=1) as svc:
        semantic.switch(svc, False)  # the worker embeds nothing; with meaning, the bench does
        indexed = svc.reindex()
        systems = references(coll)
        out: dict = {"documents": indexed["stats"].get("successful"), "index_seconds": indexed["seconds"]}
        if meaning:
            out["embedding"] = semantic.http_embed(svc, corpus, vectors)
            systems["trawl_words"] = trawl_http_search(svc, None, 0.0)
            systems["trawl_default"] = trawl_http_search(svc, None)
        else:
            for strategy in ("all", "last", "frequency"):
                systems[f"trawl_{strategy}"] = trawl_http_search(svc, strategy)
            systems["trawl_default"] = trawl_http_search(svc, None)
        out["results"] = run_sets(coll, systems)
    return out


def run_in_process(coll: Collection, work: Path) -> dict:
    """The same comparison without the service (for tuning the ranking quickly)."""
    backend = trawl_in_process(coll, work / "ix")
    systems = references(coll)
    for strategy in ("all", "last", "frequency"):
        systems[f"trawl_{strategy}"] = backend_search(backend, strategy)
    return {"documents": len(coll.docs), "results": run_sets(coll, systems)}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write bench/results/relevance-<date>.json."""
    parser = argparse.ArgumentParser(prog="python -m bench.relevance", description=__doc__)
    parser.add_argument(
        "--in-process",
        action="store_true",
        help="search a TantivyBackend directly (no service, no JSON written)",
    )
    parser.add_argument("--collection", type=Path, default=CISI)
    parser.add_argument(
        "--meaning",
        action="store_true",
        help="over HTTP with meaning: the default (hybrid) search beside the same service by words",
    )
    parser.add_argument(
        "--vectors",
        type=Path,
        default=None,
        help="with --meaning: keep the documents' passage vectors in this .npz file between runs",
    )
    args = parser.parse_args(argv)
    if args.meaning and args.in_process:
        parser.error("--meaning runs over HTTP (bench.semantic measures meaning in process)")
    coll = load(args.collection)
    work = Path(tempfile.mkdtemp(prefix="trawl-relevance-"))
    try:
        if args.in_process:
            result = run_in_process(coll, work)
        else:
            result = run_http(coll, work, args.meaning, args.vectors)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result.update(
        collection=args.collection.name,
        date=date.today().isoformat(),
        mode="in-process" if args.in_process else "http-meaning" if args.meaning else "http",
    )
    print(table(result))
    if not args.in_process:
        RESULTS.mkdir(exist_ok=True)
        named = "" if result["collection"] == "cisi" else f"-{result['collection']}"  # CISI's names as before
        path = RESULTS / f"relevance-{result['date']}{named}{'-meaning' if args.meaning else ''}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
