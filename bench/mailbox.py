"""Peak memory of a worker extracting one large mailbox, members sent on in chunks or whole.

`python -m bench.mailbox [MESSAGES ...]` writes an mbox of that many ~4 KB messages into a
temporary folder, then extracts it with the pipeline's `extract_batch` in a fresh process per
run: once as scans do (members handed on every MEMBER_CHUNK, `on_partial`) and once holding
every member until the end (the reference), and prints seconds and peak RSS of each.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time

BODY = "lorem ipsum dolor sit amet " * 150


def _write_mbox(path: str, count: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for n in range(count):
            f.write(
                f"From x@example.org Mon Jan  1 00:00:00 2024\nSubject: note {n}\n"
                f"From: a@example.org\n\n{BODY}\n\n"
            )


def _run(path: str, data_dir: str, chunked: bool) -> dict:
    from webapp import create_app
    from webapp.indexing.batch import Batch, extract_batch

    app = create_app(
        {
            "DATA_DIR": data_dir,
            "SECRET_KEY": "b" * 48,
            "ALLOWED_ROOTS": data_dir,
            "REDIS_URL": os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/15"),
        }
    )
    chunks = []
    with app.app_context():
        started = time.monotonic()
        out = extract_batch(
            app,
            {"id": "bench", "name": "Bench"},
            Batch(0, [(path, os.path.getsize(path), 0)]),
            on_partial=(lambda part: chunks.append(len(part.docs))) if chunked else None,
        )
        seconds = time.monotonic() - started
    return {
        "seconds": round(seconds, 1),
        "chunks": len(chunks),
        "kept": len(out.docs),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def main(counts: list[int]) -> None:
    """Print one line per mailbox size and mode."""
    with tempfile.TemporaryDirectory() as tmp:
        for count in counts:
            path = os.path.join(tmp, f"box-{count}.mbox")
            _write_mbox(path, count)
            size_mb = os.path.getsize(path) / 1024**2
            for mode in ("chunked", "whole"):
                result = subprocess.run(
                    [sys.executable, "-m", "bench.mailbox", "--one", path, tmp, mode],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                row = json.loads(result.stdout.strip().splitlines()[-1])
                print(
                    f"{count:>7,} messages ({size_mb:.0f} MB)  {mode:<8} "
                    f"{row['seconds']:>6} s  peak RSS {row['peak_rss_mb']} MB  "
                    f"({row['chunks']} chunks sent, {row['kept']} documents held at the end)"
                )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--one"]:
        print(json.dumps(_run(sys.argv[2], sys.argv[3], sys.argv[4] == "chunked")))
    else:
        main([int(a) for a in sys.argv[1:]] or [1_000, 10_000])
