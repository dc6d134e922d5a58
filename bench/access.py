"""Access filter benchmark: search latency of a user granted 3 of 50 sources against an admin's,
over the same index, the same queries, in the same run (interleaved query by query).

Usage: python bench/access.py [--n 50000] [--sources 50] [--granted 3] [--queries 200]
Prints a Markdown table and writes bench/results/access-<n>.json. Queries run in-process
through the Tantivy backend, snippets included, as the API runs them: the user's query carries
`source_ids` (the filter inside the query), the admin's none.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.search import Corpus, build_index, dir_size, make_queries  # noqa: E402
from webapp.search import SearchQuery  # noqa: E402
from webapp.search.tantivy_backend import TantivyBackend  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"


class ManySources(Corpus):
    """The search benchmark's documents spread over `sources` sources instead of 4."""

    def __init__(self, seed: int, sources: int) -> None:
        super().__init__(seed)
        self.sources = sources

    def doc(self, i: int) -> dict:
        doc = super().doc(i)
        source = f"s{i % self.sources:02d}"
        doc.update(id=f"{source}--{i:012x}", source_id=source, source_name=source.upper(),
                   path=doc["path"].replace(doc["path"].split("/")[2], source, 1))
        return doc


def _percentiles(times: list[float]) -> dict:
    cuts = statistics.quantiles(times, n=100)
    return {"p50_ms": round(cuts[49], 2), "p95_ms": round(cuts[94], 2),
            "p99_ms": round(cuts[98], 2)}


def compare(backend: TantivyBackend, queries: list[SearchQuery], granted: tuple[str, ...]
            ) -> dict:
    """Each query as the admin and as the user, alternating which goes first."""
    admin_t, user_t, admin_hits, user_hits = [], [], 0, 0
    for q in queries[:5]:  # warm-up
        backend.search(q)
        backend.search(dataclasses.replace(q, source_ids=granted))
    for n, q in enumerate(queries):
        user_q = dataclasses.replace(q, source_ids=granted)
        for who in ((q, user_q) if n % 2 else (user_q, q)):
            t0 = time.perf_counter()
            total = backend.search(who).total
            ms = (time.perf_counter() - t0) * 1000
            if who is q:
                admin_t.append(ms)
                admin_hits += total
            else:
                user_t.append(ms)
                user_hits += total
    return {"queries": len(queries),
            "admin": {**_percentiles(admin_t), "mean_total": round(admin_hits / len(queries), 1)},
            "user": {**_percentiles(user_t), "mean_total": round(user_hits / len(queries), 1)}}


def markdown(report: dict) -> str:
    lines = [f"{report['docs']:,} documents in {report['sources']} sources; the user is granted "
             f"{len(report['granted'])} ({', '.join(report['granted'])}). Index "
             f"{report['index_mb']} MB. In-process, snippets included; ms.", "",
             "| query class | admin p50 / p95 / p99 | user p50 / p95 / p99 | "
             "admin mean total | user mean total |", "|---|---|---|---|---|"]
    for name, r in report["classes"].items():
        a, u = r["admin"], r["user"]
        lines.append(f"| {name} | {a['p50_ms']} / {a['p95_ms']} / {a['p99_ms']} | "
                     f"{u['p50_ms']} / {u['p95_ms']} / {u['p99_ms']} | "
                     f"{a['mean_total']} | {u['mean_total']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build, measure, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--sources", type=int, default=50)
    parser.add_argument("--granted", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    index_dir = Path(tempfile.mkdtemp(prefix="trawl-bench-access-"))
    try:
        corpus = ManySources(args.seed, args.sources)
        backend = TantivyBackend(index_dir)
        indexing = build_index(backend, corpus, args.n, 5_000)
        rng = random.Random(args.seed)
        granted = tuple(sorted(f"s{i:02d}" for i in rng.sample(range(args.sources),
                                                                args.granted)))
        mixes = make_queries(corpus, args.queries, args.seed)
        mixes.pop("filtered")  # its source_id names one of the 4 sources of bench/search.py
        report = {"backend": "tantivy", "machine": platform.platform(), "docs": args.n,
                  "sources": args.sources, "granted": list(granted),
                  "indexing": indexing, "index_mb": round(dir_size(index_dir) / 1e6, 1),
                  "classes": {name: compare(backend, qs, granted) for name, qs in mixes.items()}}
    finally:
        shutil.rmtree(index_dir, ignore_errors=True)
    print(markdown(report))
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"access-{args.n}.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
