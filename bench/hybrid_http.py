"""Search latency over HTTP with and without meaning at 50k documents, in one run; and keyword
latency while the embedding phase runs.

Usage: python -m bench.hybrid_http [--n 50000] [--queries 100] [--passages 2] [--embedding 600]

The documents are bench/search.py's synthetic corpus, indexed in process as bench.search does,
then served by the whole service (`make run`'s launcher) over that index. What is timed:
- `three words` (three mid-frequency words, no trailing space) and `question` (bench.search's
  8-12 word questions), each sent with `hybrid: {"semantic_ratio": 0}` (words only) and with the
  default ratio: every hybrid request embeds its question with the bundled model in the web
  process, searches the HNSW vectors of the four sources and fuses;
- the same requests, words only and hybrid, again while the embedding phase works through a
  real source of `--embedding` text files (written from the same corpus), in the service's
  own worker.

Vectors of the 50k documents: the bundled model embeds 4-12 passages a second here
(docs/performance.md), so 50k documents would take hours before the first query. What a hybrid
query costs does not depend on what its vectors mean, only on how many there are and how many
pass the `RELATED` threshold, so each document gets `--passages` vectors drawn near a real
embedding: ANCHORS texts of the same corpus are embedded by the model (cached in `--anchors`),
and a document's vectors are its anchor plus a little noise (cosine about 0.97 with it).
The report counts how many hits per hybrid query came by meaning, to show the fusion worked.

`--dir` keeps the index between runs: it is reused when it holds the `--n` documents (the
embedding source is deleted at the end of each run), else built anew and written out before
the timing; the report says how many segments it has.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.search import SOURCES, Corpus, build_index, make_queries  # noqa: E402
from webapp.search.embedder import DIMENSIONS, embed_passages  # noqa: E402
from webapp.search.tantivy_backend import TantivyBackend  # noqa: E402
from webapp.search.vectors import VectorStore  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ANCHORS = 512
NOISE = 0.0128  # per dimension: |a + n| has cosine ~0.97 with a in 384 dimensions
EMBED_SOURCE = "embedding"


def anchors(corpus_seed: int, cache: Path) -> np.ndarray:
    """ANCHORS real embeddings of the corpus's own texts (a title and 300 characters)."""
    if cache.exists():
        return np.load(cache)
    corpus = Corpus(corpus_seed + 6)
    texts = []
    for i in range(ANCHORS):
        doc = corpus.doc(i)
        texts.append(f"{doc['title'] or doc['basename']} {doc['content'][:300]}")
    out = np.concatenate([embed_passages(texts[k : k + 32]) for k in range(0, ANCHORS, 32)])
    np.save(cache, out)
    return out


def document_vectors(n: int, passages: int, anchor: np.ndarray, seed: int) -> dict[str, dict]:
    """{source: {doc id: (passages, DIMENSIONS)}} for the corpus's n documents."""
    rng = np.random.default_rng(seed)
    out: dict[str, dict[str, np.ndarray]] = {s: {} for s in SOURCES}
    for i in range(n):
        source = SOURCES[i % len(SOURCES)]
        base = anchor[rng.integers(len(anchor))]
        rows = base + rng.normal(0, NOISE, size=(passages, DIMENSIONS)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        out[source][f"{source}--{i:012x}"] = rows
    return out


def three_words(corpus: Corpus, count: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    mid = [w for w in corpus.vocab[50:3000] if w.isascii() and w.isalpha()]
    return [" ".join(rng.choice(mid, 3, replace=False)) for _ in range(count)]


def timed(service, texts: list[str], ratio: float | None, warm_up: list[str]) -> dict:
    """p50/p95 of POST /api/search for each text (20 results), and what matched by meaning.
    `warm_up` (other texts: a web process keeps the vectors of the questions it embedded) is
    sent first, untimed, to load the model, the index readers and the vectors."""
    body = {"limit": 20}
    if ratio is not None:
        body["hybrid"] = {"semantic_ratio": ratio}
    for text in warm_up:
        service.http.post(f"{service.base}/api/search", json={**body, "q": text}, timeout=60)
    times, by_meaning, hits, inside = [], [], [], []
    for text in texts:
        t0 = time.perf_counter()
        resp = service.http.post(f"{service.base}/api/search", json={**body, "q": text}, timeout=60)
        times.append((time.perf_counter() - t0) * 1000)
        resp.raise_for_status()
        page = resp.json()
        hits.append(len(page["results"]))
        inside.append(page["processing_time_ms"])
        by_meaning.append(sum(1 for h in page["results"] if h.get("match") in ("meaning", "both")))
    cuts = statistics.quantiles(times, n=100)
    out = {
        "queries": len(times),
        "p50_ms": round(cuts[49], 1),
        "p95_ms": round(cuts[94], 1),
        "mean_hits": round(statistics.mean(hits), 1),
        "median_processing_ms": statistics.median(inside),  # the search and fusion, no embedding
        "mean_by_meaning": round(statistics.mean(by_meaning), 1),
    }
    print(f"ratio {ratio}: {out}", file=sys.stderr, flush=True)
    return out


def semantic_state(service, source_id: str) -> dict:
    resp = service.http.get(f"{service.base}/api/status/{source_id}", timeout=30)
    resp.raise_for_status()
    return resp.json().get("semantic") or {}


def background_cpu(service) -> float:
    """CPU seconds used so far by the service's processes other than the web server's."""
    from bench.trawl_runner import tree_of

    total = 0.0
    for proc in tree_of(service.proc.pid):
        try:
            if "gunicorn" not in " ".join(proc.cmdline()):
                times = proc.cpu_times()  # with its ended children's (a job's work horse)
                total += times.user + times.system + times.children_user + times.children_system
        except psutil.Error:
            pass
    return total


def while_embedding(
    service, corpus: Corpus, files: int, classes: dict[str, list[str]], warm_up: list[str]
) -> dict:
    """Latency, words only and hybrid, while the embedding phase works through a new source
    of `files` (its two model threads in the idle class, as in the service)."""
    folder = service.corpus_root / EMBED_SOURCE
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (folder / f"note-{i:05d}.txt").write_text(corpus.content()[:6000])
    body = {
        "id": EMBED_SOURCE,
        "name": "Embedding",
        "root_path": str(folder),
        "watch": False,
        "allow_overlap": True,
    }
    service.http.post(f"{service.base}/api/sources", json=body, timeout=30).raise_for_status()
    service.http.post(f"{service.base}/api/sources/{EMBED_SOURCE}/reindex", timeout=30).raise_for_status()
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:  # its scan done, its embedding started
        state = semantic_state(service, EMBED_SOURCE)
        if state.get("state") == "embedding":
            break
        time.sleep(1)
    else:
        raise RuntimeError(f"the embedding phase did not start: {state}")
    before, cpu, t0 = semantic_state(service, EMBED_SOURCE), background_cpu(service), time.perf_counter()
    out = {
        f"{mode} {name}": timed(service, texts, ratio, warm_up)
        for mode, ratio in (("words", 0.0), ("hybrid", None))
        for name, texts in classes.items()
    }
    after = semantic_state(service, EMBED_SOURCE)
    window = time.perf_counter() - t0
    # `done` moves per few documents (each a few seconds of model time): the CPU the workers
    # spent while the searches were timed shows the phase was at work meanwhile
    out["embedding"] = {
        "before": before,
        "after": after,
        "window_seconds": round(window, 1),
        "workers_cpu_seconds": round(background_cpu(service) - cpu, 1),
    }
    if after.get("state") != "embedding":
        out["embedding"]["note"] = "the phase ended before the timing did"
    return out


def main(argv: list[str] | None = None) -> int:
    from bench.trawl_runner import TrawlService

    parser = argparse.ArgumentParser(prog="python -m bench.hybrid_http", description=__doc__)
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--passages", type=int, default=2, help="vectors per document")
    parser.add_argument("--embedding", type=int, default=600, help="files the embedding phase works on")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", help="index directory to build or reuse (default: a temporary one)")
    parser.add_argument("--anchors", type=Path, default=Path(tempfile.gettempdir()) / "trawl-anchors.npy")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="trawl-bench-hybrid-"))
    index_dir = Path(args.dir) if args.dir else work / "index"
    try:
        corpus = Corpus(args.seed)
        backend = TantivyBackend(index_dir)
        if backend.count() == args.n:
            indexing = {"docs": args.n, "reused": True}
        else:  # built anew: upserts over an older build leave deleted documents in its segments
            del backend
            shutil.rmtree(index_dir, ignore_errors=True)
            backend = TantivyBackend(index_dir)
            indexing = build_index(backend, corpus, args.n, 5_000)
            os.sync()  # its files written out before the timing, not during it
        indexing["segments"] = backend._searcher().num_segments
        del backend  # the service opens the index itself
        questions = [q.q for q in make_queries(corpus, args.queries, args.seed)["question"]]
        classes = {"three words": three_words(corpus, args.queries, args.seed), "question": questions}
        warm_up = [q.q for q in make_queries(corpus, 20, args.seed + 1)["question"]]
        vectors = document_vectors(args.n, args.passages, anchors(args.seed, args.anchors), args.seed)
        (work / "roots").mkdir()
        report: dict = {
            "machine": platform.platform(),
            "docs": args.n,
            "indexing": indexing,
            "vectors": args.n * args.passages,
            "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        }
        with TrawlService(
            work / "data", work / "roots", workers=2, env={"SEARCH_INDEX_DIR": str(index_dir)}
        ) as service:
            service.add_sources(SOURCES)
            t0 = time.perf_counter()
            store = VectorStore(work / "data" / "vectors")
            for source, docs in vectors.items():
                store.add(source, docs)
            report["vectors_seconds"] = round(time.perf_counter() - t0, 1)
            report["words"] = {name: timed(service, texts, 0.0, warm_up) for name, texts in classes.items()}
            report["hybrid"] = {name: timed(service, texts, None, warm_up) for name, texts in classes.items()}
            report["while_embedding"] = while_embedding(service, corpus, args.embedding, classes, warm_up)
            # its documents out of the index again, so that the next run reuses it as built
            service.http.delete(f"{service.base}/api/sources/{EMBED_SOURCE}", timeout=300).raise_for_status()
        report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, indent=2))
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"hybrid-http-{args.n}.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
