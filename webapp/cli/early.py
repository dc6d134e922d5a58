"""What a command starts before its modules load: the model a search will embed its question
with (EMBED_MODEL), loaded in a thread while the search's modules import and its app is built.

Loading the model is mostly work outside Python (hashing its file, onnxruntime making its
session), which runs beside the imports on a second core; a search that fuses meaning then
waits for the model only as long as its loading outlasts them (docs/performance.md, "The CLI").
This module imports nothing of Trawl at its top: `trawl --help` imports it.
"""

from __future__ import annotations

import threading

MODEL_THREAD = "trawl-model"  # the loading thread's name


def search(args: list[str]) -> threading.Thread | None:
    """Start loading the model when `trawl search ARGS` may fuse meaning: a query of more than
    one word (an argument holding a space; no option's value does) ranked by relevance. The
    thread decides with the search's own rules (hybrid.uses_meaning) before it loads."""
    if "--help" in args or _sort(args) not in (None, "relevance"):
        return None
    texts = [a for a in args if len(a.split()) > 1]
    if not texts:
        return None
    thread = threading.Thread(target=_load_for, args=(texts[0],), name=MODEL_THREAD, daemon=True)
    thread.start()
    return thread


def _sort(args: list[str]) -> str | None:
    """The value of `--sort` among the arguments (None when not given)."""
    for i, arg in enumerate(args):
        if arg == "--sort":
            return args[i + 1] if i + 1 < len(args) else None
        if arg.startswith("--sort="):
            return arg.removeprefix("--sort=")
    return None


def _load_for(text: str) -> None:
    """Load the configured model (EMBED_MODEL, read as the app will read it: the environment,
    `.env`, the running service's settings) if a search for `text` fuses meaning. A query the
    syntax refuses, one searched by words alone, or settings that cannot be read or name no
    model load nothing: the command itself says so."""
    # imported in this thread, beside the main thread's imports: that is the point
    from webapp import config
    from webapp.exceptions import TrawlError
    from webapp.search import SearchQuery, embedder, hybrid

    try:
        key = config.setting("EMBED_MODEL")
        fused = hybrid.uses_meaning(SearchQuery(q=text), hybrid.DEFAULT_SEMANTIC_RATIO)
    except (TrawlError, SystemExit):
        return
    if fused and key in embedder.MODELS:
        embedder.use(key)  # the same the app chooses as it is built (runtime.init_app)
        embedder.load()
