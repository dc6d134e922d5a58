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
  another collection asked of this one, which should list none.

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

from bench.cisi import CISI, DEPTH, RESULTS, Collection, load, measures, short_queries
from bench.semantic import _plain, build, key_of_id

Rule = Callable[[list[tuple[str, float]]], frozenset[str]]
RATIO = 0.5  # the service's default semantic_ratio


def rules() -> dict[str, Rule]:
    """The rules compared: none, every related candidate (before), absolute similarities,
    the production rule (meaning_index.confident) at several strengths."""
    from webapp.search import embedder, meaning_index

    def above(t: float) -> Rule:
        return lambda near: frozenset(i for i, s in near if s >= t)

    def outlier(z: float) -> Rule:
        return lambda near: frozenset(meaning_index.confident(near, z))

    out: dict[str, Rule] = {"none": lambda near: frozenset(), "related": above(embedder.RELATED)}
    for t in (0.84, 0.86, 0.88):
        out[f"sim>={t}"] = above(t)
    for z in (2.0, 2.5, 3.0, 3.5, 4.0):
        out[f"z>={z}"] = outlier(z)
    return out


def run(name: str, coll: Collection, folder_work: Path, vectors: Path, off_topic: dict[str, str]) -> dict:
    """Every rule on one collection's query sets."""
    from webapp.search import SearchQuery, hybrid, meaning_index

    backend, store, _, _ = build(coll, folder_work, vectors)
    index = meaning_index.UsearchMeaning(backend, store)
    sets = {"full": coll.judged(), "short": short_queries(coll), "off_topic": off_topic}
    near = {t: index.nearest(t, ["cisi"], hybrid.CANDIDATES) for qs in sets.values() for t in qs.values()}
    out: dict = {}
    for rule_name, rule in rules().items():
        for set_name, queries in sets.items():
            rows = []
            for qid, text in queries.items():
                related = {i: s for i, s in near[text] if s >= meaning_index.embedder.RELATED}
                meaning = hybrid.Meaning(related, rule(near[text]) & frozenset(related))
                query = SearchQuery(q=_plain(text), limit=DEPTH, snippet_length=0)
                page = hybrid.search(backend, query, RATIO, lambda m=meaning: m)
                ranked = [(key_of_id(r["id"]), r["match"]) for r in page.results]
                rows.append((ranked, coll.qrels.get(qid, set()) if set_name != "off_topic" else set()))
            out.setdefault(rule_name, {})[set_name] = summary(rows)
        print(name, rule_name, json.dumps(out[rule_name]), file=sys.stderr, flush=True)
    return out


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
        "meaning_only_listed_per_query": round(listed / max(1, len(rows)), 2),
    }


def table(results: dict) -> str:
    """One Markdown table per collection."""
    lines = []
    for name, by_rule in results.items():
        lines += [
            f"\n{name}\n",
            "| rule | nDCG@10 full | short | meaning-only top-10 full (rel, P, words' P) | short | "
            "listed/query full | short | off-topic |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for rule, sets in by_rule.items():
            f, s, o = sets["full"], sets["short"], sets["off_topic"]

            def top(m: dict) -> str:
                return (
                    f"{m['meaning_only_top10']} ({m['meaning_only_top10_relevant']}, "
                    f"{m['meaning_only_precision']}, {m['words_precision_same_ranks']})"
                )

            lines.append(
                f"| {rule} | {f['ndcg@10']:.3f} | {s['ndcg@10']:.3f} | {top(f)} | {top(s)} | "
                f"{f['meaning_only_listed_per_query']} | {s['meaning_only_listed_per_query']} | "
                f"{o['meaning_only_listed_per_query']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collection", type=Path, action="append", help="CISI-format folders")
    parser.add_argument("--off-topic", type=Path, help="a collection whose questions none of these answer")
    parser.add_argument("--vectors-dir", type=Path, default=Path(tempfile.gettempdir()) / "trawl-floor")
    args = parser.parse_args()
    from webapp.search import embedder

    folders = args.collection or [CISI]
    args.vectors_dir.mkdir(parents=True, exist_ok=True)
    colls = {f.name: load(f) for f in folders}
    results: dict = {}
    started = time.process_time()
    for i, (name, coll) in enumerate(colls.items()):
        # another collection's questions (the next one's by default)
        other = load(args.off_topic) if args.off_topic else colls[list(colls)[(i + 1) % len(colls)]]
        off_topic = dict(list(other.judged().items())[:100]) if other is not coll else {}
        with tempfile.TemporaryDirectory() as work:
            results[name] = run(name, coll, Path(work), args.vectors_dir / f"{name}.npy", off_topic)
    model = embedder.status()[1].split()[0].lower()  # the model measured, in the file name
    report = {
        "date": date.today().isoformat(),
        "cpu_seconds": round(time.process_time() - started),
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"floor-{date.today().isoformat()}-{model}.json").write_text(json.dumps(report, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
