"""A source's scan state in Redis: one lock per source (queued or indexing) and the live run stats.

The locks are redis-py's `Lock` (SET NX PX, compare-and-delete, compare-and-renew); one renewal
thread (`Renewal`) keeps a held lock alive, so a killed worker cannot leave a source stuck in
`indexing` or its writer lock taken. The scan lock's token is the run's description (run id,
job id, state), so a reader learns from one GET who holds the source; a queued lock is checked
against its RQ job. Reading any of it never writes: a run whose worker died is marked
interrupted when the lock is next acquired, and by the scheduler's loop (`settle_interrupted`).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import redis
from flask import Flask, current_app
from redis.exceptions import LockNotOwnedError
from redis.lock import Lock
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.utils import as_text

from webapp import keys
from webapp.extensions import db
from webapp.indexing.history import record_run
from webapp.indexing.runstats import RunState, RunStats, SourceState
from webapp.models import Source, iso, utcnow
from webapp.runtime import get_redis

ENQUEUE_GRACE = 30  # seconds a queued lock may exist before its RQ job does
LIVE_YIELD_SECONDS = 15  # a scan asked for during a live update waits this long for it
# Give the lock a new token (the run's new description) and expiry, if it still holds the old one.
_SWAP_TOKEN = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3]) end return 0"
)
# Replace the key's value only if it still holds exactly ARGV[1].
_SET_IF_EQUAL = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('set', KEYS[1], ARGV[2], 'KEEPTTL') end return 0"
)
INTERRUPTED = "Interrupted: the worker running this scan stopped before it finished"
PUBLISHED_AT = "published_at"  # beside the stats in Redis: when the run last published them


def _stats_json(stats: RunStats) -> str:
    return json.dumps({**stats.to_dict(), PUBLISHED_AT: time.time()})


def held_lock(conn: redis.Redis, key: str, ttl: float, token: bytes | None = None) -> Lock:
    """redis-py's Lock over `key` (expiring after `ttl` s unless renewed), shared by the holder's
    threads (its renewal thread renews what the main thread took); `token` when already held."""
    lock = Lock(conn, key, timeout=ttl, sleep=0.05, thread_local=False)
    lock.local.token = token
    return lock


class Renewal:
    """The one renewal thread of a held lock: renews it every third of its expiry until the
    block ends; `lost` when another holder took it over (it had expired) or it was freed."""

    def __init__(self, lock: Lock) -> None:
        self.lock = lock
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True, name="lock-renewal")

    def _renew(self) -> None:
        while not self._stop.wait(max(1.0, self.lock.timeout / 3)):
            try:
                self.lock.reacquire()
            except LockNotOwnedError:
                self.lost = True
                return
            except redis.RedisError:
                continue  # Redis restarting: try again at the next renewal

    def __enter__(self) -> Renewal:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


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
        self.key = keys.scan_lock(source_id)

    def _raw(self) -> bytes | None:
        return self.conn.get(self.key)

    def read(self) -> dict | None:
        """The lock value ({run_id, job_id, state, full}) or None when idle."""
        raw = self._raw()
        return json.loads(raw) if raw else None

    def acquire_queued(self, job_id: str, full: bool, live: bool = False) -> str | None:
        """Take the slot for a queued run; None when another run holds it.

        A live update (`live`) takes the same slot (one writer per source) but keeps its stats
        apart, so the latest scan's stats stay what they were. A run whose worker died is
        marked interrupted first, and a queued lock whose RQ job is gone is freed.
        """
        settle_interrupted(self.source_id)  # the next run must know the last one did not finish
        run_id = uuid.uuid4().hex
        value = json.dumps(
            {
                "run_id": run_id,
                "job_id": job_id,
                "state": SourceState.QUEUED,
                "full": full,
                "live": live,
                "since": time.time(),
            }
        )
        lock = held_lock(self.conn, self.key, keys.QUEUED_LOCK_TTL)
        for _ in range(2):  # once more after freeing a stale queued lock
            if lock.acquire(blocking=False, token=value):
                if not live:
                    self.write_stats(RunStats(RunState.QUEUED))
                return run_id
            if not self._free_stale_queued():
                break
        return None

    def _free_stale_queued(self) -> bool:
        """Free a queued lock whose RQ job is gone (a lost job must not keep a source queued)."""
        raw = self._raw()
        if raw is None:
            return True
        if self._stale(json.loads(raw)):
            try:  # only if the lock is still this queued one: a worker may have just started it
                held_lock(self.conn, self.key, keys.QUEUED_LOCK_TTL, raw).release()
            except LockNotOwnedError:
                pass
            return True
        return False

    def acquire_after_live_update(
        self, job_id: str, full: bool, seconds: float = LIVE_YIELD_SECONDS
    ) -> str | None:
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

    def _swap(self, run_id: str, ttl_ms: int | None = None, **changes) -> Lock | None:
        """Give the run's lock a new description (and expiry); None when it no longer holds it."""
        raw = self._raw()
        if raw is None or json.loads(raw)["run_id"] != run_id:
            return None
        new = json.dumps({**json.loads(raw), **changes}).encode()
        ttl_ms = ttl_ms or max(1, self.conn.pttl(self.key))
        if not self.conn.eval(_SWAP_TOKEN, 1, self.key, raw, new, ttl_ms):
            return None
        return held_lock(self.conn, self.key, ttl_ms / 1000, new)

    def set_job(self, run_id: str, job_id: str) -> None:
        """Record the RQ job id of a queued run (known only after enqueueing)."""
        self._swap(run_id, job_id=job_id)

    def state(self) -> SourceState:
        """idle, queued or indexing; a queued lock whose RQ job is gone reads as idle (the next
        acquisition frees it)."""
        lock = self.read()
        if lock is None or self._stale(lock):
            return SourceState.IDLE
        return SourceState(lock["state"])

    def _stale(self, lock: dict) -> bool:
        """Whether a queued lock's RQ job is gone: ended, unknown, or taken by a worker that
        died before the run began (`_job_alive`)."""
        if lock["state"] != SourceState.QUEUED or time.time() - lock.get("since", 0) < ENQUEUE_GRACE:
            return False  # running, being enqueued right now, or just picked up
        try:
            return not _job_alive(Job.fetch(lock["job_id"], connection=self.conn))
        except NoSuchJobError:
            return True

    def start(self, run_id: str) -> bool:
        """Move a queued run to indexing (expiring after SCAN_LOCK_SECONDS unless renewed:
        `Heartbeat`); False when the run no longer owns the slot."""
        return self._swap(run_id, self.ttl * 1000, state=SourceState.INDEXING) is not None

    def held(self, run_id: str) -> Lock | None:
        """The redis-py Lock of this run, to renew or free; None when it no longer holds it."""
        raw = self._raw()
        if raw is None or json.loads(raw)["run_id"] != run_id:
            return None
        return held_lock(self.conn, self.key, self.ttl, raw)

    def release(self, run_id: str) -> None:
        """Free the slot if this run still holds it."""
        lock = self.held(run_id)
        try:
            if lock is not None:
                lock.release()
        except LockNotOwnedError:
            pass  # it expired or was cancelled meanwhile

    def cancel(self) -> None:
        """Ask the running scan to stop, and free the slot at once."""
        lock = self.read()
        if lock:
            self.conn.set(keys.cancel(lock["run_id"]), "1", ex=keys.CANCEL_TTL)
            self.conn.delete(self.key)

    def cancelled(self, run_id: str) -> bool:
        """Whether this run was asked to stop."""
        return bool(self.conn.exists(keys.cancel(run_id)))

    def write_stats(self, stats: RunStats) -> None:
        """Publish the live stats of the current run (with the time, which a dead run's
        interrupted stats take as their end)."""
        self.conn.set(keys.run_stats(self.source_id), _stats_json(stats), ex=keys.STATS_TTL)

    def read_stats(self) -> RunStats | None:
        """The stats of the current or latest run, while Redis has them."""
        raw = self.conn.get(keys.run_stats(self.source_id))
        return RunStats.from_dict(json.loads(raw)) if raw else None

    def forget(self) -> None:
        """Drop everything Redis holds about the source."""
        self.conn.delete(self.key, keys.run_stats(self.source_id))


def _job_alive(job: Job) -> bool:
    """Whether an RQ job will still run or is running: waiting in its queue, deferred,
    scheduled, or held by a worker whose heartbeat has not lapsed (RQ renews the expiry of
    each execution, its score in the queue's registry of started jobs, while its worker lives).

    A worker killed after it took the job and before the job began leaves it `queued` in no
    queue (RQ never fails such a job: its queued lock would hold the source for good), and one
    killed as the job began leaves it `started` until RQ's maintenance, every ten minutes.
    Read only."""
    status = job.get_status()
    if status in (JobStatus.DEFERRED, JobStatus.SCHEDULED):
        return True
    if status not in (JobStatus.QUEUED, JobStatus.STARTED):
        return False
    conn = job.connection
    if status == JobStatus.QUEUED and conn.lpos(Queue(job.origin, connection=conn).key, job.id) is not None:
        return True
    beating = conn.zrangebyscore(job.started_job_registry.key, time.time(), "+inf")  # job:execution
    return any(as_text(member).startswith(f"{job.id}:") for member in beating)


class Heartbeat(Renewal):
    """The renewal thread of a running scan's lock (`lost` once it was cancelled or expired)."""

    def __init__(self, lock: ScanLock, run_id: str):
        held = lock.held(run_id)
        super().__init__(held or held_lock(lock.conn, lock.key, lock.ttl, b""))
        self.lost = held is None


@contextlib.contextmanager
def writer_lock(source_id: str, app: Flask | None = None) -> Iterator[None]:
    """Held while a source's documents, then records, are written: the scan's coordinator and
    the OCR phase take turns, so neither writes over what the other has just written.

    It expires as the scan lock does (SCAN_LOCK_SECONDS, renewed while held): a coordinator
    killed in the middle of a write blocks nobody longer than its scan lock does."""
    app = app or current_app
    with renewed(
        held_lock(get_redis(app), keys.writer(source_id), app.config["SCAN_LOCK_SECONDS"]), blocking=True
    ):
        yield


@contextlib.contextmanager
def renewed(lock: Lock, blocking: bool) -> Iterator[bool]:
    """Take the lock (waiting for it when `blocking`), renew it while the block runs, free it;
    yields whether it was taken (a non-blocking attempt may find it held)."""
    if not lock.acquire(blocking=blocking):
        yield False
        return
    try:
        with Renewal(lock):
            yield True
    finally:
        try:
            lock.release()
        except LockNotOwnedError:
            pass  # it expired while Redis was away; nothing of ours to free


def stamp() -> str:
    """Now, as the stats write datetimes."""
    return iso(utcnow())


def dead_run(source_id: str, app: Flask | None = None) -> tuple[bytes, RunStats] | None:
    """A run whose worker died (its lock expired while its stats said `indexing`): the stats
    Redis holds and the same run marked interrupted, ending when it last published progress.
    Reads only: a status shows the run interrupted at once, `settle_interrupted` records it."""
    lock = scan_lock(source_id, app)
    raw = lock.conn.get(keys.run_stats(source_id))
    stats = RunStats.from_dict(json.loads(raw)) if raw else None
    if stats is None or stats.state != RunState.INDEXING or lock.state() != SourceState.IDLE:
        return None
    # read afresh: a caller holding the source from before the run ended (its identity map)
    # would otherwise see no final stats and take a run that just finished for dead
    source = db.session.get(Source, source_id, populate_existing=True)
    kept = (source.last_run or {}) if source is not None else {}
    if kept.get("started_at") == stats.started_at:
        return None  # it ended normally: its final stats are on the source and on their way
    ended = RunStats.from_dict(stats.to_dict())
    published = json.loads(raw).get(PUBLISHED_AT)
    ended.state, ended.current_file, ended.message = RunState.INTERRUPTED, None, INTERRUPTED
    ended.finished_at = (
        iso(datetime.fromtimestamp(published, UTC).replace(tzinfo=None))
        if isinstance(published, (int, float))
        else stamp()
    )
    return raw, ended


def settle_interrupted(source_id: str, app: Flask | None = None) -> RunStats | None:
    """Record a dead run as interrupted, in Redis, on the source's `last_run` and in the run
    history, so the next run knows the last one did not finish. Called where the scan lock is
    acquired and by the scheduler's loop (`settle_dead_runs`), never by a read. Returns them."""
    found = dead_run(source_id, app)
    if found is None:
        return None
    raw, ended = found
    if not scan_lock(source_id, app).conn.eval(
        _SET_IF_EQUAL, 1, keys.run_stats(source_id), raw, _stats_json(ended)
    ):
        return None  # someone else moved on in the meantime
    source = db.session.get(Source, source_id)
    if source is not None:
        source.last_run = ended.to_dict()
        record_run(source_id, ended)
        db.session.commit()
    return ended


def settle_dead_runs(app: Flask | None = None) -> int:
    """The scheduler loop's sweep: every source's dead run recorded as interrupted; how many."""
    ids = [sid for (sid,) in db.session.query(Source.id)]
    return sum(settle_interrupted(sid, app) is not None for sid in ids)
