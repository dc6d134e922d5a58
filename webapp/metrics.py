"""The series that web and worker processes record (prometheus_client, multiprocess mode).

Each process writes its values to its own files in METRICS_DIR/<host name> (the library's
PROMETHEUS_MULTIPROC_DIR, which its entry point set before importing this: metrics_dir.py);
`services/metrics.py` adds up the files of every host folder at scrape time, with
the gauges that are read then (documents, queue, index size). docs/operations.md says what
each series means.
"""

from __future__ import annotations

import os

from prometheus_client import Counter, Histogram, values

from webapp import metrics_dir

_horse = {"pid": 0, "name": ""}  # set in an RQ work horse: see work_horse_of


def _process_identifier() -> int | str:
    """The name of this process's files: its pid, or "<worker pid>h" in a work horse."""
    pid = os.getpid()
    return _horse["name"] if pid == _horse["pid"] else pid


def work_horse_of(worker_pid: int) -> None:
    """Called first thing in each RQ work horse: its series go to the files of its worker's
    horses ("counter_<worker pid>h.db"), carried on by the next horse (a worker runs one at a
    time), so the folder holds a few files per worker rather than two per job; a scrape reads
    them all (bench/metrics.py)."""
    _horse.update(pid=os.getpid(), name=f"{worker_pid}h")


# prometheus_client's own hook for this (before any value exists: every series has labels, so
# no value is made at import). Its rule holds: processes running at once get distinct names.
# Chosen at import, as the library chooses its mode: a process whose entry point prepared no
# folder (a script building an app) keeps its values in memory.
if os.environ.get(metrics_dir.VARIABLE):
    values.ValueClass = values.MultiProcessValue(process_identifier=_process_identifier)

# seconds: a search answers in milliseconds, a slow one in a second or two
SEARCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# seconds: a text file takes a millisecond, a large PDF many seconds, up to its timeout
EXTRACTION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0)

search_duration = Histogram(
    "trawl_search_duration_seconds",
    "Time to answer a search (API, page or CLI), by backend",
    ["backend"],
    buckets=SEARCH_BUCKETS,
)
scan_files = Counter(
    "trawl_scan_files", "Files seen by scans, by what happened to each", ["source", "outcome"]
)
scan_runs = Counter("trawl_scan_runs", "Scans that ended, by their final state", ["source", "state"])
extraction_seconds = Histogram(
    "trawl_extraction_seconds",
    "Time to extract one file, by document type",
    ["type"],
    buckets=EXTRACTION_BUCKETS,
)
