"""Choosing the embedding model: `python -m bench.models [--collections ...]`.

For each model of `webapp.search.embedder.MODELS` (and wordllama, a static model measured
for comparison only):
- speed: passages per CPU-second (process time, so other users of the shared machine do not
  count) of the model's bare call, one core, on the first SPEED_PASSAGES passages of CISI as
  Trawl cuts them (~1,000 characters of English prose), in batches of 16; and of the phase's
  path (cut, embed, store in the vector store) on the same texts;
- quality, per collection (CISI and those of bench/collections.py): nDCG@10 of the model
  alone, of Trawl hybrid (bench/semantic.py's systems, default ratio; the model's own floor,
  read as a search runs), of hybrid with each
  document's first passage only, and of the two plain BM25 references, on full questions and
  three-word queries;
- the similarity of each question to its relevant documents' best passage and to the rest
  (percentiles), which sets the model's RELATED floor.
Passage vectors are kept in bench/work/vectors-<model>-<collection>.npy between runs.
Results: bench/results/models-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import numpy as np

from bench import semantic
from bench.cisi import CISI, RESULTS, load, measures, short_queries
from bench.collections import WORK
from webapp.search import embedder, hybrid
from webapp.search.vectors import VectorStore

SPEED_PASSAGES = 96
BATCH = 16


def _sample() -> list[str]:
    coll = load(CISI)
    texts = [
        p for title, body in coll.docs.values() for p in embedder.passages(title, f"# {title}\n\n{body}")
    ]
    return [t for t in texts if len(t) >= 800][:SPEED_PASSAGES]


def _cpu_rate(call, texts: list[str]) -> float:
    """Passages per CPU-second of call over texts in batches."""
    call(texts[:4])  # warm: first-call allocations are not the rate
    started = time.process_time()
    for i in range(0, len(texts), BATCH):
        call(texts[i : i + BATCH])
    return round(len(texts) / (time.process_time() - started), 2)


def _wordllama():
    import wordllama

    return wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)


def _phase(store: VectorStore):
    """The phase's path on a batch: cut, embed, store."""
    counter = iter(range(10**9))

    def phase(chunk: list[str]) -> None:
        cut = [p for text in chunk for p in embedder.passages(None, text)]
        store.add("bench", {f"bench--{next(counter):012x}": embedder.embed_passages(cut)})

    return phase


def speed(keys: list[str]) -> dict:
    """Bare call and phase path, passages per CPU-second, per model (one core)."""
    texts = _sample()
    embedder.one_thread()
    out = {"passages": len(texts), "mean_chars": int(np.mean([len(t) for t in texts]))}
    for key in keys:
        embedder.use(key)
        model = embedder.load()
        work = Path(tempfile.mkdtemp(prefix="trawl-models-"))
        phase = _phase(VectorStore(work / "v"))
        out[key] = {
            "bare_per_cpu_s": _cpu_rate(model.passage, texts),
            "phase_per_cpu_s": _cpu_rate(phase, texts),
        }
        shutil.rmtree(work, ignore_errors=True)
        print(key, out[key], file=sys.stderr, flush=True)
    wl = _wordllama()
    out["wordllama"] = {"bare_per_cpu_s": _cpu_rate(wl.embed, texts)}
    return out


def _similarities(coll, store) -> dict:
    """Percentiles of the question-to-best-passage similarity, relevant vs not (full questions)."""
    related, unrelated = [], []
    for qid, text in coll.judged().items():
        found = dict(store.nearest(embedder.embed_query(text), ["cisi"], 100))
        for id_, sim in found.items():
            (related if semantic.key_of_id(id_) in coll.qrels[qid] else unrelated).append(sim)
    pct = (5, 25, 50, 75, 95)
    return {
        "related": [round(float(np.percentile(related, p)), 3) for p in pct] if related else [],
        "unrelated_top100": [round(float(np.percentile(unrelated, p)), 3) for p in pct],
        "percentiles": list(pct),
    }


def _ndcg(search, queries: dict[str, str], qrels: dict[str, set[str]]) -> float:
    return round(float(np.mean([measures(search(q), qrels[i])["ndcg@10"] for i, q in queries.items()])), 4)


def quality(key: str, folder: Path) -> dict:
    """Relevance of one model on one collection (in process, as bench/semantic.py)."""
    embedder.use(key)
    coll = load(folder)
    work = Path(tempfile.mkdtemp(prefix="trawl-models-"))
    vectors = WORK / f"vectors-{key}-{folder.name}.npy"
    WORK.mkdir(exist_ok=True)
    try:
        backend, store, passages, texts = semantic.build(coll, work, vectors)
        first = VectorStore(work / "first")  # fewer passages: each document's first alone
        first.add("cisi", {i: m[:1] for i, m in passages.items()})
        ratio = hybrid.DEFAULT_SEMANTIC_RATIO
        systems = {
            "embeddings_alone": semantic.dense_search(store),
            "hybrid": semantic.hybrid_search(backend, store, ratio),
            "hybrid_first_passage": semantic.hybrid_search(backend, first, ratio),
            "bm25_default": semantic.Bm25Reference(coll).search,
            "bm25_en_stem": semantic.Bm25Reference(coll, "en_stem").search,
        }
        out: dict = {"passages": len(texts), "similarity": _similarities(coll, store)}
        for set_name, queries in (("full", coll.judged()), ("short", short_queries(coll))):
            row = {
                name: round(
                    float(np.mean([measures(fn(q), coll.qrels[i])["ndcg@10"] for i, q in queries.items()])), 4
                )
                for name, fn in systems.items()
            }
            row["hybrid_vs_best_bm25"] = round(
                row["hybrid"] / max(row["bm25_default"], row["bm25_en_stem"]), 3
            )
            out[set_name] = row
        print(key, folder.name, json.dumps(out), file=sys.stderr, flush=True)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.models", description=__doc__)
    parser.add_argument("--models", nargs="*", default=list(embedder.MODELS))
    parser.add_argument("--collections", nargs="*", default=["cisi", "wordnet", "manpages"])
    parser.add_argument("--skip-speed", action="store_true")
    args = parser.parse_args(argv)
    result: dict = {"date": date.today().isoformat()}
    if not args.skip_speed:
        result["speed"] = speed(args.models)
    for name in args.collections:
        folder = CISI if name == "cisi" else WORK / name
        for key in args.models:
            result.setdefault("quality", {}).setdefault(name, {})[key] = quality(key, folder)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"models-{result['date']}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
