"""What Trawl keeps in Redis, by name, and how long it lives there; the RQ jobs' time limits.

Redis also holds RQ's own keys (`rq:*`, the queue and its jobs), rq-scheduler's and
flask-limiter's; those libraries name them.
"""

from __future__ import annotations

HOUR = 3600
DAY = 24 * HOUR
WEEK = 7 * DAY

# -- a source's scan (indexing/state.py) ----------------------------------------------------------
QUEUED_LOCK_TTL = WEEK  # a queued scan waits for a free worker; its RQ job is checked on read
STATS_TTL = WEEK  # live stats of the current or latest run (the final ones are also in the database)
CANCEL_TTL = HOUR  # "stop" flag of a cancelled run, read by its coordinator within seconds


def scan_lock(source_id: str) -> str:
    """The source's scan slot: {run_id, job_id, state, full, since}."""
    return f"trawl:scan:{source_id}"


def run_stats(source_id: str) -> str:
    """The stats of the source's current or latest run (JSON)."""
    return f"trawl:stats:{source_id}"


def cancel(run_id: str) -> str:
    """Set when the run was asked to stop."""
    return f"trawl:cancel:{run_id}"


# -- writes and the OCR phase (indexing/state.py, indexing/ocr_phase.py, jobs.py) -----------------
OCR_QUEUED_TTL = DAY  # "an OCR job of this source is queued"; checked against its RQ job
# the background phases' slots (indexing/background.py): holder -> expiry time, renewed while held
BACKGROUND_SLOTS = "trawl:background:slots"


def writer(source_id: str) -> str:
    """Held while a source's documents and records are written (scan flushes, OCR results)."""
    return f"trawl:writer:{source_id}"


def ocr_running(source_id: str) -> str:
    """Held by the OCR job reading a source's documents (one at a time per source)."""
    return f"trawl:ocr:running:{source_id}"


def ocr_queued(source_id: str) -> str:
    """The RQ job id of the source's queued OCR job."""
    return f"trawl:ocr:queued:{source_id}"


def embed_running(source_id: str) -> str:
    """Held by the embedding job of a source (meaning; one at a time per source)."""
    return f"trawl:embed:running:{source_id}"


def embed_queued(source_id: str) -> str:
    """The RQ job id of the source's queued embedding job."""
    return f"trawl:embed:queued:{source_id}"


# set for background.STEP_ASIDE_SECONDS after each search: the phases start no new work meanwhile
SEARCHING = "trawl:searching"


def phase_info(kind: str, source_id: str) -> str:
    """A background phase's account of a source (indexing/background.py): its observed rate,
    why it waits, the error that stopped it and when it tries again."""
    return f"trawl:phase:{kind}:{source_id}"


def live_cost(source_id: str) -> str:
    """Seconds the source's latest live update took (a polled source's poll: watcher.py)."""
    return f"trawl:live:cost:{source_id}"


PHASE_INFO_TTL = WEEK  # an account nobody renewed for a week is forgotten


# -- the live index (watcher.py, indexing/live.py) -----------------------------------------------
WATCHER_ALIVE_TTL = 10  # the watcher renews its mark every 2 s; gone after this, it is down


def live_paths(source_id: str) -> str:
    """Sorted set of the source's changed paths waiting for a live update, scored by event time."""
    return f"trawl:live:{source_id}:paths"


def live_stats(source_id: str) -> str:
    """The stats of the source's current or latest live update (JSON), kept STATS_TTL."""
    return f"trawl:live:{source_id}:stats"


def watch_states() -> str:
    """Hash {source_id: watching | polling | error: ...} written by the running watcher."""
    return "trawl:watch:states"


def watcher_alive() -> str:
    """Set (with WATCHER_ALIVE_TTL) while a watcher process runs."""
    return "trawl:watch:alive"


def sources_version() -> str:
    """Bumped when a source is added, changed or removed: the watcher re-reads the list."""
    return "trawl:sources:version"


# -- one run's work lists (indexing/pipeline.py) -------------------------------------------------
RUN_LISTS_TTL = DAY  # work and result lists of a run whose coordinator died


def run_lists(run_id: str) -> dict[str, str]:
    """Batches to extract, their results, and which batches a helper is working on."""
    base = f"trawl:run:{run_id}"
    return {"todo": f"{base}:todo", "results": f"{base}:results", "inflight": f"{base}:inflight"}


# -- sessions (services/auth.py) -----------------------------------------------------------------


# hash: part (index, database, thumbnails) -> {"error", "since"} of a write that failed for want
# of space; kept until a write of that part succeeds (indexing/diskfull.py)
DISK_FULL = "trawl:disk-full"
# hash: source id -> {"at", "backoff", "scan"} of a scan or live update that failed for want of
# space: tried again at "at" (indexing/diskfull.py), dropped when a run of the source ends otherwise
SPACE_RETRY = "trawl:space-retry"


def revoked_token(session_id: str) -> str:
    """Set while a logged-out token or UI session would still be valid."""
    return f"trawl:revoked:{session_id}"


# -- API tokens (services/tokens.py) --------------------------------------------------------------
TOKENS_USED = "trawl:tokens:used"  # hash: token id -> Unix time of its latest use, not yet saved
TOKENS_FLUSH = "trawl:tokens:flush"  # held while TOKEN_FLUSH_SECONDS pass between two saves
TOKEN_FLUSH_SECONDS = 60  # last-used times reach the database at most this often (and on listing)


# -- RQ job limits (jobs.py) ---------------------------------------------------------------------
SCAN_JOB_TIMEOUT = WEEK  # a first scan of millions of files may run for days
SCAN_RESULT_TTL = HOUR
SCAN_FAILURE_TTL = WEEK  # a failed scan stays visible in rq-dashboard for a week
HELPER_JOB_TIMEOUT = DAY
HELPER_RESULT_TTL = 60
HELPER_FAILURE_TTL = HOUR
OCR_JOB_TIMEOUT = DAY  # a job stops taking documents after a minute; one document may be long
OCR_RESULT_TTL = 600
OCR_FAILURE_TTL = WEEK
EMBED_JOB_TIMEOUT = HOUR  # a job stops taking documents after 1-15 min (embed_phase.ALONE_SECONDS)
EMBED_RESULT_TTL = 600
EMBED_FAILURE_TTL = WEEK
RENAME_JOB_TIMEOUT = HOUR
RENAME_RESULT_TTL = 600
LIVE_JOB_TIMEOUT = DAY  # a live update of a burst is an incremental scan of the folders touched
LIVE_RESULT_TTL = 60
SCHEDULED_RESULT_TTL = HOUR
DEFAULT_JOB_TIMEOUT = DAY  # the queue's default, for any job enqueued without its own


# -- RQ's queues: the main one (QUEUE_NAME: scans, live updates) and two beside it ---------------
def background_queue(queue_name: str) -> str:
    """The background phases' queue (OCR, meaning), served only when the main one is empty."""
    return f"{queue_name}-ocr"


def extract_queue(queue_name: str) -> str:
    """The queue of running scans' helpers (extraction-only workers serve it alone)."""
    return f"{queue_name}-extract"
