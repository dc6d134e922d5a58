"""RQ worker entry.

`python worker.py [--workers N] [--burst]` runs N workers forked from one process that has
already loaded the app and every extractor library, so the workers (and the work horse RQ forks
for each job, and its extraction child) share those pages instead of holding a copy each.
`python worker.py scheduler` runs the scheduler of scheduled scans.
"""

from __future__ import annotations

import argparse
import gc
import logging
from multiprocessing import get_context

from rq import Worker
from rq.worker_pool import WorkerPool
from rq_scheduler import Scheduler

from webapp import create_app, jobs
from webapp.extensions import db
from webapp.indexing import extractors
from webapp.memtune import tune_malloc
from webapp.runtime import get_queue, get_redis

SCHEDULER_INTERVAL = 5  # seconds between checks for due scheduled scans


class _Pool(WorkerPool):
    """RQ's worker pool, minus the RQ scheduler process it forks beside every worker.

    Scheduled scans go through rq-scheduler (`python worker.py scheduler`); RQ's own scheduler
    would only cost each worker one more process.
    """

    def get_worker_process(self, name: str, burst: bool, _sleep: float = 0,
                           logging_level: str = "INFO"):
        return self._ForkProcess(target=_pool_worker, name=f"Worker {name}",
                                 args=(name, self._queue_names, self.connection, burst,
                                       logging_level))

    _ForkProcess = get_context("fork").Process


def _pool_worker(name: str, queues: list[str], connection, burst: bool, level: str) -> None:
    """Body of one forked pool worker (the Redis client reconnects after the fork)."""
    connection.connection_pool.reset()
    Worker(queues, name=name, connection=connection).work(burst=burst, logging_level=level)


def run_workers(count: int = 1, burst: bool = False) -> None:
    """Serve the scan queue with `count` worker processes until stopped."""
    tune_malloc()  # before any thread exists; the forked workers, horses and children inherit it
    app = create_app()
    extractors.preload()
    with app.app_context():
        db.engine.dispose()  # no database connection may cross the fork
    gc.freeze()  # keep the collector from touching (and so copying) the pages forks share
    queue, level = get_queue(app), app.config["LOG_LEVEL"]
    # jobs find the app as current_app: the work horses (and pool workers) fork inside this
    # context, and each job pushes a fresh context of its own (its own database session)
    with app.app_context():
        if count <= 1:
            Worker([queue], connection=get_redis(app)).work(burst=burst, logging_level=level)
        else:
            _Pool([queue], connection=get_redis(app), num_workers=count).start(
                burst=burst, logging_level=level)


def run_scheduler() -> None:
    """Rebuild schedules from the database, then move due runs onto the queue."""
    app = create_app()
    count = jobs.rebuild_schedules(app)
    logging.getLogger("trawl.scheduler").info("%d scheduled sources", count)
    Scheduler(queue=get_queue(app), connection=get_redis(app),
              interval=SCHEDULER_INTERVAL).run()


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run workers or the scheduler."""
    parser = argparse.ArgumentParser(description="Trawl's RQ workers or scheduler")
    parser.add_argument("mode", nargs="?", choices=["worker", "scheduler"], default="worker")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    parser.add_argument("--burst", action="store_true", help="stop when the queue is empty")
    args = parser.parse_args(argv)
    if args.mode == "scheduler":
        run_scheduler()
    else:
        run_workers(args.workers, args.burst)


if __name__ == "__main__":
    main()
