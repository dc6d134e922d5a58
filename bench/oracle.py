"""Existence oracle benchmark: does a hidden document's id answer like a missing one, in time?

Usage: python -m bench.oracle [--rounds 300] [--files 200]

Starts the whole service (`bench/trawl_runner.py`) over a folder of PDFs (the source `bench`)
and a second source `open`, makes a user granted `open` only, then asks, as that user, in
interleaved rounds (the order within a round alternates), for a real document of `bench`
(hidden from them) and for an id of `bench` that exists nowhere (a fresh random hash each
round), on GET /api/documents/<id>, /api/documents/<id>/similar, the document page and its raw
file. Per route: status and body equal or not, median of each, and the share of rounds where
the hidden id was slower (0.5 is a coin toss). Results: bench/results/oracle-<date>.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import secrets
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trawl_runner import SOURCE_ID, TrawlService  # noqa: E402
from tests.samples import pdf  # noqa: E402  (a small PDF of given pages' text)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
PASSWORD = "reader-password-1"
ROUTES = {
    "GET /api/documents/<id>": ("api", "/api/documents/{}"),
    "GET /api/documents/<id>/similar": ("api", "/api/documents/{}/similar"),
    "GET /documents/<id> (page)": ("web", "/documents/{}"),
    "GET /documents/<id>/file": ("web", "/documents/{}/file"),
}


def make_tree(root: Path, files: int) -> None:
    """`files` PDFs in the hidden source's folder, one text in the open source's."""
    (root / "open").mkdir(parents=True)
    (root / "open" / "note.txt").write_text("an open note about harbours")
    for i in range(files):
        (root / f"payroll-{i:04d}.pdf").write_bytes(pdf([f"salary sheet {i} for the harbour office"]))


def reader(service: TrawlService) -> tuple[requests.Session, requests.Session]:
    """The user granted `open` only: an API session (bearer) and a web session (form login)."""
    admin = service.http
    body = {"username": "reader", "password": PASSWORD, "source_ids": ["open"]}
    admin.post(f"{service.base}/api/users", json=body, timeout=30).raise_for_status()
    api = requests.Session()
    login = {"username": "reader", "password": PASSWORD}
    token = api.post(f"{service.base}/api/auth/login", json=login, timeout=30)
    token.raise_for_status()
    api.headers["Authorization"] = f"Bearer {token.json()['access_token']}"
    web = requests.Session()
    page = web.get(f"{service.base}/login", timeout=30).text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    web.post(
        f"{service.base}/login",
        data={"csrf_token": csrf, "username": "reader", "password": PASSWORD},
        allow_redirects=False,
        timeout=30,
    ).raise_for_status()
    return api, web


def hidden_ids(service: TrawlService) -> list[str]:
    """The ids of the hidden source's documents, as the admin finds them."""
    resp = service.http.post(
        f"{service.base}/api/search", json={"q": f"source:{SOURCE_ID}", "limit": 100}, timeout=60
    )
    resp.raise_for_status()
    return [r["id"] for r in resp.json()["results"]]


def timed(session: requests.Session, url: str) -> tuple[float, int, str]:
    """(ms, status, body) of one GET."""
    started = time.perf_counter()
    resp = session.get(url, timeout=30, allow_redirects=False)
    return (time.perf_counter() - started) * 1000, resp.status_code, resp.text


def compare(service: TrawlService, clients: dict, ids: list[str], rounds: int) -> dict:
    """Per route: hidden and missing answered alike, medians, share of rounds hidden slower."""
    out = {}
    for name, (kind, path) in ROUTES.items():
        session, hidden_t, missing_t, same, slower = clients[kind], [], [], True, 0
        for r in range(rounds + 10):
            hidden, missing = ids[r % len(ids)], f"{SOURCE_ID}--{secrets.token_hex(6)}"
            pair = [("h", hidden), ("m", missing)] if r % 2 else [("m", missing), ("h", hidden)]
            got = {k: timed(session, service.base + path.format(doc_id)) for k, doc_id in pair}
            if r < 10:
                continue  # warm-up
            same &= got["h"][1] == got["m"][1] and got["h"][2].replace(hidden, "ID") == got["m"][2].replace(
                missing, "ID"
            )
            hidden_t.append(got["h"][0])
            missing_t.append(got["m"][0])
            slower += got["h"][0] > got["m"][0]
        out[name] = {
            "same_status_and_body": same,
            "status": got["h"][1],
            "hidden_median_ms": round(statistics.median(hidden_t), 3),
            "missing_median_ms": round(statistics.median(missing_t), 3),
            "hidden_slower_share": round(slower / rounds, 3),
            "rounds": rounds,
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--files", type=int, default=200)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="trawl-oracle-") as tmp:
        root = Path(tmp) / "corpus"
        make_tree(root, args.files)
        with TrawlService(Path(tmp) / "data", root, workers=1) as service:
            service.add_sources(["open"])
            service.reindex()
            service.http.post(f"{service.base}/api/sources/open/reindex?wait=60", timeout=90)
            ids = hidden_ids(service)
            api, web = reader(service)
            report = {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": platform.node(),
                "hidden_documents": len(ids),
                "routes": compare(service, {"api": api, "web": web}, ids, args.rounds),
            }
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"oracle-{datetime.now(UTC):%Y-%m-%d}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print("| route | same status and body | hidden median ms | missing median ms | hidden slower |")
    print("|---|---|---|---|---|")
    for name, r in report["routes"].items():
        print(
            f"| {name} | {r['same_status_and_body']} | {r['hidden_median_ms']} | "
            f"{r['missing_median_ms']} | {r['hidden_slower_share']:.0%} |"
        )
    print(f"written to {path}")


if __name__ == "__main__":
    main()
