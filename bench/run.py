"""Benchmark entry: `python -m bench.run [--quick] [--scale 5k|50k|both]`, Trawl beside Recoll,
then the relevance benchmark (bench/relevance.py) and the meaning one (bench/semantic.py)
unless --skip-relevance.

For each scale: build (or reuse) the corpus, run Trawl through `python -m webapp.launcher` and its
HTTP API, then Recoll on the same files; write bench/results/<scale>-<date>.json and the tables
in docs/performance.md. The live index (watcher) has a benchmark of its own: `python -m
bench.live` (bench/live.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import date
from pathlib import Path

from bench import corpus as corpus_mod
from bench import hybrid_http, recoll_runner, relevance, report, semantic
from bench.measure import machine
from bench.trawl_runner import SOURCE_ID, TrawlService

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DOC = HERE.parent / "docs" / "performance.md"
TOUCH_EVERY = 100  # 1% of the files change between the unchanged and the changed rescan


def log(message: str) -> None:
    """Progress on stderr with a timestamp."""
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def touch(paths: list[Path], offset: int) -> None:
    """Give these files a new mtime (content unchanged), as an edit would."""
    for i, path in enumerate(paths):
        stamp = corpus_mod.BASE_MTIME + 10_000_000 + offset + i
        os.utime(path, (stamp, stamp))


class Removed:
    """These corpus files moved out of the tree (as a deletion on disk) and back afterwards
    (a rename keeps their bytes and times)."""

    def __init__(self, corp: corpus_mod.Corpus, paths: list[Path]) -> None:
        self.moves = [(path, corp.root.parent / "removed" / path.relative_to(corp.root)) for path in paths]

    def __enter__(self) -> Removed:
        for path, away in self.moves:
            away.parent.mkdir(parents=True, exist_ok=True)
            path.rename(away)
        return self

    def __exit__(self, *exc: object) -> None:
        for path, away in self.moves:
            if away.exists():
                away.rename(path)


def run_trawl(corp: corpus_mod.Corpus, queries: dict, touched: list[Path], workers: int) -> dict:
    """Initial index, unchanged rescan, 1% rescan, index size, HTTP search latency, the admin
    pages, listing everything (exact total, deep offset), and a rescan after 1% deletions."""
    work = corpus_mod.WORK / f"run-{corp.scale}"
    log(f"Trawl: starting the service ({workers} workers) on {work / 'trawl-data'}")
    with TrawlService(work / "trawl-data", corp.root, workers=workers) as svc:
        log("Trawl: initial index ...")
        out = {"initial": svc.reindex()}
        log(f"Trawl: initial index took {out['initial']['seconds']} s; unchanged rescan ...")
        out["unchanged"] = svc.reindex()
        touch(touched, 1000)
        out["changed_1pct"] = svc.reindex()
        out["index_bytes"] = svc.index_size()
        out["documents"] = svc.document_count()
        log(
            f"Trawl: rescans {out['unchanged']['seconds']} s / {out['changed_1pct']['seconds']} s;"
            f" timing {sum(map(len, queries.values()))} queries over HTTP ..."
        )
        before = meaning_now(svc)
        out["search_http"] = svc.search_latency(queries)
        out["meaning_while_searching"] = {"before": before, "after": meaning_now(svc)}
        out["web_memory"] = svc.search_memory(queries)
        out["pages"] = svc.page_latency()
        out["listing"] = svc.listing()
        log("Trawl: rescan after deleting 1% of the files ...")
        with Removed(corp, touched):
            out["deleted_1pct"] = svc.reindex()
    return out


def meaning_now(svc: TrawlService) -> dict:
    """The source's meaning status with the time and the workers' CPU so far: two of them
    around the search timing show the embedding phase ran meanwhile (the searches time
    keyword search beside it, the latency target's condition)."""
    return {
        "at": round(time.time(), 1),
        "workers_cpu_seconds": round(hybrid_http.background_cpu(svc), 1),
        **hybrid_http.semantic_state(svc, SOURCE_ID),
    }


def run_recoll(corp: corpus_mod.Corpus, queries: dict, touched: list[Path]) -> dict:
    """The same measurements for Recoll; {"skipped": reason} when it is not available.
    Recoll gets the query kinds that are plain text (it has no facets)."""
    queries = {k: qs for k, qs in queries.items() if all(isinstance(q, str) for q in qs)}
    version = recoll_runner.ensure_installed(log)
    if version is None:
        return {"skipped": "recollindex not installed and not installable"}
    rc = recoll_runner.Recoll(corpus_mod.WORK / f"run-{corp.scale}" / "recoll", corp.root)
    log(f"Recoll {version}: initial index ...")
    out: dict = {"version": version, "initial": rc.index()}
    log(f"Recoll: initial index took {out['initial']['seconds']} s; rescans ...")
    out["unchanged"] = rc.index()
    touch(touched, 2000)
    out["changed_1pct"] = rc.index()
    out["index_bytes"] = rc.index_size()
    out["documents"] = rc.document_count()
    log("Recoll: timing queries with recollq (one process per query) ...")
    out["search_recollq"] = rc.recollq_latency(queries)
    if recoll_runner.python_module_available(log):
        log("Recoll: timing queries through the recoll Python module ...")
        out["search_python"] = rc.python_latency(queries)
    else:
        out["search_python"] = {"skipped": "python3-recoll not importable by /usr/bin/python3"}
    log("Recoll: rescan after deleting 1% of the files ...")
    with Removed(corp, touched):
        out["deleted_1pct"] = rc.index()
    return out


def run_scale(scale: str, per_kind: int, workers: int, skip_recoll: bool) -> dict:
    """Every measurement of one scale, as the JSON written to bench/results."""
    corp = corpus_mod.build(scale, log=log)
    queries = corpus_mod.queries(per_kind)
    files = corpus_mod.all_files(corp)
    touched = files[::TOUCH_EVERY]
    result = {
        "scale": scale,
        "date": date.today().isoformat(),
        "machine": machine(HERE),
        "corpus": {
            "files": corp.files,
            "bytes": corp.bytes,
            "counts": corp.counts,
            "touched_files": len(touched),
            "queries_per_kind": per_kind,
        },
        "settings": {"workers": workers},
    }
    try:
        result["trawl"] = run_trawl(corp, queries, touched, workers)
        result["recoll"] = {"skipped": "--skip-recoll"} if skip_recoll else run_recoll(corp, queries, touched)
    finally:
        corpus_mod.restore_mtimes(corp)
    result["ratios"] = report.ratios(result)
    result["targets"] = report.targets(result)
    return result


def save(result: dict) -> Path:
    """Write the JSON result and refresh docs/performance.md."""
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{result['scale']}-{result['date']}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    report.update_doc(DOC, result, RESULTS)
    return path


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the chosen scales one after the other."""
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="~1k files, under 5 minutes")
    parser.add_argument("--scale", choices=("5k", "50k", "1m", "both"), default="5k")
    parser.add_argument("--queries", type=int, default=0, help="queries per kind (default 200)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-recoll", action="store_true")
    parser.add_argument(
        "--skip-relevance", action="store_true", help="leave out the relevance benchmark (bench/relevance.py)"
    )
    args = parser.parse_args(argv)
    scales = ["quick"] if args.quick else (["5k", "50k"] if args.scale == "both" else [args.scale])
    per_kind = args.queries or (50 if args.quick else 200)
    for scale in scales:
        started = time.monotonic()
        result = run_scale(scale, per_kind, args.workers, args.skip_recoll)
        path = save(result)
        print(report.markdown(result))
        log(f"{scale} done in {time.monotonic() - started:.0f} s; wrote {path} and {DOC}")
    if not args.skip_relevance:
        log("relevance: CISI through the service beside a plain BM25 reference ...")
        relevance.main([])
        log("meaning: hybrid beside both BM25 references, throughput, latency, cost ...")
        semantic.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
