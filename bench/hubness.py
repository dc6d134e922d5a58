"""Hubness of "Similar documents": `python -m bench.hubness [--corpus DIR]`.

Every file of the corpus (../shared/corpus by default; archives as one document, their members
left out) is extracted in process by Trawl's extractors, cut into passages as the embedding
phase cuts them, embedded by the bundled model and stored in a VectorStore. Then each
document's similar documents (its 10 first) are listed by two rules:

- before: every neighbour at least RELATED from the document (the rule until 2026-11-28);
- after: services/similar.py's: the floor (meaning_index.standing_out over the document's
  CANDIDATES nearest) and kinds kept apart (prose beside prose only).

Hubness is how often each document appears in the others' lists: the largest count, how many
documents appear in more than a tenth of the lists, and how many prose documents' lists hold a
text of little prose (configuration, markup, code, metadata-only). Vectors are cached in
`--cache` (.npz). Results: bench/results/hubness-<date>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import tempfile
import time
from collections import Counter
from datetime import date
from pathlib import Path

import numpy as np

from bench.cisi import RESULTS

SHOWN = 10
CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def documents(corpus: Path) -> dict[str, dict]:
    """{doc id: {path, type, title, content}} of every file Trawl's extractors read."""
    from webapp.indexing.extractors import extract
    from webapp.indexing.extractors.base import ExtractionSettings

    settings = ExtractionSettings()
    out = {}
    for n, path in enumerate(sorted(p for p in corpus.rglob("*") if p.is_file())):
        try:
            doc = extract(str(path), settings)
        except Exception:  # noqa: BLE001 - a file the service would record as failed
            continue
        text = doc.content or ""
        out[f"corpus--{n:012x}"] = {
            "path": str(path.relative_to(corpus)),
            "type": doc.type,
            "title": doc.title,
            "content": text,
        }
    return out


def vectors(docs: dict[str, dict], cache: Path) -> dict[str, np.ndarray]:
    """Each document's passage vectors (cached by path and passage text)."""
    from webapp.search import embedder

    stored = dict(np.load(cache)) if cache.exists() else {}
    out = {}
    for doc_id, doc in docs.items():
        passages = embedder.passages(doc["title"], doc["content"], doc["type"])
        key = doc["path"] + "#" + hashlib.sha1("\x00".join(passages).encode()).hexdigest()[:12]
        if key not in stored:
            stored[key] = embedder.embed_passages(passages)
            np.savez(cache, **stored)
        if len(stored[key]):
            out[doc_id] = stored[key]
    return out


def lists(docs: dict[str, dict], store, rule: str) -> dict[str, list[str]]:
    """Each embedded document's similar documents by `rule` (before / after)."""
    from webapp.search import embedder, hybrid, meaning_index
    from webapp.services import similar

    index = meaning_index.UsearchMeaning(None, store)  # type: ignore[arg-type]
    kind = {i: similar.prose(d["type"], d["content"]) for i, d in docs.items()}
    out = {}
    for doc_id in docs:
        if store.vectors_of(doc_id) is None:
            continue
        if rule == "before":
            out[doc_id] = [i for i, s in index.similar(doc_id, ["corpus"], SHOWN) if s >= embedder.RELATED]
            continue
        near = index.similar(doc_id, ["corpus"], hybrid.CANDIDATES)
        kept = set(meaning_index.standing_out(near, similar.SIMILAR_OUTLIER, embedder.RELATED))
        out[doc_id] = [i for i, _ in near if i in kept and kind[i] == kind[doc_id]][:SHOWN]
    return out


def hubness(docs: dict[str, dict], found: dict[str, list[str]]) -> dict:
    """How often documents appear in the others' lists, and little prose beside prose."""
    from webapp.services import similar

    seen = Counter(i for listed in found.values() for i in listed)
    prose = {i for i, d in docs.items() if similar.prose(d["type"], d["content"])}
    mixed = sum(1 for i, listed in found.items() if i in prose and any(j not in prose for j in listed))
    return {
        "documents": len(found),
        "listed_per_document": round(sum(map(len, found.values())) / max(1, len(found)), 2),
        "empty_lists": sum(1 for listed in found.values() if not listed),
        "largest_count": max(seen.values(), default=0),
        "in_over_a_tenth_of_lists": sum(1 for c in seen.values() if c > len(found) / 10),
        "prose_lists_with_little_prose": f"{mixed} of {len(prose & set(found))}",
        "top_hubs": [(docs[i]["path"], docs[i]["type"], c) for i, c in seen.most_common(5)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "trawl-hubness.npz")
    args = parser.parse_args()
    from webapp.search import embedder
    from webapp.search.vectors import VectorStore

    started = time.process_time()
    docs = documents(args.corpus)
    vecs = vectors(docs, args.cache)
    with tempfile.TemporaryDirectory() as work:
        store = VectorStore(Path(work))
        store.add("corpus", vecs)
        report = {
            "date": date.today().isoformat(),
            "model": embedder.status()[1],
            "files": len(docs),
            "embedded": len(vecs),
            "before": hubness(docs, lists(docs, store, "before")),
            "after": hubness(docs, lists(docs, store, "after")),
            "cpu_seconds": round(time.process_time() - started),
        }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"hubness-{date.today().isoformat()}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
