"""RQ worker entry: `python worker.py` runs a worker; `python worker.py scheduler` runs the scheduler.

The worker preloads the extractors before RQ forks a work horse per job, so every job starts warm.
"""

from __future__ import annotations

import logging
import sys

from rq import Worker
from rq_scheduler import Scheduler

from webapp import create_app, jobs
from webapp.indexing import extractors
from webapp.runtime import get_queue, get_redis

SCHEDULER_INTERVAL = 5  # seconds between checks for due scheduled scans


def run_worker(burst: bool = False) -> None:
    """Serve the scan queue until stopped."""
    app = create_app()
    jobs.bind_app(app)
    extractors.preload()
    queue = get_queue(app)
    Worker([queue], connection=get_redis(app)).work(burst=burst, logging_level=app.config["LOG_LEVEL"])


def run_scheduler() -> None:
    """Rebuild schedules from the database, then move due runs onto the queue."""
    app = create_app()
    jobs.bind_app(app)
    count = jobs.rebuild_schedules(app)
    logging.getLogger("trawl.scheduler").info("%d scheduled sources", count)
    Scheduler(queue=get_queue(app), connection=get_redis(app),
              interval=SCHEDULER_INTERVAL).run()


if __name__ == "__main__":
    if sys.argv[1:2] == ["scheduler"]:
        run_scheduler()
    else:
        run_worker(burst="--burst" in sys.argv)
