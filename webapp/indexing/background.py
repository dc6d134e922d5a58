"""Background phases (OCR, and any later phase of the same kind): the policy that keeps them
behind indexing.

Scans and live updates must never wait behind a background phase, so every phase job:

- runs only in a **slot** (a Redis sorted set of holders whose entries expire unless renewed):
  at most `workers - 1` jobs hold one at a time (1 with a single worker), so with two workers
  or more one is always left to the main queue;
- without a slot, waits on its worker only while the main queue is empty, and hands the worker
  back the moment a scan, live update or helper is queued there;
- calls `check()` between pages: it **yields** (ends its job, keeping its progress, and queues
  its successor behind the main queue) when a job waits on the main queue or the job has run
  its share of time (JOB_SECONDS; a phase that asks for it goes on up to `alone_seconds` while
  no other background job waits: each new job is a fork and a fresh start), and **stops** when
  its source was deleted;
- **steps aside** before each piece of work while searches are being answered (`step_aside`:
  a search marks the moment in Redis, `searched`), so that searching never shares the cores
  with the background;
- passes `stopped` to the extraction child's wait (`isolation.Extractor.interrupt`), so a
  deleted source ends the page being read within about a second.

Each phase keeps an account per source in Redis (`PhaseInfo`): its observed rate (for the
status's `eta_seconds`), why it waits (`waiting`), and the error that stopped it (a full disk,
a vector file that cannot be read) with when it tries again (RETRY_FIRST doubling up to
RETRY_MAX). The scheduler's sweep (`stalled`) queues again any source whose phase has had
pending work and no job for STALL_SECONDS, so no phase stalls for good whatever ended its
last job.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Iterator

import redis
from flask import Flask
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from sqlalchemy import select

from webapp import keys
from webapp.extensions import db
from webapp.models import Source
from webapp.runtime import get_ocr_queue, get_queue, get_redis, worker_count

JOB_SECONDS = 60.0  # a job yields after this: other sources' phases and new scans get a turn
CHECK_SECONDS = 1.0  # how often a waiting or running phase looks at the queue and its source
SLOT_TTL = 30  # a slot whose holder stopped renewing it (a killed worker) is free after this
STALL_SECONDS = 60.0  # pending work with no job for this long: the scheduler queues the phase
RETRY_FIRST = 30.0  # seconds before a phase stopped by an error (full disk) tries again ...
RETRY_MAX = 600.0  # ... doubling up to this
RATE_WEIGHT = 0.3  # weight of the newest job's rate in the smoothed rate (the ETA)
STEP_ASIDE_SECONDS = 0.5  # after a search the phases start no new piece of work for this long ...
STEP_ASIDE_MAX = 2.0  # ... waiting at most this long in a row: a stream of searches leaves them some
# Take a slot if fewer than ARGV[3] unexpired holders have one (ARGV: now, expiry, limit, holder).
_TAKE_SLOT = """
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('zadd', KEYS[1], ARGV[2], ARGV[4])
  return 1
end
return 0
"""


class Yielded(Exception):
    """The phase gave its worker back (a job waits on the main queue, or its time is up)."""


class Stopped(Exception):
    """The phase's source was deleted: its work is dropped."""


def slot_limit(app: Flask) -> int:
    """Background jobs that may run at once: one worker is always left to indexing."""
    return max(1, worker_count(get_queue(app)) - 1)


def indexing_waits(app: Flask) -> bool:
    """Whether a job (scan, live update, helper, rename) waits on the main queue."""
    return get_queue(app).count > 0


def job_waiting(job_id: str) -> bool:
    """Whether an RQ job is still waiting to run (queued, deferred or scheduled)."""
    try:
        return Job.fetch(job_id, connection=get_redis()).get_status() in (
            JobStatus.QUEUED,
            JobStatus.DEFERRED,
            JobStatus.SCHEDULED,
        )
    except NoSuchJobError:
        return False


def enqueue_once(
    func, source_id: str, queued_key: str, timeout: int, result_ttl: int, failure_ttl: int
) -> None:
    """Queue a phase's job for a source on the background queue, unless the one queued before
    (its id kept under `queued_key`) is still waiting."""
    conn = get_redis()
    queued = conn.get(queued_key)
    if queued is not None and job_waiting(queued.decode()):
        return
    job = get_ocr_queue().enqueue(
        func, source_id, job_timeout=timeout, result_ttl=result_ttl, failure_ttl=failure_ttl
    )
    conn.set(queued_key, job.id, ex=keys.OCR_QUEUED_TTL)


def next_backoff(info: dict) -> float:
    """The pause before the next try after a failure: RETRY_FIRST, doubling with each failure
    in a row (`info["backoff"]`, the pause before) up to RETRY_MAX."""
    return min(RETRY_MAX, info.get("backoff", RETRY_FIRST / 2) * 2)


def searched(conn: redis.Redis) -> None:
    """A search is being answered: the phases step aside for a moment (Phase.step_aside).
    Redis unreachable (a command line beside a stopped service): nothing to step aside."""
    with contextlib.suppress(redis.RedisError):
        conn.set(keys.SEARCHING, b"1", px=int(STEP_ASIDE_SECONDS * 1000))


class Phase:
    """One background job's view of the policy: its slot, its yield and stop checks."""

    def __init__(self, app: Flask, kind: str, source_id: str, alone_seconds: float = 0.0) -> None:
        self.app = app
        self.source_id = source_id
        self.holder = f"{kind}:{source_id}:{uuid.uuid4().hex}"
        started = time.monotonic()
        self.deadline = started + JOB_SECONDS
        self.last = started + max(JOB_SECONDS, alone_seconds)  # the latest end while alone
        self.pages = 0  # pages (or other units of work) this job has done
        self._conn: redis.Redis = get_redis(app)
        self._checked = 0.0
        self._gone = False

    # -- the slot ------------------------------------------------------------------------------
    def _take(self) -> bool:
        now = time.time()
        return bool(
            self._conn.eval(
                _TAKE_SLOT, 1, keys.BACKGROUND_SLOTS, now, now + SLOT_TTL, slot_limit(self.app), self.holder
            )
        )

    @contextlib.contextmanager
    def slot(self) -> Iterator[bool]:
        """Hold a slot while the block runs (renewed from a thread); yields False, without
        waiting longer, when indexing needs the worker, the source is gone or time is up."""
        while not self._take():
            if indexing_waits(self.app) or self.stopped() or time.monotonic() > self.deadline:
                # (waiting, a job yields to other sources' phases when its time is up)
                yield False
                return
            time.sleep(CHECK_SECONDS)
        stop = threading.Event()

        def renew() -> None:
            while not stop.wait(SLOT_TTL / 3):
                with contextlib.suppress(redis.RedisError):
                    self._conn.zadd(keys.BACKGROUND_SLOTS, {self.holder: time.time() + SLOT_TTL}, xx=True)

        thread = threading.Thread(target=renew, daemon=True, name="background-slot")
        thread.start()
        try:
            yield True
        finally:
            stop.set()
            thread.join(timeout=5)
            with contextlib.suppress(redis.RedisError):
                self._conn.zrem(keys.BACKGROUND_SLOTS, self.holder)

    # -- the checks ----------------------------------------------------------------------------
    def stopped(self) -> bool:
        """Whether the source was deleted (asked of the database at most once a second)."""
        now = time.monotonic()
        if not self._gone and now - self._checked >= CHECK_SECONDS:
            self._checked = now
            self._gone = db.session.scalar(select(Source.id).where(Source.id == self.source_id)) is None
            db.session.rollback()  # no transaction stays open while pages are read
        return self._gone

    def check(self) -> None:
        """Between two pages: raise Stopped or Yielded when the phase must end its job (a job
        whose time is up yields only once it has done a page: every job moves forward)."""
        self.check_urgent()
        if self.pages and self._time_up():
            raise Yielded(self.source_id)

    def check_urgent(self) -> None:
        """Within a page: raise Stopped or Yielded only for a deleted source or a job waiting
        on the main queue (the job's time is looked at between pages)."""
        if self.stopped():
            raise Stopped(self.source_id)
        if indexing_waits(self.app):
            raise Yielded(self.source_id)

    def step_aside(self) -> None:
        """Before a piece of work (a model call, a page read by OCR): wait while searches are
        being answered (one began in the last STEP_ASIDE_SECONDS), at most STEP_ASIDE_MAX in a
        row. A search on a busy machine then does not share the cores, nor their caches, with
        the model; the urgent checks go on meanwhile."""
        until = time.monotonic() + STEP_ASIDE_MAX
        while self._conn.exists(keys.SEARCHING) and time.monotonic() < until:
            self.check_urgent()
            time.sleep(0.05)

    def _time_up(self) -> bool:
        """Whether the job has run its share: JOB_SECONDS, or up to `last` while no other
        background job waits."""
        now = time.monotonic()
        if now <= self.deadline:
            return False
        if now < self.last and get_ocr_queue(self.app).count == 0:
            self.deadline = min(self.last, now + CHECK_SECONDS)  # asked again in a second
            return False
        return True

    def page_done(self) -> None:
        """Count one page (or unit) of work done by this job."""
        self.pages += 1


class PhaseInfo:
    """A background phase's account of one source, in Redis (see the module doc)."""

    def __init__(self, kind: str, source_id: str, conn: redis.Redis | None = None) -> None:
        self.key = keys.phase_info(kind, source_id)
        self.conn = conn or get_redis()

    def read(self) -> dict:
        """{"rate", "waiting", "error", "retry_at", "backoff", "idle_since"} as stored."""
        raw = self.conn.get(self.key)
        return json.loads(raw) if raw else {}

    def _update(self, **values) -> None:
        info = {**self.read(), **values}
        self.conn.set(
            self.key, json.dumps({k: v for k, v in info.items() if v is not None}), ex=keys.PHASE_INFO_TTL
        )

    def ran(self, units: int, seconds: float) -> None:
        """A job did `units` in `seconds`: the smoothed rate moves; the error is gone."""
        info = self.read()
        rate = info.get("rate")
        if units and seconds > 0:
            rate = (
                units / seconds if rate is None else (1 - RATE_WEIGHT) * rate + RATE_WEIGHT * units / seconds
            )
        self.conn.set(self.key, json.dumps({"rate": rate} if rate else {}), ex=keys.PHASE_INFO_TTL)

    def eta_seconds(self, pending: int, info: dict | None = None) -> int | None:
        """Seconds until `pending` units are done at the observed rate (None: no rate yet);
        `info` is what read() gave, when the caller has it already."""
        if not pending:
            return 0
        rate = (self.read() if info is None else info).get("rate")
        return round(pending / rate) if rate else None

    def waiting(self, reason: str | None) -> None:
        """Say why the phase waits (None: it does not)."""
        self._update(waiting=reason)

    def failed(self, error: str) -> None:
        """The phase stopped on `error`: tried again after a backoff that doubles each time."""
        backoff = next_backoff(self.read())
        self._update(error=error, backoff=backoff, retry_at=time.time() + backoff, waiting=None)

    def retry_due(self) -> bool:
        """Whether the phase may run: no error, or its backoff is over."""
        return time.time() >= self.read().get("retry_at", 0)

    def idle_for(self, idle: bool) -> float:
        """Seconds the phase has had pending work and no job (0 when it has a job)."""
        info = self.read()
        if not idle:
            if info.get("idle_since"):
                self._update(idle_since=None)
            return 0.0
        if not info.get("idle_since"):
            self._update(idle_since=time.time())
            return 0.0
        return time.time() - info["idle_since"]


def has_job(running_key: str, queued_key: str) -> bool:
    """Whether a phase's job of a source runs or waits to run."""
    conn = get_redis()
    if conn.exists(running_key):
        return True
    queued = conn.get(queued_key)
    return queued is not None and job_waiting(queued.decode())


def stalled(kind: str, sources: list[str], running, queued) -> list[str]:
    """Of these sources with pending work, those whose phase has had no job for
    STALL_SECONDS and whose error backoff (if any) is over: to be queued again."""
    out = []
    for source_id in sources:
        info = PhaseInfo(kind, source_id)
        idle = not has_job(running(source_id), queued(source_id))
        if info.idle_for(idle) >= STALL_SECONDS and info.retry_due():
            out.append(source_id)
    return out
