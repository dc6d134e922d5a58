"""A source's scan state in Redis: one lock per source (queued or indexing) and the live run stats.

The lock of a running scan expires unless its worker heartbeats, so a killed worker cannot leave
a source stuck in `indexing`; a queued lock is checked against its RQ job.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator

import redis
from flask import Flask, current_app
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from webapp import keys
from webapp.extensions import db
from webapp.indexing.history import record_run
from webapp.indexing.runstats import RunState, RunStats, SourceState
from webapp.models import Source, iso, utcnow
from webapp.runtime import get_redis

ENQUEUE_GRACE = 30  # seconds a queued lock may exist before its RQ job does
LIVE_YIELD_SECONDS = 15  # a scan asked for during a live update waits this long for it
# Delete the key only if it still holds exactly this value (another process may have moved on).
_DELETE_IF_EQUAL = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                    "return redis.call('del', KEYS[1]) end return 0")
# Replace the key's value only if it still holds exactly ARGV[1].
_SET_IF_EQUAL = ("if redis.call('get', KEYS[1]) == ARGV[1] then "
                 "return redis.call('set', KEYS[1], ARGV[2], 'KEEPTTL') end return 0")
_ALIVE_JOB = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}
INTERRUPTED = "Interrupted: the worker running this scan stopped before it finished"


def scan_lock(source_id: str, app: Flask | None = None) -> ScanLock:
    """The scan lock of a source, over the app's Redis and with its lock expiry."""
    app = app or current_app
    return ScanLock(get_redis(app), source_id, app.config["SCAN_LOCK_SECONDS"])


class ScanLock:
    """Who holds a source's scan slot, and the run's live stats."""

    def __init__(self, conn: redis.Redis, source_id: str, ttl: int = 30):
        self.conn = conn
        self.source_id = source_id
        self.ttl = ttl

    def read(self) -> dict | None:
        """The lock value ({run_id, job_id, state, full}) or None when idle."""
        raw = self.conn.get(keys.scan_lock(self.source_id))
        return json.loads(raw) if raw else None

    def acquire_queued(self, job_id: str, full: bool, live: bool = False) -> str | None:
        """Take the slot for a queued run; None when another run holds it.

        A live update (`live`) takes the same slot (one writer per source) but keeps its stats
        apart, so the latest scan's stats stay what they were.
        """
        run_id = uuid.uuid4().hex
        value = json.dumps({"run_id": run_id, "job_id": job_id, "state": SourceState.QUEUED,
                            "full": full, "live": live, "since": time.time()})
        for _ in range(2):  # once more if state() found a stale lock and cleared it
            if self.conn.set(keys.scan_lock(self.source_id), value, nx=True,
                             ex=keys.QUEUED_LOCK_TTL):
                if not live:
                    self.write_stats(RunStats(RunState.QUEUED))
                return run_id
            if self.state() != SourceState.IDLE:
                break
        return None

    def acquire_after_live_update(self, job_id: str, full: bool,
                                  seconds: float = LIVE_YIELD_SECONDS) -> str | None:
        """acquire_queued for a scan; a live update holding the slot (a short run the watcher
        asked for) is waited for, up to `seconds`, instead of refusing at once."""
        run_id = self.acquire_queued(job_id, full)
        deadline = time.monotonic() + seconds
        while run_id is None and time.monotonic() < deadline:
            lock = self.read()
            if lock is not None and not lock.get("live"):
                return None
            time.sleep(0.1)
            run_id = self.acquire_queued(job_id, full)
        return run_id

    def set_job(self, run_id: str, job_id: str) -> None:
        """Record the RQ job id of a queued run (known only after enqueueing)."""
        lock = self.read()
        if lock and lock["run_id"] == run_id:
            lock["job_id"] = job_id
            self.conn.set(keys.scan_lock(self.source_id), json.dumps(lock), xx=True, keepttl=True)

    def state(self) -> SourceState:
        """idle, queued or indexing; a queued lock whose job is gone is released."""
        raw = self.conn.get(keys.scan_lock(self.source_id))
        if raw is None:
            return SourceState.IDLE
        lock = json.loads(raw)
        if lock["state"] == SourceState.QUEUED and not self._job_alive(lock):
            # only if the lock is still this queued one: a worker may have just started the run
            self.conn.eval(_DELETE_IF_EQUAL, 1, keys.scan_lock(self.source_id), raw)
            if self.conn.exists(keys.scan_lock(self.source_id)):
                return self.state()
            return SourceState.IDLE
        return SourceState(lock["state"])

    def _job_alive(self, lock: dict) -> bool:
        if time.time() - lock.get("since", 0) < ENQUEUE_GRACE:
            return True  # being enqueued right now, or just picked up
        try:
            return Job.fetch(lock["job_id"], connection=self.conn).get_status() in _ALIVE_JOB
        except NoSuchJobError:
            return False

    def start(self, run_id: str) -> bool:
        """Move a queued run to indexing; False when the run no longer owns the slot."""
        lock = self.read()
        if not lock or lock["run_id"] != run_id:
            return False
        lock["state"] = SourceState.INDEXING
        self.conn.set(keys.scan_lock(self.source_id), json.dumps(lock), ex=self.ttl)
        return True

    def heartbeat(self, run_id: str) -> bool:
        """Extend the lock of a running scan; False when it was lost (cancelled or expired)."""
        lock = self.read()
        if not lock or lock["run_id"] != run_id:
            return False
        return bool(self.conn.expire(keys.scan_lock(self.source_id), self.ttl))

    def release(self, run_id: str) -> None:
        """Free the slot if this run still holds it."""
        raw = self.conn.get(keys.scan_lock(self.source_id))
        if raw is not None and json.loads(raw)["run_id"] == run_id:
            self.conn.eval(_DELETE_IF_EQUAL, 1, keys.scan_lock(self.source_id), raw)

    def cancel(self) -> None:
        """Ask the running scan to stop, and free the slot at once."""
        lock = self.read()
        if lock:
            self.conn.set(keys.cancel(lock["run_id"]), "1", ex=keys.CANCEL_TTL)
            self.conn.delete(keys.scan_lock(self.source_id))

    def cancelled(self, run_id: str) -> bool:
        """Whether this run was asked to stop."""
        return bool(self.conn.exists(keys.cancel(run_id)))

    def write_stats(self, stats: RunStats) -> None:
        """Publish the live stats of the current run."""
        self.conn.set(keys.run_stats(self.source_id), json.dumps(stats.to_dict()),
                      ex=keys.STATS_TTL)

    def read_stats(self) -> RunStats | None:
        """The stats of the current or latest run, while Redis has them."""
        raw = self.conn.get(keys.run_stats(self.source_id))
        return RunStats.from_dict(json.loads(raw)) if raw else None

    def replace_stats(self, old: RunStats, new: RunStats) -> bool:
        """Write `new` only if Redis still holds `old` (the run may have published since)."""
        return bool(self.conn.eval(_SET_IF_EQUAL, 1, keys.run_stats(self.source_id),
                                   json.dumps(old.to_dict()), json.dumps(new.to_dict())))

    def forget(self) -> None:
        """Drop everything Redis holds about the source."""
        self.conn.delete(keys.scan_lock(self.source_id), keys.run_stats(self.source_id))


class Heartbeat:
    """Background thread that keeps a running scan's lock alive until stopped."""

    def __init__(self, lock: ScanLock, run_id: str):
        self.lock = lock
        self.run_id = run_id
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True, name="scan-heartbeat")

    def _beat(self) -> None:
        interval = max(1.0, self.lock.ttl / 3)
        while not self._stop.wait(interval):
            try:
                if not self.lock.heartbeat(self.run_id):
                    self.lost = True
                    return
            except redis.RedisError:
                continue  # Redis restarting: try again next beat

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


class RedisLock:
    """A lock in Redis that expires unless its holder renews it (a dead holder frees it)."""

    def __init__(self, conn: redis.Redis, key: str, ttl: int) -> None:
        self.conn = conn
        self.key = key
        self.ttl = ttl
        self.token = uuid.uuid4().hex

    def acquire(self) -> bool:
        """Take the lock if it is free."""
        return bool(self.conn.set(self.key, self.token, nx=True, ex=self.ttl))

    def wait(self, poll: float = 0.05) -> None:
        """Take the lock, waiting while another holds it (at most its TTL after a holder died)."""
        while not self.acquire():
            time.sleep(poll)

    def release(self) -> None:
        """Free the lock if this holder still has it."""
        self.conn.eval(_DELETE_IF_EQUAL, 1, self.key, self.token)

    @contextlib.contextmanager
    def kept(self) -> Iterator[None]:
        """Renew the taken lock from a thread while the block runs, then free it."""
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(max(1.0, self.ttl / 3)):
                try:
                    self.conn.expire(self.key, self.ttl)
                except redis.RedisError:
                    continue  # Redis restarting: try again at the next beat

        thread = threading.Thread(target=renew, daemon=True, name="lock-renewal")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5)
            self.release()


@contextlib.contextmanager
def writer_lock(source_id: str, app: Flask | None = None) -> Iterator[None]:
    """Held while a source's documents, then records, are written: the scan's coordinator and
    the OCR phase take turns, so neither writes over what the other has just written.

    It expires as the scan lock does (SCAN_LOCK_SECONDS, renewed while held): a coordinator
    killed in the middle of a write blocks nobody longer than its scan lock does."""
    app = app or current_app
    lock = RedisLock(get_redis(app), keys.writer(source_id), app.config["SCAN_LOCK_SECONDS"])
    lock.wait()
    with lock.kept():
        yield


def stamp() -> str:
    """Now, as the stats write datetimes."""
    return iso(utcnow())


def settle_interrupted(source_id: str, app: Flask | None = None) -> RunStats | None:
    """Mark a run whose worker died (its lock expired while it said `indexing`) as interrupted.

    Redis and the source's `last_run` both get the interrupted stats, so the run is not shown
    as indexing for good and the next run knows the last one did not finish. Returns them.
    """
    lock = scan_lock(source_id, app)
    stats = lock.read_stats()
    if stats is None or stats.state != RunState.INDEXING or lock.state() != SourceState.IDLE:
        return None
    # read afresh: a caller holding the source from before the run ended (its identity map)
    # would otherwise see no final stats and mark a run that just finished as interrupted
    source = db.session.get(Source, source_id, populate_existing=True)
    kept = (source.last_run or {}) if source is not None else {}
    if kept.get("started_at") == stats.started_at:
        return None  # it ended normally: its final stats are on the source and on their way
    ended = RunStats.from_dict(stats.to_dict())
    ended.state, ended.finished_at = RunState.INTERRUPTED, stamp()
    ended.current_file, ended.message = None, INTERRUPTED
    if not lock.replace_stats(stats, ended):
        return None  # someone else moved on in the meantime
    if source is not None:
        source.last_run = ended.to_dict()
        record_run(source_id, ended)
        db.session.commit()
    return ended
