"""The meaning floor's calibration: `python -m bench.floor [--collection DIR ...]`.

Which documents that no word of the query reaches may be listed (`match: "meaning"`)? Each
rule below picks, from a question's CANDIDATES nearest documents, those meaning is confident
about; Trawl's own hybrid search (search/hybrid.py, as the service runs it, in process over a
TantivyBackend and the vector store) then ranks with it. Per judged collection (CISI format:
../shared/relevance/cisi, and those bench/collections.py builds), on the full questions and on
their three rarest words, for every rule:

- nDCG@10 (must not drop below the rule that lists nothing only meaning found);
- the meaning-only hits in the top 10: how many, how many relevant, and the precision of the
  word hits at the same ranks (the meaning-only ones must be at least half as precise);
- meaning-only hits listed per query (padding), and per off-topic query: the questions of
  the other collections asked of this one, which should list none;
- the better plain BM25 reference's nDCG@10 on both query sets, beside which the rules'
  nDCG@10 is read (the default search must reach 1.1x it).

`--rrf-k 60 30 20 10 5` measures instead the default search (this floor) at each constant of
the reciprocal rank fusion (search/hybrid.py's RRF_K), in one build per collection, beside the
best plain BM25 and Trawl by words alone: bench/results/floor-<date>-rrf.json.

Passage vectors are cached per collection (`--vectors-dir`, embedding CISI takes 5 to 35
minutes). Results: bench/results/floor-<date>.json and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path

from bench.cisi import CISI, DEPTH, RESULTS, Collection, evaluate, load, measures, references, short_queries
from bench.semantic import _plain, build, key_of_id

Rule = Callable[[list[tuple[str, float]]], frozenset[str]]
RATIO = 0.5  # the service's default semantic_ratio
SIMILARITIES = (0.5, 0.55, 0.6, 0.62, 0.65)  # MiniLM's scale (docs/relevance.md, "The model")
OFF_TOPIC = 100  # questions taken from each other collection


def rules() -> dict[str, Rule]:
    """The rules compared: none, every related candidate (the floor before issue 43), the
    question's outliers (z standard deviations above its nearest's mean, at least RELATED:
    the floor of 2026-11-28), outliers that also reach a similarity, and a similarity alone
    (the production rule, meaning_index.confident, at the model's CONFIDENT)."""
    from webapp.search import embedder, meaning_index

    def outlier(z: float, floor: float) -> Rule:
        return lambda near: frozenset(meaning_index.standing_out(near, z, floor))

    out: dict[str, Rule] = {
        "none": lambda near: frozenset(),
        "related": lambda near: frozenset(i for i, s in near if s >= embedder.RELATED),
    }
    for z in (2.0, 3.0):
        out[f"z>={z}"] = outlier(z, embedder.RELATED)
    for floor in (0.55, 0.62):
        out[f"z>=2, sim>={floor}"] = outlier(2.0, floor)
    for floor in SIMILARITIES:
        out[f"sim>={floor}"] = lambda near, f=floor: frozenset(meaning_index.confident(near, f))
    return out


def run(name: str, coll: Collection, folder_work: Path, vectors: Path, off_topic: dict[str, str]) -> dict:
    """Every rule on one collection's query sets, and the best plain BM25 reference's nDCG@10
    on the full and three-word questions (`bm25`)."""
    from webapp.search import hybrid, meaning_index

    backend, store, _, _ = build(coll, folder_work, vectors)
    index = meaning_index.UsearchMeaning(backend, store)
    sets = {"full": coll.judged(), "short": short_queries(coll), "off_topic": off_topic}
    near = {t: index.nearest(t, ["cisi"], hybrid.CANDIDATES) for qs in sets.values() for t in qs.values()}
    refs = references(coll)
    out: dict = {"bm25": {s: _best_bm25(refs, sets[s], coll.qrels) for s in ("full", "short")}}
    for rule_name, rule in rules().items():
        for set_name, queries in sets.items():
            judged = set_name != "off_topic"
            rows = [
                (_ranked(backend, text, near[text], rule), coll.qrels.get(qid, set()) if judged else set())
                for qid, text in queries.items()
            ]
            out.setdefault(rule_name, {})[set_name] = summary(rows)
        print(name, rule_name, json.dumps(out[rule_name]), file=sys.stderr, flush=True)
    return out


def fusion(name: str, coll: Collection, folder_work: Path, vectors: Path, ks: list[int]) -> dict:
    """nDCG@10 of the default search (the production floor) at each reciprocal rank fusion
    constant, in one build (the vector index's graph differs a little between builds), beside
    the best plain BM25 and Trawl by words alone."""
    from webapp.search import hybrid, meaning_index

    backend, store, _, _ = build(coll, folder_work, vectors)
    index = meaning_index.UsearchMeaning(backend, store)
    refs, out, kept = references(coll), {}, hybrid.RRF_K
    for set_name, queries in (("full", coll.judged()), ("short", short_queries(coll))):
        near = {t: index.nearest(t, ["cisi"], hybrid.CANDIDATES) for t in queries.values()}
        rule: Rule = lambda n: frozenset(meaning_index.confident(n))  # noqa: E731
        row = {"bm25": _best_bm25(refs, queries, coll.qrels)}
        for k in ks:
            hybrid.RRF_K = k
            rows = [(_ranked(backend, t, near[t], rule), coll.qrels[q]) for q, t in queries.items()]
            row[f"k={k}"] = summary(rows)["ndcg@10"]
        hybrid.RRF_K = kept
        words = [(_ranked(backend, t, near[t], rule, 0.0), coll.qrels[q]) for q, t in queries.items()]
        row["words"] = summary(words)["ndcg@10"]
        out[set_name] = row
        print(name, set_name, json.dumps(row), file=sys.stderr, flush=True)
    return out


def _best_bm25(refs: dict, queries: dict[str, str], qrels: dict[str, set[str]]) -> float:
    """nDCG@10 of the better of the two plain BM25 references."""
    return max(evaluate(search, queries, qrels)["ndcg@10"] for search in refs.values())


def _ranked(
    backend, text: str, near: list[tuple[str, float]], rule: Rule, ratio: float = RATIO
) -> list[tuple[str, str]]:
    """Trawl's hybrid ranking of a question with this rule picking meaning's own documents:
    (document key, match) best first."""
    from webapp.search import SearchQuery, embedder, hybrid

    if not _plain(text):
        return []  # no word to search (bench.cisi.evaluate): an empty query would list everything
    related = {i: s for i, s in near if s >= embedder.RELATED}
    meaning = hybrid.Meaning(related, rule(near) & frozenset(related))
    query = SearchQuery(q=_plain(text), limit=DEPTH, snippet_length=0)
    page = hybrid.search(backend, query, ratio, lambda: meaning)
    return [(key_of_id(r["id"]), r["match"]) for r in page.results]


def summary(rows: list[tuple[list[tuple[str, str]], set[str]]]) -> dict:
    """nDCG@10; meaning-only hits in the top 10 (count, relevant) beside the word hits'
    precision at the same ranks; meaning-only hits listed per query."""
    ndcg, only_top, only_rel, listed = [], 0, 0, 0
    words_at = [[0, 0] for _ in range(10)]  # per rank: word hits, relevant ones
    only_at = [0] * 10
    for ranked, relevant in rows:
        ndcg.append(measures([k for k, _ in ranked], relevant)["ndcg@10"] if relevant else 0.0)
        listed += sum(m == "meaning" for _, m in ranked)
        for rank, (key, match) in enumerate(ranked[:10]):
            if match == "meaning":
                only_top += 1
                only_rel += key in relevant
                only_at[rank] += 1
            else:
                words_at[rank][0] += 1
                words_at[rank][1] += key in relevant
    same_ranks = sum(only_at[r] * (w[1] / w[0] if w[0] else 0.0) for r, w in enumerate(words_at))
    return {
        "queries": len(rows),
        "ndcg@10": round(sum(ndcg) / max(1, len(ndcg)), 4),
        "meaning_only_top10": only_top,
        "meaning_only_top10_relevant": only_rel,
        "meaning_only_precision": round(only_rel / only_top, 3) if only_top else None,
        "words_precision_same_ranks": round(same_ranks / only_top, 3) if only_top else None,
        "meaning_only_listed": listed,
        "meaning_only_listed_per_query": round(listed / max(1, len(rows)), 3),
    }


def table(results: dict) -> str:
    """One Markdown table per collection."""
    lines = []
    for name, by_rule in results.items():
        bm25 = by_rule["bm25"]
        lines += [
            f"\n{name} (best plain BM25: full {bm25['full']:.3f}, short {bm25['short']:.3f})\n",
            "| rule | nDCG@10 full (vs BM25) | short | meaning-only top-10 full (rel, P, words' P) | "
            "short | listed/query full | short | off-topic |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for rule, sets in by_rule.items():
            if rule != "bm25":
                lines.append(_line(rule, sets, bm25))
    return "\n".join(lines)


def _line(rule: str, sets: dict, bm25: dict) -> str:
    """One rule's row."""
    f, s, o = sets["full"], sets["short"], sets["off_topic"]

    def top(m: dict) -> str:
        return (
            f"{m['meaning_only_top10']} ({m['meaning_only_top10_relevant']}, "
            f"{m['meaning_only_precision']}, {m['words_precision_same_ranks']})"
        )

    return (
        f"| {rule} | {f['ndcg@10']:.3f} ({f['ndcg@10'] / bm25['full']:.2f}x) | "
        f"{s['ndcg@10']:.3f} ({s['ndcg@10'] / bm25['short']:.2f}x) | {top(f)} | {top(s)} | "
        f"{f['meaning_only_listed_per_query']} | {s['meaning_only_listed_per_query']} | "
        f"{o['meaning_only_listed_per_query']} ({o['meaning_only_listed']} in {o['queries']}) |"
    )


def off_topic(colls: dict[str, Collection], name: str) -> dict[str, str]:
    """The first OFF_TOPIC questions of every other collection (none of this one's documents
    is judged for them)."""
    out = {}
    for other, coll in colls.items():
        if other != name:
            out.update({f"{other}:{q}": text for q, text in list(coll.judged().items())[:OFF_TOPIC]})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=Path, action="append", help="CISI-format folders")
    parser.add_argument("--vectors-dir", type=Path, default=Path(tempfile.gettempdir()) / "trawl-floor")
    parser.add_argument("--rrf-k", type=int, nargs="*", help="instead: the default search at these constants")
    args = parser.parse_args()
    from webapp.search import embedder

    folders = args.collection or [CISI]
    args.vectors_dir.mkdir(parents=True, exist_ok=True)
    colls = {f.name: load(f) for f in folders}
    results: dict = {}
    started = time.process_time()
    for name, coll in colls.items():
        with tempfile.TemporaryDirectory() as work:
            vectors = args.vectors_dir / f"{name}.npy"
            if args.rrf_k:
                results[name] = fusion(name, coll, Path(work), vectors, args.rrf_k)
            else:
                results[name] = run(name, coll, Path(work), vectors, off_topic(colls, name))
    report = {
        "date": date.today().isoformat(),
        "model": embedder.model_id(),
        "ratio": RATIO,
        "off_topic": f"the first {OFF_TOPIC} questions of each other collection",
        "cpu_seconds": round(time.process_time() - started),
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    kind = "rrf" if args.rrf_k else embedder.active().key  # what was measured, in the file name
    (RESULTS / f"floor-{date.today().isoformat()}-{kind}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(results, indent=1) if args.rrf_k else table(results))


if __name__ == "__main__":
    main()
