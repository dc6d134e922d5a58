"""Search benchmark: index N synthetic documents, time exact/typo/prefix/filtered/facets/question queries.

Usage: python bench/search.py [--n 100000] [--queries 200] [--dir DIR] [--seed 1] [--http]
Prints a Markdown table and writes bench/results/search-<n>.json. Queries run in-process
through the backend, and with --http also over HTTP against the whole service (`make run`'s
launcher: gunicorn, Redis, a worker) serving the same index.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import shutil
import statistics
import string
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from webapp.search import FACETS, SearchBackend, SearchQuery  # noqa: E402
from webapp.search.tantivy_backend import TantivyBackend  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TYPES = {
    "txt": "text",
    "md": "markdown",
    "py": "code",
    "pdf": "pdf",
    "docx": "docx",
    "xlsx": "xlsx",
    "yaml": "config",
    "srt": "subtitle",
}
COMMON = (
    "the of and to in is for that with on as by this be are from at or an it was "
    "which not have has will can all their we our more one about also into"
).split()
SOURCES = tuple(f"src{n}" for n in range(4))  # the documents are spread over these
ACCENTED = ["résumé", "café", "naïve", "façade", "déjà", "über", "straße", "crème", "señor"]


class Corpus:
    """Deterministic synthetic documents: Zipf-distributed vocabulary, realistic file names."""

    def __init__(self, seed: int, vocab_size: int = 30_000) -> None:
        self.rng = random.Random(seed)
        self.vocab = self._vocabulary(vocab_size)
        weights = [1 / (rank + 1) for rank in range(len(self.vocab))]
        self.cum = list(_accumulate(weights))

    def _vocabulary(self, size: int) -> list[str]:
        syllables = [c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"] + ["tion", "ment"]
        words = set(ACCENTED)
        while len(words) < size:
            n = self.rng.choice((2, 2, 3, 3, 3, 4, 5))
            words.add("".join(self.rng.choice(syllables) for _ in range(n)))
        ordered = sorted(words)
        self.rng.shuffle(ordered)
        return ordered

    def words(self, k: int) -> list[str]:
        """k words drawn by Zipf frequency, with common function words mixed in."""
        drawn = self.rng.choices(self.vocab, cum_weights=self.cum, k=k)
        return [w if self.rng.random() > 0.35 else self.rng.choice(COMMON) for w in drawn]

    def content(self) -> str:
        n_words = min(20_000, int(self.rng.lognormvariate(6.5, 0.9)))  # median ~660 words
        words = self.words(n_words)
        sentences, i = [], 0
        while i < len(words):
            step = self.rng.randint(6, 18)
            sentence = " ".join(words[i : i + step])
            sentences.append(sentence[:1].upper() + sentence[1:] + ".")
            i += step
        return " ".join(sentences)

    def doc(self, i: int) -> dict:
        source = SOURCES[i % len(SOURCES)]
        ext = self.rng.choice(list(TYPES))
        stem = "_".join(self.words(2)).replace(" ", "-")
        basename = f"{2015 + i % 10}-{stem}-{i}.{ext}"
        return {
            "id": f"{source}--{i:012x}",
            "source_id": source,
            "source_name": source.upper(),
            "path": f"/data/{source}/{self.rng.choice(self.vocab)}/{basename}",
            "basename": basename,
            "extension": ext,
            "type": TYPES[ext],
            "size_bytes": self.rng.randint(100, 5_000_000),
            "modified_at": 1_500_000_000 + self.rng.randint(0, 300_000_000),
            "indexed_at": 1_800_000_000,
            "content": self.content(),
            "title": " ".join(self.words(4)).title() if ext in ("pdf", "docx", "md") else None,
            "metadata": {"pages": self.rng.randint(1, 300)},
        }


def _accumulate(values: list[float]) -> Iterator[float]:
    total = 0.0
    for v in values:
        total += v
        yield total


def _typo(word: str, rng: random.Random) -> str:
    """One substitution in the middle of the word."""
    pos = rng.randint(1, len(word) - 2)
    letter = rng.choice([c for c in string.ascii_lowercase if c != word[pos]])
    return word[:pos] + letter + word[pos + 1 :]


def make_queries(corpus: Corpus, count: int, seed: int) -> dict[str, list[SearchQuery]]:
    """Query mixes per class, drawn from mid-frequency vocabulary (like a user's words)."""
    rng = random.Random(seed + 1)
    mid = [w for w in corpus.vocab[50:3000] if w.isascii()]
    long_words = [w for w in mid if len(w) >= 6]
    sorts = ["relevance", "modified_at:desc", "basename:asc"]
    return {
        "exact": [SearchQuery(q=f"{rng.choice(mid)} {rng.choice(mid)} ") for _ in range(count)],
        "typo": [SearchQuery(q=_typo(rng.choice(long_words), rng) + " ") for _ in range(count)],
        "prefix": [SearchQuery(q=rng.choice(long_words)[:4]) for _ in range(count)],
        "filtered": [
            SearchQuery(
                q=rng.choice(mid),
                source_id=SOURCES[rng.randint(0, len(SOURCES) - 1)],
                type=rng.choice(list(TYPES.values())),
                sort=rng.choice(sorts),
            )
            for _ in range(count)
        ],
        # the query language's filters plus every facet counted over all matches
        "facets": [
            SearchQuery(
                q=f"{rng.choice(mid)} type:{rng.choice(list(TYPES.values()))} "
                f"modified:>={2016 + rng.randint(0, 5)} -{rng.choice(mid)}",
                facets=FACETS,
            )
            for _ in range(count)
        ],
        # natural-language questions of 8-12 words: function words around content words
        "question": [SearchQuery(q=_question(corpus, rng)) for _ in range(count)],
    }


QUESTION_OPENERS = ("what", "how", "which", "why", "where", "when", "who")


def _question(corpus: Corpus, rng: random.Random) -> str:
    """A question of 8-12 words, about half of them function words, like people ask."""
    size = rng.randint(8, 12)
    words = [rng.choice(QUESTION_OPENERS)]
    while len(words) < size:
        if rng.random() < 0.45:
            words.append(rng.choice(COMMON))
        else:
            words.append(rng.choice(corpus.vocab[20:5000]))
    return " ".join(words) + "?"


def build_index(backend: SearchBackend, corpus: Corpus, n: int, batch: int) -> dict:
    """Upsert n documents in batches (one commit per batch); returns timing figures."""
    started, generated, raw = time.perf_counter(), 0.0, 0
    for first in range(0, n, batch):
        t0 = time.perf_counter()
        docs = [corpus.doc(i) for i in range(first, min(n, first + batch))]
        raw += sum(len(d["content"].encode()) for d in docs)
        generated += time.perf_counter() - t0
        backend.upsert(docs)
    seconds = time.perf_counter() - started - generated
    return {"docs": n, "seconds": round(seconds, 2), "docs_per_s": round(n / seconds), "raw_text_bytes": raw}


def time_queries(run: Callable[[SearchQuery], int], queries: list[SearchQuery]) -> dict:
    """Latency percentiles (ms) of running each query once after a short warm-up."""
    for q in queries[:5]:
        run(q)
    times, hits = [], 0
    for q in queries:
        t0 = time.perf_counter()
        hits += run(q)
        times.append((time.perf_counter() - t0) * 1000)
    cuts = statistics.quantiles(times, n=100)
    return {
        "queries": len(times),
        "p50_ms": round(cuts[49], 2),
        "p95_ms": round(cuts[94], 2),
        "p99_ms": round(cuts[98], 2),
        "mean_hits": round(hits / len(times), 1),
    }


def in_process_runner(backend: SearchBackend) -> Callable[[SearchQuery], int]:
    """Runs a query through the backend (snippets included); returns the total."""
    return lambda q: backend.search(q).total


def http_runner(service) -> Callable[[SearchQuery], int]:
    """Runs a query as POST /api/search on a running service (keep-alive); returns the total."""

    def run(q: SearchQuery) -> int:
        body = {"q": q.q, "limit": q.limit, "sort": q.sort, "facets": list(q.facets)}
        body.update({k: v for k, v in (("source_id", q.source_id), ("type", q.type)) if v})
        resp = service.http.post(f"{service.base}/api/search", json=body, timeout=30)
        resp.raise_for_status()
        return resp.json()["total"]

    return run


def time_over_http(index_dir: Path, queries: dict[str, list[SearchQuery]]) -> dict:
    """Start the service over the same index folder and time the same queries through it."""
    from bench.trawl_runner import TrawlService

    work = Path(tempfile.mkdtemp(prefix="trawl-bench-http-"))
    (work / "roots").mkdir()
    try:
        with TrawlService(
            work / "data", work / "roots", workers=1, env={"SEARCH_INDEX_DIR": str(index_dir)}
        ) as service:
            service.add_sources(SOURCES)  # the filtered queries name them
            runner = http_runner(service)
            return {name: time_queries(runner, qs) for name, qs in queries.items()}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def markdown(report: dict) -> str:
    idx = report["indexing"]
    built = (
        f"indexing {idx['docs_per_s']:,} docs/s ({idx['seconds']} s)"
        if not idx.get("reused")
        else "index reused"
    )
    lines = [
        f"Documents: {idx['docs']:,}; {built}; index {report['index_mb']} MB "
        f"(raw text {report['raw_text_mb']} MB)",
        "",
        "| query class | queries | p50 ms | p95 ms | p99 ms | mean total |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in report["queries"].items():
        lines.append(
            f"| {name} | {r['queries']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['mean_hits']} |"
        )
    for name, r in report.get("http", {}).items():
        lines.append(
            f"| {name} over HTTP | {r['queries']} | {r['p50_ms']} | {r['p95_ms']} | "
            f"{r['p99_ms']} | {r['mean_hits']} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build, measure, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=5_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--dir",
        help="index directory (default: a temp dir, removed after); "
        "an index of --n documents already there is reused",
    )
    parser.add_argument(
        "--http", action="store_true", help="also time the queries over HTTP against the running service"
    )
    args = parser.parse_args(argv)
    index_dir = Path(args.dir or tempfile.mkdtemp(prefix="trawl-bench-"))
    try:
        corpus = Corpus(args.seed)
        backend = TantivyBackend(index_dir)
        if args.dir and backend.count() == args.n:  # built by an earlier run: the same docs
            # draw them again: the queries are drawn after them, from the same generator
            raw = sum(len(corpus.doc(i)["content"].encode()) for i in range(args.n))
            indexing = {
                "docs": args.n,
                "seconds": None,
                "docs_per_s": None,
                "raw_text_bytes": raw,
                "reused": True,
            }
        else:
            indexing = build_index(backend, corpus, args.n, args.batch)
        runner = in_process_runner(backend)
        queries = make_queries(corpus, args.queries, args.seed)
        report = {
            "backend": "tantivy",
            "mode": "in-process" + (" and HTTP" if args.http else ""),
            "machine": platform.platform(),
            "indexing": indexing,
            "index_mb": round(dir_size(index_dir) / 1e6, 1),
            "raw_text_mb": round(indexing["raw_text_bytes"] / 1e6, 1),
            "queries": {name: time_queries(runner, qs) for name, qs in queries.items()},
        }
        report["queries"]["all"] = _merge(report["queries"])
        if args.http:
            report["http"] = time_over_http(index_dir, queries)
            report["http"]["all"] = _merge(report["http"])
    finally:
        if not args.dir:
            shutil.rmtree(index_dir, ignore_errors=True)
    print(markdown(report))
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"search-{args.n}.json").write_text(json.dumps(report, indent=2) + "\n")


def _merge(per_class: dict) -> dict:
    """Overall row: the worst class percentiles (a conservative summary)."""
    return {
        "queries": sum(r["queries"] for r in per_class.values()),
        **{k: max(r[k] for r in per_class.values()) for k in ("p50_ms", "p95_ms", "p99_ms")},
        "mean_hits": round(statistics.mean(r["mean_hits"] for r in per_class.values()), 1),
    }


if __name__ == "__main__":
    main()
