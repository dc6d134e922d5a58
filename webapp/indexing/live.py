"""The changed paths of a source waiting for a live update, in Redis (a sorted set per source).

The watcher adds paths (score: the time of their latest event); a live update takes them all,
indexes them through the scan pipeline and then removes only those whose score it saw, so a
path changed again meanwhile stays for the next update, and a worker killed halfway leaves them
all for the next one: nothing is lost. Past `max_paths` the set collapses to the source's root
(the next update is then an incremental scan of the whole source, which is what a burst costs).
"""

from __future__ import annotations

import json

import redis

from webapp import keys
from webapp.indexing.runstats import RunStats


def add(conn: redis.Redis, source_id: str, root: str, paths: dict[str, float], max_paths: int) -> None:
    """Add changed paths {path: event time}; collapse to the root past `max_paths`."""
    if not paths:
        return
    key = keys.live_paths(source_id)
    if len(paths) > max_paths:
        paths = {root: max(paths.values())}
    pipe = conn.pipeline()
    pipe.zadd(key, paths)
    pipe.zcard(key)
    _, count = pipe.execute()
    if count > max_paths and len(paths) < count:
        newest = conn.zrange(key, -1, -1, withscores=True)
        pipe = conn.pipeline()
        pipe.delete(key)
        pipe.zadd(key, {root: newest[0][1] if newest else max(paths.values())})
        pipe.execute()


def pending(conn: redis.Redis, source_id: str) -> tuple[list[str], float]:
    """Every waiting path and the highest score among them (what `done` removes up to)."""
    items = conn.zrange(keys.live_paths(source_id), 0, -1, withscores=True)
    paths = [p.decode() if isinstance(p, bytes) else p for p, _ in items]
    return paths, max((score for _, score in items), default=0.0)


def count(conn: redis.Redis, source_id: str) -> int:
    """How many paths wait."""
    return conn.zcard(keys.live_paths(source_id))


def done(conn: redis.Redis, source_id: str, upto: float) -> None:
    """Remove the paths an update handled (those not changed again since it took them)."""
    conn.zremrangebyscore(keys.live_paths(source_id), "-inf", upto)


def forget(conn: redis.Redis, source_id: str) -> None:
    """Drop the source's waiting paths and live stats (the source is gone or not watched)."""
    conn.delete(keys.live_paths(source_id), keys.live_stats(source_id))


def write_stats(conn: redis.Redis, source_id: str, stats: RunStats) -> None:
    """Publish the stats of the current live update."""
    conn.set(keys.live_stats(source_id), json.dumps(stats.to_dict()), ex=keys.STATS_TTL)


def read_stats(conn: redis.Redis, source_id: str) -> RunStats | None:
    """The stats of the current or latest live update, while Redis has them."""
    raw = conn.get(keys.live_stats(source_id))
    return RunStats.from_dict(json.loads(raw)) if raw else None
