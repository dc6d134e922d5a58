"""Does search timing tell a user whether a word exists in a source they cannot see?
`python -m bench.search_leak [--queries 400] [--files 2000]`

Runs a whole Trawl (`python -m webapp.launcher`) with two sources of `--files` text files each:
`open` (granted to a user) and `hidden` (not granted), a quarter of whose files hold a word
found nowhere else. The user searches, alternating, for that word (only in the hidden source)
and for a word in no file at all, `--queries` times each; both answer `total: 0`. Prints the
p50/p90 of both, client side (HTTP, keep-alive) and server side (`processing_time_ms`), and the
same pair for the admin (who sees the hidden source) as a yardstick. Figures: docs/security.md.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import requests

from bench.trawl_runner import SOURCE_ID, TrawlService

SECRET = "quillwortzyx"  # in a quarter of the hidden files only
ABSENT = "quillwortzyq"  # in no file (same length and prefix: the same work to parse)
WORDS = (
    "report budget meeting harbour lantern orchard pebble quarry ribbon saddle tunnel "
    "valley walnut yonder zephyr anchor beacon candle dagger ember falcon garnet"
).split()


def _write(root: Path, files: int, secret: bool) -> None:
    rng = random.Random(7)
    root.mkdir(parents=True)
    for i in range(files):
        words = rng.choices(WORDS, k=300)
        if secret and i % 4 == 0:
            words[rng.randrange(300)] = SECRET
        (root / f"f{i:05d}.txt").write_text(" ".join(words))


def _percentiles(values: list[float]) -> str:
    values = sorted(values)
    return f"p50 {statistics.median(values):.2f} ms, p90 {values[int(len(values) * 0.9)]:.2f} ms"


def _measure(session: requests.Session, base: str, queries: int) -> dict:
    out: dict[str, dict[str, list[float]]] = {q: {"client": [], "server": []} for q in (SECRET, ABSENT)}
    for q in (SECRET, ABSENT) * 20:  # warm caches and the connection
        session.post(f"{base}/api/search", json={"q": q}, timeout=30)
    for _ in range(queries):
        for q in (SECRET, ABSENT):
            started = time.perf_counter()
            body = session.post(f"{base}/api/search", json={"q": q}, timeout=30).json()
            out[q]["client"].append((time.perf_counter() - started) * 1000)
            out[q]["server"].append(body.get("processing_time_ms", 0))
            out[q].setdefault("total", []).append(body["total"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--files", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trawl-leak-") as tmp:
        corpus = Path(tmp) / "files"
        _write(corpus / "open", args.files, secret=False)
        _write(corpus / "hidden", args.files, secret=True)
        with TrawlService(
            Path(tmp) / "data", corpus / "open", workers=2, env={"ALLOWED_ROOTS": str(corpus)}
        ) as service:
            admin = service.http
            resp = admin.post(
                f"{service.base}/api/sources",
                timeout=30,
                json={"id": "hidden", "name": "Hidden", "root_path": str(corpus / "hidden"), "watch": False},
            )
            resp.raise_for_status()
            for sid in (SOURCE_ID, "hidden"):
                admin.post(f"{service.base}/api/sources/{sid}/reindex", timeout=30)
            for sid in (SOURCE_ID, "hidden"):
                while admin.get(f"{service.base}/api/status/{sid}", timeout=30).json()["state"] != "idle":
                    time.sleep(1)
            admin.post(
                f"{service.base}/api/users",
                timeout=30,
                json={"username": "reader", "password": "reader password 1", "source_ids": [SOURCE_ID]},
            ).raise_for_status()
            user = requests.Session()
            token = user.post(
                f"{service.base}/api/auth/login",
                timeout=30,
                json={"username": "reader", "password": "reader password 1"},
            ).json()["access_token"]
            user.headers["Authorization"] = f"Bearer {token}"
            for who, session in (("user without the grant", user), ("admin", admin)):
                result = _measure(session, service.base, args.queries)
                for q, label in ((SECRET, "word only in the hidden source"), (ABSENT, "word in no file")):
                    totals = set(result[q]["total"])
                    print(
                        f"{who:24} {label:32} total {sorted(totals)}  client "
                        f"{_percentiles(result[q]['client'])}; server "
                        f"{_percentiles(result[q]['server'])}"
                    )


if __name__ == "__main__":
    main()
