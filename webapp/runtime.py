"""Services built once per app (Redis, the RQ queue, the search backend), kept in app.extensions."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import psutil
import redis
from flask import Flask, current_app
from rq import Queue, Worker
from sqlalchemy import Connection, event, inspect, text
from sqlalchemy.exc import SQLAlchemyError

from webapp import config, keys
from webapp.extensions import db
from webapp.search import embedder, make_backend
from webapp.search.meaning_index import MeaningIndex, make_meaning
from webapp.search.vectors import VectorStore

_lock = threading.Lock()


def init_app(app: Flask) -> None:
    """Choose the model (EMBED_MODEL), create the Redis client and the queues; search opens and
    the model loads on first use. Nothing is written: the data folder and the schema are
    `init_data`'s (`flask trawl init`)."""
    # the process's model: both factories come here (the web app, the workers, their jobs and
    # the scheduler through create_app, the command line through create_cli_app)
    embedder.use(app.config["EMBED_MODEL"])
    client = redis.Redis.from_url(
        app.config["REDIS_URL"], socket_timeout=10, socket_connect_timeout=5, health_check_interval=30
    )
    app.extensions["trawl.redis"] = client
    app.extensions["trawl.queue"] = Queue(
        app.config["QUEUE_NAME"], connection=client, default_timeout=keys.DEFAULT_JOB_TIMEOUT
    )
    # OCR jobs: workers serve this queue only when the main one is empty (scans go first)
    app.extensions["trawl.ocr_queue"] = Queue(
        keys.background_queue(app.config["QUEUE_NAME"]),
        connection=client,
        default_timeout=keys.DEFAULT_JOB_TIMEOUT,
    )
    # helpers of running scans: served by every worker, and alone by extraction-only workers
    # (`worker.py --extract-only`: hosts that neither coordinate scans nor write the index)
    app.extensions["trawl.extract_queue"] = Queue(
        keys.extract_queue(app.config["QUEUE_NAME"]),
        connection=client,
        default_timeout=keys.DEFAULT_JOB_TIMEOUT,
    )
    app.extensions["trawl.search"] = None
    with app.app_context():
        if db.engine.dialect.name == "sqlite":
            event.listen(db.engine, "connect", _sqlite_pragmas)


def _sqlite_pragmas(dbapi_conn, record) -> None:
    """WAL: the web process keeps reading while a scan writes (one writer, many readers)."""
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


# -- the data folder and the database schema (Alembic migrations in ROOT/migrations) ---------

NOT_INITIALISED = (
    "Trawl's data folder {folder} is not initialised ({why}). Run "
    "`flask --app wsgi trawl init` once (`make run` and docker compose do it "
    "at every start), then start Trawl again."
)


def init_data(app: Flask) -> list[str]:
    """Make the data folder ready (idempotent): its folders, the generated secret key, the
    newest schema. Returns what it did, one line each."""
    done = []
    data_dir = Path(app.config["DATA_DIR"])
    default_root = data_dir / config.DEFAULT_SOURCES
    for folder in (data_dir, *([default_root] if str(default_root) in app.config["ALLOWED_ROOTS"] else [])):
        if not folder.is_dir():
            folder.mkdir(parents=True)
            done.append(f"created {folder}")
    if not app.config["SECRET_KEY"]:
        app.config["SECRET_KEY"] = app.config["JWT_SECRET_KEY"] = config.write_secret(data_dir)
        done.append(f"secret key in {data_dir / config.SECRET_FILE}")
    with app.app_context():
        before = _revision_now()
        upgrade_schema(app)
        after = _revision_now()
        # RQ forks a work horse per job: a pooled PostgreSQL connection inherited by every horse
        # would be one server session shared by all ("prepared statement already exists")
        db.engine.dispose()
    if before != after:
        done.append(f"database schema {before or 'empty'} -> {after}")
    return done


def _revision_now() -> str | None:
    with db.engine.connect() as conn:
        return _current_revision(conn)


def not_initialised(app: Flask) -> str | None:
    """Why the data folder or database is not ready to serve (None when it is): no secret key,
    or no schema. Cheap (one query); migrating is `init_data`'s."""
    folder = app.config["DATA_DIR"]
    if not app.config["SECRET_KEY"]:
        return NOT_INITIALISED.format(folder=folder, why="no secret key")
    with app.app_context():
        url = db.engine.url
        if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).is_file():
            return NOT_INITIALISED.format(folder=folder, why=f"no database at {url.database}")
        try:
            with db.engine.connect() as conn:
                ready = inspect(conn).has_table("alembic_version")
        except SQLAlchemyError as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[:1]
            return f"Trawl cannot reach its database ({type(exc).__name__}: {''.join(reason)})"
        finally:
            db.engine.dispose()
    return None if ready else NOT_INITIALISED.format(folder=folder, why="the database has no schema")


def require_initialised(app: Flask) -> None:
    """Stop a service process with a clear message (no traceback) when `not_initialised`."""
    problem = not_initialised(app)
    if problem:
        raise SystemExit(problem)


MIGRATIONS = Path(__file__).resolve().parent.parent / "migrations"


def migrations(app: Flask):
    """The app's Flask-Migrate (Alembic) binding, made on first use: create_app binds it for
    `flask db ...`; the command-line app only when `init` migrates."""
    if "migrate" not in app.extensions:
        from flask_migrate import Migrate

        Migrate(app, db, directory=str(MIGRATIONS))
    return app.extensions["migrate"]


SCHEMA_LOCK_ID = 0x7472_6177_6C  # PostgreSQL advisory lock key of schema upgrades ("trawl")


def upgrade_schema(app: Flask) -> None:
    """Bring the database to the newest migration; one process migrates while the others wait."""
    head = _head_revision(migrations(app).directory)
    with db.engine.connect() as conn:
        if _current_revision(conn) == head:
            return  # the common case costs one query
    with _schema_lock(app) as conn:
        current = _current_revision(conn)
        if current == head:
            return
        from alembic import command

        cfg = migrations(app).migrate.get_config()
        cfg.attributes["connection"] = conn
        if current is None and inspect(conn).has_table("users"):
            command.stamp(cfg, "head")  # tables made by create_all before migrations existed
        else:
            command.upgrade(cfg, "head")
        conn.commit()


@functools.lru_cache
def _head_revision(directory: str) -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", directory)
    return ScriptDirectory.from_config(cfg).get_current_head()


def _current_revision(conn: Connection) -> str | None:
    if not inspect(conn).has_table("alembic_version"):
        conn.rollback()
        return None
    row = conn.execute(text("SELECT version_num FROM alembic_version")).first()
    conn.rollback()
    return row[0] if row else None


@contextlib.contextmanager
def _schema_lock(app: Flask) -> Iterator[Connection]:
    """A connection holding the schema lock: advisory on PostgreSQL, else a file in DATA_DIR."""
    with db.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": SCHEMA_LOCK_ID})
            conn.commit()
            try:
                yield conn
            finally:
                conn.rollback()
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": SCHEMA_LOCK_ID})
                conn.commit()
            return
        fd = os.open(os.path.join(app.config["DATA_DIR"], "schema.lock"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield conn
        finally:
            os.close(fd)  # closing releases the lock


def get_redis(app: Flask | None = None) -> redis.Redis:
    """The app's Redis client."""
    return (app or current_app).extensions["trawl.redis"]


def get_queue(app: Flask | None = None) -> Queue:
    """The RQ queue that scans and extraction batches go to."""
    return (app or current_app).extensions["trawl.queue"]


def _alive(worker: Worker, host: str) -> bool:
    """A worker of this host is alive while its process is (not a zombie); one elsewhere while
    its Redis key lives (RQ refreshes it with each heartbeat)."""
    if worker.hostname != host or not worker.pid:
        return True
    try:
        return psutil.Process(worker.pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def worker_count(queue: Queue) -> int:
    """The workers serving `queue` that are alive. RQ's own count keeps a worker killed with
    SIGKILL (it cannot unregister) until its key expires, up to 7 minutes later: a crashed
    worker then restarted by its supervisor was counted twice."""
    host = socket.gethostname()
    return sum(1 for w in Worker.all(queue=queue) if _alive(w, host))


def get_ocr_queue(app: Flask | None = None) -> Queue:
    """The RQ queue of the OCR phase, served after the main one."""
    return (app or current_app).extensions["trawl.ocr_queue"]


def get_extract_queue(app: Flask | None = None) -> Queue:
    """The RQ queue of extraction helpers, which every worker serves."""
    return (app or current_app).extensions["trawl.extract_queue"]


def get_vectors(app: Flask | None = None) -> VectorStore:
    """The passage vectors (meaning) under DATA_DIR/vectors, made on first use."""
    app = app or current_app
    store = app.extensions.get("trawl.vectors")
    if store is None:
        store = app.extensions["trawl.vectors"] = VectorStore(os.path.join(app.config["DATA_DIR"], "vectors"))
    return store


def get_meaning(app: Flask | None = None) -> MeaningIndex:
    """Where the passage vectors live and how meaning ranks (search/meaning_index.py): chosen
    here alone, from SEARCH_BACKEND, on first use."""
    app = app or current_app
    index = app.extensions.get("trawl.meaning")
    if index is None:
        made = make_meaning(app.config, get_search(app), get_vectors(app))
        index = app.extensions.setdefault("trawl.meaning", made)  # two threads: one kept
    return index


def get_search(app: Flask | None = None):
    """The search backend chosen by SEARCH_BACKEND, opened on first use."""
    app = app or current_app
    backend = app.extensions.get("trawl.search")
    if backend is None:
        with _lock:
            backend = app.extensions.get("trawl.search")
            if backend is None:
                backend = make_backend(app.config)
                app.extensions["trawl.search"] = backend
    return backend
