"""The watcher process (`python worker.py watcher`): follows the sources with `watch` on.

It turns kernel file events into changed paths per source, collected in Redis
(`indexing/live.py`); once a source has been quiet for a moment (SETTLE) with every written
file closed again, or for WATCH_DEBOUNCE seconds while a file is still open for writing, or its
changes waited WATCH_MAX_DELAY, it asks for one live update (`services.scans.request_live_update`):
a path-limited incremental run of the scan pipeline on a worker, under the source's scan lock.
While a scan runs the paths wait, and go right after it. A source that cannot be watched (the
kernel's watch limit, a network file system, no inotify) is polled: its root is marked changed,
which makes the update an incremental scan, every WATCH_POLL_SECONDS or WATCH_POLL_COST_FACTOR
times what its latest update took, whichever is longer (a tree of 200,000 folders took 8-22 s
of a core a poll: it is not rescanned every minute), and never while that update still runs.
On start, and when Redis comes back after an outage, every watched source gets one such catch-up
update (a source never scanned gets none: its first scan is asked for by the user; its changes
are followed meanwhile).

The watcher only lists folders and reads events: it never opens a file.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import time
from dataclasses import dataclass, field

import redis
from flask import Flask
from sqlalchemy.exc import SQLAlchemyError

from webapp import keys
from webapp.extensions import db
from webapp.indexing import inotify, live
from webapp.indexing.globs import PatternSet
from webapp.indexing.runstats import SourceState
from webapp.indexing.scanner import root_problem
from webapp.indexing.state import ScanLock
from webapp.memtune import release_freed
from webapp.models import Source
from webapp.runtime import get_redis
from webapp.services import scans

log = logging.getLogger("trawl.watcher")
TICK = 0.2  # seconds the loop waits for events before it looks at its timers
RELOAD_EVERY = 30.0  # the source list is re-read this often even when no change was announced
RETRY_EVERY = 5.0  # a source in error (root missing) is tried again this often (or at its
# polling interval, when that is shorter), and the database after an error
SETTLE = 0.2  # seconds of quiet after which closed files (no writer left) are handed on
ALIVE_EVERY = 2.0  # seconds between two renewals of the watcher's alive mark
CHECK_WAITING_EVERY = 2.0  # how often paths left in Redis (a killed update) are looked for
# File systems whose changes made elsewhere never reach this kernel's inotify.
NETWORK_FS = {
    "nfs",
    "nfs4",
    "cifs",
    "smb3",
    "smbfs",
    "9p",
    "fuse.sshfs",
    "afs",
    "ceph",
    "glusterfs",
    "fuse.glusterfs",
    "fuse.rclone",
    "davfs",
    "fuse.s3fs",
    "virtiofs",
}


@dataclass
class Followed:
    """One watched source: its settings, its watches and its changes not yet handed on."""

    id: str
    root: str
    include: list
    exclude: list
    tree: inotify.Tree | None = None
    state: str = ""
    changed: dict[str, float] = field(default_factory=dict)  # path -> event time, not in Redis yet
    writing: set[str] = field(default_factory=set)  # files written to and not closed yet
    last_event: float = 0.0  # monotonic time of the latest change
    waiting_since: float = 0.0  # monotonic time since when changes wait for an update (0: none)
    next_try: float = 0.0  # polling: next rescan; error: next attempt to watch; watching: next
    # look at the root (still the folder that is watched, still inside the allowed roots?)
    root_id: tuple[int, int] | None = None  # (device, inode) of the root folder being watched

    @property
    def signature(self) -> tuple:
        return (self.root, tuple(self.include), tuple(self.exclude))

    def close(self) -> None:
        if self.tree is not None:
            self.tree.close()
            self.tree = None


def fs_type(path: str) -> str:
    """The file system type of the mount holding `path` (from /proc/self/mounts), or ''."""
    best, kind = "", ""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) < 3:
                    continue
                mount = parts[1].replace("\\040", " ")
                if (path == mount or path.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
                    best, kind = mount, parts[2]
    except OSError:
        return ""
    return kind


class Watcher:
    """The watcher's state and loop (run in its own process, or a thread of a test)."""

    def __init__(self, app: Flask):
        self.app = app
        self.conn: redis.Redis = get_redis(app)
        cfg = app.config
        self.debounce = float(cfg["WATCH_DEBOUNCE"])
        self.max_delay = float(cfg["WATCH_MAX_DELAY"])
        self.poll_every = float(cfg["WATCH_POLL_SECONDS"])
        self.poll_factor = float(cfg["WATCH_POLL_COST_FACTOR"])
        self.max_dirs = int(cfg["WATCH_MAX_DIRS"])
        self.max_paths = int(cfg["LIVE_MAX_PATHS"])
        self.allowed_roots = list(cfg["ALLOWED_ROOTS"])
        self.sources: dict[str, Followed] = {}
        self.version: bytes | None = None
        self.next_reload = 0.0
        self.next_alive = 0.0
        self.next_check = 0.0
        self.redis_ok = True
        self.stopping = False

    # -- the loop ------------------------------------------------------------------------------
    def run(self) -> None:
        """Watch until `stop()` (or SIGTERM in the process)."""
        log.info(
            "watcher started (inotify %s)",
            "available" if inotify.supported() else "not available: every source is polled",
        )
        try:
            while not self.stopping:
                try:
                    self.step()
                except SQLAlchemyError as exc:  # the database is away: keep the watches
                    log.warning(
                        "watcher: database error (%s); trying again in %d s",
                        str(exc).splitlines()[0],
                        RETRY_EVERY,
                    )
                    with self.app.app_context():
                        db.session.remove()
                    time.sleep(RETRY_EVERY)
        finally:
            for followed in self.sources.values():
                followed.close()
            self._safe(lambda: self.conn.delete(keys.watcher_alive(), keys.watch_states()))

    def stop(self) -> None:
        """Ask the loop to end after its current step."""
        self.stopping = True

    def step(self) -> None:
        """One round: re-read the sources if needed, read events, hand changes on."""
        now = time.monotonic()
        if not self._redis_ready():
            self._read_events(0.5)
            return
        if now >= self.next_reload or self._announced():
            self.reload()
        self._read_events(TICK)
        now = time.monotonic()
        for followed in self.sources.values():
            self._timers(followed, now)
            self._flush(followed)
            self._maybe_update(followed, now)
        if now >= self.next_check:
            self.next_check = now + CHECK_WAITING_EVERY
            self._check_waiting(now)
        if now >= self.next_alive:
            self.next_alive = now + ALIVE_EVERY
            self._publish_states()

    def _safe(self, action):
        try:
            return action()
        except redis.RedisError as exc:
            if self.redis_ok:
                log.warning("watcher: Redis unreachable (%s); changes are kept until it is back", exc)
            self.redis_ok = False
            return None

    def _redis_ready(self) -> bool:
        """False while Redis is away; when it is back, every source gets a catch-up update."""
        if self.redis_ok:
            return True
        try:
            self.conn.ping()
        except redis.RedisError:
            return False
        log.info("watcher: Redis answers again; catching up every watched source")
        self.redis_ok = True
        for followed in self.sources.values():
            self._catch_up(followed)
        return True

    def _announced(self) -> bool:
        version = self._safe(lambda: self.conn.get(keys.sources_version()))
        if version != self.version:
            self.version = version
            return True
        return False

    # -- sources -------------------------------------------------------------------------------
    def reload(self) -> None:
        """Follow the sources with watch on: start new ones, restart changed ones, drop others."""
        self.next_reload = time.monotonic() + RELOAD_EVERY
        with self.app.app_context():
            rows = [
                Followed(s.id, s.root_path, list(s.include_patterns), list(s.exclude_patterns))
                for s in db.session.query(Source).filter(Source.watch.is_(True))
            ]
            db.session.remove()
        wanted = {f.id: f for f in rows}
        for sid in list(self.sources):
            old = self.sources[sid]
            if sid not in wanted or wanted[sid].signature != old.signature:
                old.close()
                del self.sources[sid]
                if sid not in wanted:
                    self._safe(lambda sid=sid: self.conn.hdel(keys.watch_states(), sid))
        for sid, followed in wanted.items():
            if sid not in self.sources:
                self.sources[sid] = followed
                self._start(followed)
        self._publish_states()
        release_freed()  # the walks' temporary lists: the watcher idles for days

    def _start(self, followed: Followed) -> None:
        """Set up the watches of a source (or polling), and mark it for a catch-up update.
        A root that is missing, unreadable or now resolves outside the allowed roots (swapped
        for a symlink) is an error, tried again every few seconds: nothing is watched there."""
        followed.close()
        followed.root_id = _folder_id(followed.root)
        problem = root_problem(followed.root, self.allowed_roots)
        if problem:
            followed.state = f"error: {problem}"
            followed.next_try = time.monotonic() + min(RETRY_EVERY, self.poll_every)
            return
        followed.state = self._watch(followed)
        followed.next_try = time.monotonic() + (
            self.poll_every if followed.state == "polling" else RETRY_EVERY
        )
        self._catch_up(followed)  # whatever changed while nobody watched

    def _root_moved(self, followed: Followed) -> bool:
        """Whether the root path no longer names the folder being watched (replaced, or a
        folder above it moved), or resolves outside the allowed roots."""
        return (
            _folder_id(followed.root) != followed.root_id
            or root_problem(followed.root, self.allowed_roots) is not None
        )

    def _catch_up(self, followed: Followed) -> None:
        """Mark the whole source changed, once it has been scanned: the first scan of a new
        source stays the user's to start (scripts create a source, then ask for its scan)."""
        with self.app.app_context():
            scanned = db.session.query(Source.last_run.isnot(None)).filter(Source.id == followed.id).scalar()
            db.session.remove()
        if scanned:
            self._mark(followed, followed.root)

    def _watch(self, followed: Followed) -> str:
        """'watching', or 'polling' (logged with what would allow watching)."""
        kind = fs_type(followed.root)
        if kind in NETWORK_FS:
            log.warning(
                "watcher: %s is on %s, whose changes the kernel does not report; polling it every %d s",
                followed.id,
                kind,
                self.poll_every,
            )
            return "polling"
        if not inotify.supported():
            return "polling"
        patterns = PatternSet(followed.include, followed.exclude)
        try:
            followed.tree = inotify.Tree(followed.root, patterns, self.max_dirs)
            followed.tree.watch_all()
            if followed.tree.root not in followed.tree.wds.values():  # a symlink, or gone
                raise OSError(f"the root {followed.root} itself takes no watch")
        except inotify.WatchLimit as exc:
            followed.close()
            log.warning(
                "watcher: %s cannot be watched: %s; polling it every %d s. To watch it, %s",
                followed.id,
                exc.strerror,
                self.poll_every,
                inotify.LIMIT_HINT,
            )
            return "polling"
        except OSError as exc:
            followed.close()
            log.warning("watcher: %s cannot be watched (%s); polling it", followed.id, exc)
            return "polling"
        return "watching"

    def _publish_states(self) -> None:
        def publish() -> None:
            pipe = self.conn.pipeline()
            pipe.set(keys.watcher_alive(), os.getpid(), ex=keys.WATCHER_ALIVE_TTL)
            pipe.delete(keys.watch_states())
            if self.sources:
                pipe.hset(keys.watch_states(), mapping={sid: f.state for sid, f in self.sources.items()})
            pipe.execute()

        self._safe(publish)

    # -- events and updates --------------------------------------------------------------------
    def _read_events(self, timeout: float) -> None:
        trees = {f.tree.fileno(): f for f in self.sources.values() if f.tree is not None}
        if not trees:
            time.sleep(timeout)
            return
        ready, _, _ = select.select(list(trees), [], [], timeout)
        for fd in ready:
            followed = trees[fd]
            try:
                complete = followed.tree.read(lambda path, writing, f=followed: self._mark(f, path, writing))
            except inotify.WatchLimit as exc:  # a new folder needed one watch too many
                log.warning(
                    "watcher: %s: %s; polling it from now on. To watch it, %s",
                    followed.id,
                    exc.strerror,
                    inotify.LIMIT_HINT,
                )
                followed.close()
                followed.state = "polling"
                followed.next_try = time.monotonic() + self.poll_every
                complete = False
            if not complete:  # the kernel dropped events: look at everything again
                self._catch_up(followed)
            if followed.tree is not None and not followed.tree.wds:
                self._start(followed)  # the root itself went away (deleted, moved, unmounted)

    def _mark(self, followed: Followed, path: str, writing: bool = False) -> None:
        now = time.monotonic()
        if writing:
            followed.writing.add(path)
        else:
            followed.writing.discard(path)
        followed.changed[path] = time.time()
        if len(followed.changed) > self.max_paths:
            followed.changed = {followed.root: time.time()}
        followed.last_event = now
        followed.waiting_since = followed.waiting_since or now

    def _timers(self, followed: Followed, now: float) -> None:
        if followed.state == "watching" and now >= followed.next_try:
            followed.next_try = now + RETRY_EVERY
            if self._root_moved(followed):
                log.warning(
                    "watcher: the root of %s changed under its watches; watching it again", followed.id
                )
                self._start(followed)
                self._publish_states()
        elif followed.state == "polling" and now >= followed.next_try:
            if followed.waiting_since or self._safe(lambda: live.count(self.conn, followed.id)):
                followed.next_try = now + RETRY_EVERY  # the last poll is not done yet
                return
            followed.next_try = now + self.poll_interval(followed.id)
            self._catch_up(followed)
        elif followed.state.startswith("error") and now >= followed.next_try:
            self._start(followed)
            if not followed.state.startswith("error"):
                self._publish_states()

    def poll_interval(self, source_id: str) -> float:
        """Seconds until a polled source's next poll: WATCH_POLL_SECONDS, or the cost factor
        times what its latest update took when that is longer."""
        cost = self._safe(lambda: self.conn.get(keys.live_cost(source_id)))
        return max(self.poll_every, self.poll_factor * float(cost or 0))

    def _flush(self, followed: Followed) -> None:
        """Hand the changes over to Redis (kept in memory while it is away)."""
        if not followed.changed:
            return
        changed = followed.changed
        if self._safe(
            lambda: live.add(self.conn, followed.id, followed.root, changed, self.max_paths) or True
        ):
            followed.changed = {}

    def _maybe_update(self, followed: Followed, now: float) -> None:
        """Ask for a live update once the source is quiet (or its changes waited too long)."""
        if not followed.waiting_since or followed.changed:
            return
        quiet_for = now - followed.last_event
        # closed files go once the source is briefly quiet; a file still open for writing
        # once it has been quiet for the whole debounce
        quiet = quiet_for >= self.debounce or (quiet_for >= SETTLE and not followed.writing)
        overdue = now - followed.waiting_since >= self.max_delay
        if not (quiet or overdue):
            return
        with self.app.app_context():
            job_id = self._safe(lambda: scans.request_live_update(followed.id))
            db.session.remove()
        if job_id is not None:
            followed.waiting_since = 0.0
            followed.writing.clear()

    def _check_waiting(self, now: float) -> None:
        """Paths left in Redis by an update that did not finish (its worker died, while the
        update ran or before it began: a queued lock whose job died reads idle) go again."""
        for followed in self.sources.values():
            if followed.waiting_since:
                continue
            if (
                self._safe(lambda f=followed: live.count(self.conn, f.id))
                and ScanLock(self.conn, followed.id).state() == SourceState.IDLE
            ):
                followed.waiting_since = now
                followed.last_event = min(followed.last_event, now - self.debounce)


def _folder_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of the folder a path names (symlinks followed), or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def run(app: Flask) -> None:
    """The watcher process's main: watch until SIGTERM."""
    watcher = Watcher(app)
    signal.signal(signal.SIGTERM, lambda *_: watcher.stop())
    signal.signal(signal.SIGINT, lambda *_: watcher.stop())
    watcher.run()
