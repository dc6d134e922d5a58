"""Time queries through Recoll's Python module; run with the system python3 that has python3-recoll.

Reads {"confdir", "limit", "queries": {kind: [query, ...]}} as JSON on stdin and prints
{kind: {"ms": [...], "hits": n}} as JSON. Kept free of Trawl imports on purpose.
"""

import json
import sys
import time

from recoll import recoll


def main() -> None:
    """Run every query once (after a short warm-up) and print the timings."""
    job = json.load(sys.stdin)
    db = recoll.connect(confdir=job["confdir"])
    limit = job["limit"]

    def run(q: str) -> int:
        query = db.query()
        count = query.execute(q)
        query.fetchmany(limit)
        return count

    for q in [q for qs in job["queries"].values() for q in qs][:20]:
        run(q)
    out = {}
    for kind, qs in job["queries"].items():
        times, hits = [], 0
        for q in qs:
            started = time.perf_counter()
            hits += run(q) > 0
            times.append((time.perf_counter() - started) * 1000)
        out[kind] = {"ms": times, "hits": hits}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
