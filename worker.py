"""RQ worker entry.

`python worker.py [--workers N] [--burst] [--extract-only]` runs N workers forked from one
process that has already loaded the app and every extractor library, so the workers (and the
work horse RQ forks for each job, and its extraction child) share those pages instead of holding
a copy each. `--extract-only` workers only help running scans with extraction (a host without
the index: they never coordinate a scan, run OCR or write).
`python worker.py scheduler` runs the scheduler of scheduled scans; `python worker.py watcher`
the watcher of the sources with `watch` on (live index, webapp/watcher.py).
"""

from __future__ import annotations

from webapp import metrics_dir

# first: prometheus_client, imported by the modules below, reads the folder once (metrics_dir.py)
metrics_dir.prepare()

import argparse
import gc
import logging
import os
import signal
import time

import redis
from rq import Worker
from rq.worker_pool import WorkerPool
from rq_scheduler import Scheduler
from sqlalchemy.exc import SQLAlchemyError

from webapp import create_app, embed_jobs, jobs, metrics, watcher
from webapp.extensions import db
from webapp.indexing import diskfull, extractors
from webapp.indexing.ocr import UNAVAILABLE, OcrSettings, availability
from webapp.indexing.state import settle_dead_runs
from webapp.memtune import release_freed, tune_malloc
from webapp.procs import die_with_parent
from webapp.runtime import (
    get_extract_queue,
    get_meaning,
    get_ocr_queue,
    get_queue,
    get_redis,
    require_initialised,
)

SCHEDULER_INTERVAL = 5  # seconds between checks for due scheduled scans
STALL_SWEEP_SECONDS = 15  # how often the scheduler looks for background phases that stalled
REDIS_RETRY_MAX = 5.0  # longest pause between two tries to reach a lost Redis, in seconds
log = logging.getLogger("trawl.worker")


class _Worker(Worker):
    """RQ's worker whose work horse dies with it: a killed worker leaves no job running."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._own_pid = os.getpid()  # the horse's parent, taken before it forks

    def main_work_horse(self, job, queue) -> None:
        die_with_parent(signal.SIGKILL, self._own_pid)
        metrics.work_horse_of(self._own_pid)
        super().main_work_horse(job, queue)

    def maintain_heartbeats(self, job, execution) -> None:
        """RQ's heartbeats while a job runs; Redis out of reach (a network cut) skips one
        instead of ending the worker, and with it the job that may still deliver its work."""
        try:
            super().maintain_heartbeats(job, execution)
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("worker %s: heartbeat missed, Redis unreachable (%s)", self.name, exc)


class _PoolWorker(_Worker):
    """A member of the worker pool: it dies with the pool (a `kill -9` of the pool leaves no
    orphan taking jobs), waits for Redis, and runs without RQ's scheduler.

    Scheduled scans go through rq-scheduler (`python worker.py scheduler`); RQ's own scheduler
    would only cost each worker one more process.
    """

    pool_pid = 0  # the pool's pid, taken before it forks (see _pool_worker_class)

    def work(self, *args, with_scheduler: bool = False, **kwargs) -> bool:
        """Serve the queue (the pool asks for a scheduler: none is started)."""
        die_with_parent(signal.SIGKILL, self.pool_pid)  # no warm shutdown: the pool died hard
        wait_for_redis(self.connection, f"worker {self.name}")
        return super().work(*args, with_scheduler=False, **kwargs)


def _pool_worker_class() -> type[_PoolWorker]:
    """The worker class of a pool started by this process (it knows the pool's pid)."""
    return type("PoolWorker", (_PoolWorker,), {"pool_pid": os.getpid()})


def wait_for_redis(connection: redis.Redis, who: str) -> None:
    """Return once Redis answers, retrying with backoff (one log line per outage)."""
    delay, told = 0.25, False
    while True:
        try:
            connection.ping()
            if told:
                log.info("%s: Redis answers again", who)
            return
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            if not told:
                log.warning("%s: Redis unreachable (%s); waiting for it", who, exc)
                told = True
            time.sleep(delay)
            delay = min(delay * 2, REDIS_RETRY_MAX)


def run_workers(count: int = 1, burst: bool = False, extract_only: bool = False) -> None:
    """Serve the scan queue with `count` worker processes until stopped (with `extract_only`,
    only the queue of helpers of running scans)."""
    tune_malloc()  # before any thread exists; the forked workers, horses and children inherit it
    app = create_app()
    require_initialised(app)  # a clear message on a data folder `trawl init` has not made
    get_meaning(app).sweep()  # temporary files of vector writes killed with their worker
    extractors.preload()
    if not extract_only:  # what a killed or failed writer left (the index sweeps its own at a commit)
        swept = diskfull.sweep(app.config["DATA_DIR"])
        if swept:
            log.info("Removed %d temporary thumbnail files left by an earlier run", swept)
    with app.app_context():
        db.engine.dispose()  # no database connection may cross the fork
    gc.freeze()  # keep the collector from touching (and so copying) the pages forks share
    queues = (
        [get_extract_queue(app)]
        if extract_only
        else [get_queue(app), get_extract_queue(app), get_ocr_queue(app)]
    )  # in order
    level = app.config["LOG_LEVEL"]
    ocr, why = availability(OcrSettings.from_config(app.config))  # asked once, before forks
    if ocr == UNAVAILABLE:
        log.warning("OCR unavailable: %s", why)  # said once, by the process of the workers
    # jobs find the app as current_app: the work horses (and pool workers) fork inside this
    # context, and each job pushes a fresh context of its own (its own database session)
    with app.app_context():
        if count <= 1:
            wait_for_redis(get_redis(app), "worker")
            _Worker(queues, connection=get_redis(app)).work(burst=burst, logging_level=level)
        else:
            WorkerPool(
                queues, connection=get_redis(app), num_workers=count, worker_class=_pool_worker_class()
            ).start(burst=burst, logging_level=level)


class _Scheduler(Scheduler):
    """rq-scheduler whose every tick also records the runs whose worker died as interrupted
    (the one sweep that does: reading a status never writes)."""

    def __init__(self, app, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.app = app

    def enqueue_jobs(self):
        with self.app.app_context():
            try:
                settle_dead_runs(self.app)
                self._requeue_stalled()
            except SQLAlchemyError as exc:  # the database restarting: the next tick sweeps
                log.warning("scheduler: dead runs not swept (%s)", exc)
            finally:
                db.session.remove()
        return super().enqueue_jobs()

    def _requeue_stalled(self) -> None:
        """Every STALL_SWEEP_SECONDS: queue again the background phases that stalled, and the
        scans that failed for want of space whose pause is over."""
        now = time.monotonic()
        if now < getattr(self, "_next_stall_sweep", 0.0):
            return
        self._next_stall_sweep = now + STALL_SWEEP_SECONDS
        for phase in jobs.requeue_stalled(self.app):
            log.warning("scheduler: %s had pending work and no job; queued again", phase)
        for source_id in jobs.retry_scans_for_space(self.app):
            log.warning("scheduler: the scan of %s that failed for want of space queued again", source_id)


def run_scheduler() -> None:
    """Rebuild schedules from the database, then move due runs onto the queue.

    A lost Redis does not end the process (a supervisor would restart it in a loop): the
    scheduler waits until Redis answers, rebuilds the schedules and carries on.
    """
    app = create_app()
    require_initialised(app)
    connection = get_redis(app)
    while True:
        # rq-scheduler's own handlers talk to Redis: while it is away a signal simply stops us
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        wait_for_redis(connection, "scheduler")
        try:
            count = jobs.rebuild_schedules(app)
            log.info("%d scheduled sources", count)
            jobs.resume_ocr(app)
            embed_jobs.resume_embed(app)  # meaning: sources whose documents wait for it
            _Scheduler(app, queue=get_queue(app), connection=connection, interval=SCHEDULER_INTERVAL).run()
            return
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            log.warning("scheduler: lost Redis (%s)", exc)


def run_watcher() -> None:
    """Follow file changes under the watched sources until stopped."""
    tune_malloc()
    app = create_app()
    require_initialised(app)
    gc.collect()
    release_freed()  # what building the app left behind: the watcher idles for days
    watcher.run(app)


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run workers or the scheduler."""
    parser = argparse.ArgumentParser(description="Trawl's RQ workers, scheduler or watcher")
    parser.add_argument("mode", nargs="?", choices=["worker", "scheduler", "watcher"], default="worker")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    parser.add_argument(
        "--extract-only",
        action="store_true",
        help="only help running scans with extraction (a host without the index)",
    )
    args = parser.parse_args(argv)
    if args.mode == "scheduler":
        run_scheduler()
    elif args.mode == "watcher":
        run_watcher()
    else:
        run_workers(args.workers, args.burst, args.extract_only)


if __name__ == "__main__":
    main()
