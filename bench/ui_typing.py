"""Search as you type in a real browser: the time from a key to its results on the page.

Builds (or reuses, `--dir`) the synthetic index of bench/search.py, serves Trawl over it
(werkzeug in a thread, as the browser tests do), and types words into the search box of a
headless chromium at a person's pace. For each word it records the time from the keydown of its
last letter to the moment the results of the whole word are on the page (htmx:afterSettle of
#results holding that query), for each debounce (the form's `delay:`) asked for.

    .venv/bin/python -m bench.ui_typing --n 50000 --dir /tmp/b50k --delays 300,100,60
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
from pathlib import Path

from bench.search import RESULTS_DIR, Corpus, build_index

CHROMIUM = "/usr/bin/chromium"
ADMIN = {"username": "admin", "password": "correct horse battery"}
KEY_PAUSE_MS = 150  # a steady typist: about 80 words a minute
# the page notes the time of each keydown and of each settled answer for the text now in the box
PROBE = """() => {
  window.__lat = [];
  document.addEventListener('keydown', () => { window.__key = performance.now(); }, true);
  document.addEventListener('htmx:afterSettle', (evt) => {
    const box = document.getElementById('q');
    const results = document.getElementById('results');
    if (evt.detail.target.id === 'results' && results.dataset.q === box.value) {
      window.__lat.push([box.value, performance.now() - window.__key]);
    }
  });
}"""


def serve(index_dir: Path, work: Path):
    """The app over the index on a free port, on a Redis of its own (as `make run` starts it);
    returns (base URL, server, redis process)."""
    import subprocess

    from werkzeug.serving import make_server

    from webapp import create_app, launcher

    data = work / "data"
    data.mkdir()
    redis_proc = subprocess.Popen(launcher.redis_command(data), stdout=subprocess.DEVNULL)
    redis_url = f"unix://{data / 'redis.sock'}"
    if not launcher.redis_ready(redis_url, redis_proc):
        raise SystemExit("redis-server did not start")
    app = create_app(
        {
            "DATA_DIR": str(data),
            "REDIS_URL": redis_url,
            "ALLOWED_ROOTS": str(work),
            "SEARCH_INDEX_DIR": str(index_dir),
            "DATABASE_URL": f"sqlite:///{data / 'trawl.db'}",
            "LOG_LEVEL": "WARNING",
            "AUTH_RATE_LIMIT": "1000/minute",
            "LOGIN_USER_RATE_LIMIT": "1000/minute",
        }
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_port}", server, redis_proc


def measure(base: str, words: list[str], delays: list[int]) -> dict:
    """Per debounce: the key-to-results milliseconds of every word (p50, p95, max)."""
    from playwright.sync_api import sync_playwright

    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        tab = browser.new_page(base_url=base)
        tab.request.post("/api/auth/setup", data=ADMIN)
        tab.goto("/login")
        tab.get_by_label("Username").fill(ADMIN["username"])
        tab.get_by_label("Password").fill(ADMIN["password"])
        tab.get_by_role("button", name="Log in").click()
        tab.wait_for_url(f"{base}/")
        for delay in delays:
            tab.goto("/")
            tab.evaluate(PROBE)
            tab.evaluate(
                """(d) => { const f = document.getElementById('search-form');
              f.setAttribute('hx-trigger', `input changed delay:${d}ms, submit`);
              htmx.process(f); }""",
                delay,
            )
            box = tab.get_by_label("Search your files")
            for word in words:
                box.fill("")
                box.press_sequentially(word, delay=KEY_PAUSE_MS)
                tab.wait_for_function("w => window.__lat.some(([q]) => q === w)", arg=word, timeout=20_000)
            times = [ms for q, ms in tab.evaluate("window.__lat") if q in words]
            cuts = statistics.quantiles(times, n=20, method="inclusive")
            out[f"delay {delay} ms"] = {
                "words": len(times),
                "p50_ms": round(cuts[9], 1),
                "p95_ms": round(cuts[18], 1),
                "max_ms": round(max(times), 1),
            }
        browser.close()
    return out


def main(argv: list[str] | None = None) -> None:
    """Build or reuse the index, serve it, type, print and save."""
    from webapp.search.tantivy_backend import TantivyBackend

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--dir", required=True, help="index directory (reused when it holds --n)")
    parser.add_argument("--words", type=int, default=30)
    parser.add_argument("--delays", default="300,100,60")
    args = parser.parse_args(argv)
    corpus = Corpus(1)
    backend = TantivyBackend(Path(args.dir))
    if backend.count() != args.n:
        print(json.dumps(build_index(backend, corpus, args.n, 5_000)))
    del backend
    words = [w for w in dict.fromkeys(corpus.words(args.words * 4)) if len(w) >= 5][: args.words]
    with tempfile.TemporaryDirectory(prefix="trawl-ui-typing-") as tmp:
        base, server, redis_proc = serve(Path(args.dir), Path(tmp))
        try:
            report = {
                "documents": args.n,
                "key_pause_ms": KEY_PAUSE_MS,
                "results": measure(base, words, [int(d) for d in args.delays.split(",")]),
            }
        finally:
            server.shutdown()
            redis_proc.terminate()
            redis_proc.wait(10)
    print(json.dumps(report, indent=2))
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / f"ui-typing-{args.n}.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
