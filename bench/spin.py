"""How long the bundled model takes to embed a question on two threads, by how long OpenMP's
threads spin at a barrier before they sleep (libgomp's GOMP_SPINCOUNT), on a quiet machine and
beside other work.

Usage: python -m bench.spin [--counts 0,1000,3000] [--questions 100]

Each count runs in its own process (libgomp reads the setting once, as it loads): the model
embeds `--questions` of bench.search's questions (10 more first, untimed) through the
embedder's own path without its cache, and prints p50 / p95 / p99 in ms. The conditions: nothing
else running; one `yes` at nice 0 (another program wants a core); two `yes` at nice 10 (like
Trawl's background phase); two such processes at once (two questions at the same moment).
Figures: docs/performance.md, "Threads".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def child(questions: int) -> None:
    """In the measuring process: embed the questions, print their percentiles as JSON."""
    sys.path.insert(0, str(ROOT))
    from bench.measure import percentiles
    from bench.search import Corpus, make_queries
    from webapp.search import embedder

    texts = [q.q for q in make_queries(Corpus(1), questions + 10, 1)["question"]]
    key = embedder.active().key
    for text in texts[:10]:
        embedder._question.__wrapped__(key, text)  # the model loaded and warm; no cached vectors
    times = []
    for text in texts[10:]:
        started = time.perf_counter()
        embedder._question.__wrapped__(key, text)
        times.append((time.perf_counter() - started) * 1000)
    print(json.dumps(percentiles(times)))


def measure(count: int, questions: int, together: int = 1) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["GOMP_SPINCOUNT"] = str(count)
    cmd = [sys.executable, "-m", "bench.spin", "--child", str(questions)]
    procs = [
        subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True) for _ in range(together)
    ]
    return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def beside(load: list[list[str]], counts: list[int], questions: int) -> dict:
    """Each count measured while the `load` commands run."""
    others = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL) for cmd in load]
    try:
        time.sleep(1)
        return {count: measure(count, questions) for count in counts}
    finally:
        for proc in others:
            proc.kill()
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spin", description=__doc__)
    parser.add_argument("--counts", default="0,300,1000,3000,20000")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    counts = [int(c) for c in args.counts.split(",")]
    report = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "quiet": {c: measure(c, args.questions) for c in counts},
        "one yes at nice 0": beside([["yes"]], counts, args.questions),
        "two yes at nice 10": beside([["nice", "-n", "10", "yes"]] * 2, counts, args.questions),
        "two at once": {c: measure(c, args.questions, together=2) for c in counts},
    }
    print(json.dumps(report, indent=2))
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "spin.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
