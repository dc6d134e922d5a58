"""The CISI test collection and what every relevance run shares: reading it, the queries
(full questions and their three rarest words), the measures (nDCG@10, MAP@100, P@10,
Recall@100), the two plain BM25 references built with Tantivy, and running systems over the
query sets. Used by bench/relevance.py (Trawl by words, and with meaning over HTTP) and
bench/semantic.py (meaning in process); neither imports the other's internals from here.
"""

from __future__ import annotations

import math
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tantivy

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
CISI = (ROOT / ".." / "shared" / "relevance" / "cisi").resolve()
DEPTH = 100  # results read per query
SHORT_WORDS = 3  # the rarest words kept for the typed-like queries
_FIELD_RE = re.compile(r"^\.([A-Z])\s*(.*)$")
_WORD_RE = re.compile(r"\w+")

Search = Callable[[str], list[str]]  # query text -> ranked document keys


@dataclass
class Collection:
    """A test collection: documents (key -> title, body), queries and judgments."""

    docs: dict[str, tuple[str, str]]
    queries: dict[str, str]
    qrels: dict[str, set[str]]

    def judged(self) -> dict[str, str]:
        """The queries that have relevance judgments (the only ones evaluated)."""
        return {q: text for q, text in self.queries.items() if self.qrels.get(q)}


def _records(path: Path) -> dict[str, dict[str, str]]:
    """`.I id` records of a SMART-format file, each a dict of field letter -> text."""
    records: dict[str, dict[str, str]] = {}
    current: dict[str, list[str]] | None = None
    field = ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = _FIELD_RE.match(line)
        if m and m.group(1) == "I":
            current = {}
            records[m.group(2).strip()] = current  # type: ignore[assignment]
            field = ""
        elif m and current is not None:
            field = m.group(1)
            current.setdefault(field, [])
            if m.group(2).strip():
                current[field].append(m.group(2))
        elif current is not None and field:
            current[field].append(line)
    return {
        k: {f: " ".join(" ".join(v).split()) for f, v in r.items()}  # type: ignore[union-attr]
        for k, r in records.items()
    }


def load(folder: Path = CISI) -> Collection:
    """Read CISI.ALL, CISI.QRY and CISI.REL."""
    docs = {
        k: (r.get("T", ""), " ".join(filter(None, (r.get("A", ""), r.get("W", "")))))
        for k, r in _records(folder / "CISI.ALL").items()
    }
    queries = {k: r.get("W") or r.get("T", "") for k, r in _records(folder / "CISI.QRY").items()}
    qrels: dict[str, set[str]] = {}
    for line in (folder / "CISI.REL").read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2:
            qrels.setdefault(parts[0], set()).add(parts[1])
    return Collection(docs, queries, qrels)


def file_name(key: str) -> str:
    """The file a document is written to (its key is recovered from the name)."""
    return f"cisi-{int(key):04d}.md"


def key_of(basename: str) -> str:
    """The document key of a file written by write_tree."""
    return str(int(basename.split("-", 1)[1].split(".", 1)[0]))


def write_tree(coll: Collection, root: Path) -> None:
    """Each document as a Markdown file: the title as its heading, then author and abstract."""
    root.mkdir(parents=True, exist_ok=True)
    for key, (title, body) in coll.docs.items():
        (root / file_name(key)).write_text(f"# {title}\n\n{body}\n", encoding="utf-8")


def short_queries(coll: Collection, n: int = SHORT_WORDS) -> dict[str, str]:
    """Each judged query cut to its `n` rarest words (document frequency over the collection),
    in their original order: what a person would type."""
    df: Counter[str] = Counter()
    for title, body in coll.docs.values():
        df.update(set(_WORD_RE.findall(f"{title} {body}".lower())))
    out = {}
    for qid, text in coll.judged().items():
        words = list(dict.fromkeys(w for w in _WORD_RE.findall(text.lower()) if df[w] > 0))
        keep = set(sorted(words, key=lambda w: (df[w], words.index(w)))[:n])
        out[qid] = " ".join(w for w in words if w in keep)
    return out


# --- measures --------------------------------------------------------------------------------


def measures(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    """nDCG@10, AP over the top 100, P@10 and Recall@100 of one ranking (binary judgments)."""
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    hits, precision_sum = 0, 0.0
    for i, d in enumerate(ranked[:DEPTH]):
        if d in relevant:
            hits += 1
            precision_sum += hits / (i + 1)
    return {
        "ndcg@10": dcg / ideal if ideal else 0.0,
        "map@100": precision_sum / len(relevant),
        "p@10": sum(d in relevant for d in ranked[:10]) / 10,
        "recall@100": hits / len(relevant),
    }


def evaluate(search: Search, queries: dict[str, str], qrels: dict[str, set[str]]) -> dict:
    """Mean measures of a search function over the queries, plus zero-result count and time."""
    totals: Counter[str] = Counter()
    empty = 0
    started = time.perf_counter()
    for qid, text in queries.items():
        # a query with no word (a three-word cut none of whose words the collection holds) lists
        # nothing: in process an empty query would list every document in file order
        ranked = search(text) if text.strip() else []
        empty += not ranked
        totals.update(measures(ranked, qrels[qid]))
    n = len(queries)
    out = {k: round(v / n, 4) for k, v in sorted(totals.items())}
    out.update(
        queries=n, zero_results=empty, ms_per_query=round((time.perf_counter() - started) * 1000 / n, 1)
    )
    return out


# --- the plain BM25 reference ---------------------------------------------------------------


REFERENCE_TOKENIZERS = ("default", "en_stem")


class Bm25Reference:
    """Plain Tantivy BM25: one of its own tokenizers, OR query over title and body."""

    def __init__(self, coll: Collection, tokenizer: str = "default") -> None:
        sb = tantivy.SchemaBuilder()
        sb.add_text_field("key", stored=True, tokenizer_name="raw")
        sb.add_text_field("title", tokenizer_name=tokenizer)
        sb.add_text_field("body", tokenizer_name=tokenizer)
        self.index = tantivy.Index(sb.build())
        writer = self.index.writer(50_000_000, 1)
        for key, (title, body) in coll.docs.items():
            writer.add_document(tantivy.Document(key=[key], title=[title], body=[body]))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()

    def search(self, text: str) -> list[str]:
        """Top DEPTH keys for a query (query-syntax characters are read as plain words)."""
        words = _WORD_RE.findall(text.lower())
        if not words:
            return []
        query = self.index.parse_query(" ".join(words), ["title", "body"])
        searcher = self.index.searcher()
        hits = searcher.search(query, DEPTH).hits
        return [searcher.doc(address)["key"][0] for _, address in hits]


def references(coll: Collection) -> dict[str, Search]:
    """Both plain BM25 references, built in this run."""
    return {f"bm25_{name}": Bm25Reference(coll, name).search for name in REFERENCE_TOKENIZERS}


def halves(queries: dict[str, str]) -> dict[str, dict[str, str]]:
    """The queries split by position (odd / even), to check a gain holds on both halves."""
    keys = list(queries)
    return {"a": {k: queries[k] for k in keys[0::2]}, "b": {k: queries[k] for k in keys[1::2]}}


def run_sets(coll: Collection, systems: dict[str, Search]) -> dict:
    """Every system on the full questions and on the three-rarest-word queries, and on the
    two halves of each; `vs_best_bm25` is each system's nDCG@10 over the better reference."""
    sets: dict[str, dict[str, str]] = {}
    for set_name, queries in (("full", coll.judged()), ("short", short_queries(coll))):
        sets[set_name] = queries
        for half, part in halves(queries).items():
            sets[f"{set_name}_half_{half}"] = part
    out: dict = {}
    for set_name, queries in sets.items():
        out[set_name] = {name: evaluate(fn, queries, coll.qrels) for name, fn in systems.items()}
        best = max(m["ndcg@10"] for n, m in out[set_name].items() if n.startswith("bm25_"))
        for m in out[set_name].values():
            m["vs_best_bm25"] = round(m["ndcg@10"] / best, 3) if best else None
    return out


def table(result: dict) -> str:
    """The results as a Markdown table per query set."""
    lines = []
    for set_name, systems in result["results"].items():
        lines += [
            f"\n{set_name} ({next(iter(systems.values()))['queries']} queries)\n",
            "| system | nDCG@10 | vs best BM25 | MAP@100 | P@10 | Recall@100 | no result | ms/query |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, m in systems.items():
            lines.append(
                f"| {name} | {m['ndcg@10']:.3f} | {m['vs_best_bm25']:.2f}x | "
                f"{m['map@100']:.3f} | "
                f"{m['p@10']:.3f} | {m['recall@100']:.3f} | {m['zero_results']} | "
                f"{m['ms_per_query']} |"
            )
    return "\n".join(lines)
