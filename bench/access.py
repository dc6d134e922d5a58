"""Access filter benchmark: search latency of a user granted 3 of 50 sources against an admin's,
over the same index, the same queries, in the same run (interleaved query by query).

Usage: python bench/access.py [--n 50000] [--sources 50] [--granted 3] [--queries 200] [--http]
Prints a Markdown table and writes bench/results/access-<n>.json. Queries run in-process
through the Tantivy backend, snippets included, as the API runs them: the user's query carries
`source_ids` (the filter inside the query), the admin's none. With --http also over HTTP
against the whole service (`make run`'s launcher) serving the same index, with the 50 sources
and a user granted 3 of them made through the API, each query sent with the user's and the
admin's token in turn.
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
        doc.update(
            id=f"{source}--{i:012x}",
            source_id=source,
            source_name=source.upper(),
            path=doc["path"].replace(doc["path"].split("/")[2], source, 1),
        )
        return doc


def compare_over_http(
    index_dir: Path, mixes: dict[str, list[SearchQuery]], sources: int, granted: tuple[str, ...]
) -> dict:
    """Start the service over the index, make the sources and the user, time both callers."""
    from bench.trawl_runner import TrawlService

    work = Path(tempfile.mkdtemp(prefix="trawl-bench-access-http-"))
    roots = work / "roots"
    roots.mkdir()
    try:
        with TrawlService(
            work / "data", roots, workers=1, env={"SEARCH_INDEX_DIR": str(index_dir)}
        ) as service:
            base, http = service.base, service.http
            service.add_sources([f"s{n:02d}" for n in range(sources)])
            user = {"username": "reader", "password": "reader-password-1"}
            http.post(f"{base}/api/users", json={**user, "source_ids": list(granted)}).raise_for_status()
            login = http.post(f"{base}/api/auth/login", json=user)
            login.raise_for_status()
            admin = {"Authorization": http.headers["Authorization"]}
            reader = {"Authorization": f"Bearer {login.json()['access_token']}"}

            def run(q: SearchQuery, headers: dict) -> tuple[float, int]:
                body = {"q": q.q, "limit": q.limit, "sort": q.sort, "facets": list(q.facets)}
                t0 = time.perf_counter()
                resp = http.post(f"{base}/api/search", json=body, headers=headers, timeout=30)
                ms = (time.perf_counter() - t0) * 1000
                resp.raise_for_status()
                return ms, resp.json()["total"]

            return {
                name: _side_by_side(qs, lambda q: run(q, admin), lambda q: run(q, reader))
                for name, qs in mixes.items()
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _side_by_side(queries: list[SearchQuery], as_admin, as_user) -> dict:
    """Each query as the admin and as the user, alternating which goes first; (ms, total)
    from each runner."""
    for q in queries[:5]:  # warm-up
        as_admin(q)
        as_user(q)
    admin_t, user_t, admin_hits, user_hits = [], [], 0, 0
    for n, q in enumerate(queries):
        order = ((as_admin, admin_t), (as_user, user_t))
        for runner, times in order if n % 2 else order[::-1]:
            ms, total = runner(q)
            times.append(ms)
            if runner is as_admin:
                admin_hits += total
            else:
                user_hits += total
    return {
        "queries": len(queries),
        "admin": {**_percentiles(admin_t), "mean_total": round(admin_hits / len(queries), 1)},
        "user": {**_percentiles(user_t), "mean_total": round(user_hits / len(queries), 1)},
    }


def _percentiles(times: list[float]) -> dict:
    cuts = statistics.quantiles(times, n=100)
    return {"p50_ms": round(cuts[49], 2), "p95_ms": round(cuts[94], 2), "p99_ms": round(cuts[98], 2)}


def compare(backend: TantivyBackend, queries: list[SearchQuery], granted: tuple[str, ...]) -> dict:
    """Each query in-process as the admin (no filter) and as the user (`source_ids`)."""

    def timed(q: SearchQuery) -> tuple[float, int]:
        t0 = time.perf_counter()
        total = backend.search(q).total
        return (time.perf_counter() - t0) * 1000, total

    return _side_by_side(queries, timed, lambda q: timed(dataclasses.replace(q, source_ids=granted)))


def markdown(report: dict) -> str:
    lines = [
        f"{report['docs']:,} documents in {report['sources']} sources; the user is granted "
        f"{len(report['granted'])} ({', '.join(report['granted'])}). Index "
        f"{report['index_mb']} MB. Snippets included; ms.",
        "",
        "| query class | admin p50 / p95 / p99 | user p50 / p95 / p99 | admin mean total | user mean total |",
        "|---|---|---|---|---|",
    ]
    for label, key in (("", "classes"), (" over HTTP", "http")):
        for name, r in report.get(key, {}).items():
            a, u = r["admin"], r["user"]
            lines.append(
                f"| {name}{label} | {a['p50_ms']} / {a['p95_ms']} / {a['p99_ms']} | "
                f"{u['p50_ms']} / {u['p95_ms']} / {u['p99_ms']} | "
                f"{a['mean_total']} | {u['mean_total']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Build, measure, print and save."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--sources", type=int, default=50)
    parser.add_argument("--granted", type=int, default=3)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--http", action="store_true", help="also time both callers over HTTP against the running service"
    )
    args = parser.parse_args(argv)
    index_dir = Path(tempfile.mkdtemp(prefix="trawl-bench-access-"))
    try:
        corpus = ManySources(args.seed, args.sources)
        backend = TantivyBackend(index_dir)
        indexing = build_index(backend, corpus, args.n, 5_000)
        rng = random.Random(args.seed)
        granted = tuple(sorted(f"s{i:02d}" for i in rng.sample(range(args.sources), args.granted)))
        mixes = make_queries(corpus, args.queries, args.seed)
        mixes.pop("filtered")  # its source_id names one of the 4 sources of bench/search.py
        report = {
            "backend": "tantivy",
            "machine": platform.platform(),
            "docs": args.n,
            "sources": args.sources,
            "granted": list(granted),
            "indexing": indexing,
            "index_mb": round(dir_size(index_dir) / 1e6, 1),
            "classes": {name: compare(backend, qs, granted) for name, qs in mixes.items()},
        }
        _save(report, args.n)
        if args.http:
            report["http"] = compare_over_http(index_dir, mixes, args.sources, granted)
            _save(report, args.n)
    finally:
        shutil.rmtree(index_dir, ignore_errors=True)
    print(markdown(report))


def _save(report: dict, n: int) -> None:
    """Write what is measured so far (an HTTP failure keeps the in-process figures)."""
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"access-{n}.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
