"""Schema migrations: from an empty database, equal to the models, safe when started together."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from tests.conftest import initialised_app, new_pg_database

REPO = Path(__file__).resolve().parent.parent
TABLES = {"users", "sources", "indexed_files", "run_records", "saved_searches", "user_sources", "api_tokens"}


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db(request, tmp_path):
    """An empty database: a new SQLite file, or a new PostgreSQL database when one answers."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    with new_pg_database("trawl_mig") as url:
        yield url


@pytest.fixture
def make_app(app_config):
    """An app over a given database URL after `flask trawl init` (engines disposed at the end)."""
    from webapp.extensions import db

    apps = []

    def make(url: str):
        application = initialised_app({**app_config, "DATABASE_URL": url})
        apps.append(application)
        return application

    yield make
    for application in apps:
        with application.app_context():
            db.engine.dispose()


def schema_diff(url: str) -> list:
    """What alembic autogenerate would change to make the database match the models."""
    from webapp import models  # noqa: F401
    from webapp.extensions import db

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            ctx = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True}
            )
            return compare_metadata(ctx, db.metadata)
    finally:
        engine.dispose()


def revision(url: str) -> str | None:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            if not inspect(conn).has_table("alembic_version"):
                return None
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    finally:
        engine.dispose()


def head() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(REPO / "migrations"))
    return ScriptDirectory.from_config(cfg).get_current_head()


def test_init_migrates_an_empty_database_to_the_models_and_the_factory_does_not(empty_db, app_config):
    from webapp import create_app

    create_app({**app_config, "DATABASE_URL": empty_db})
    assert revision(empty_db) is None
    initialised_app({**app_config, "DATABASE_URL": empty_db})
    assert revision(empty_db) == head()
    assert schema_diff(empty_db) == []


def test_comparison_sees_a_schema_that_differs(empty_db, make_app):
    make_app(empty_db)
    engine = create_engine(empty_db)
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX ix_indexed_files_source_status"))
    engine.dispose()
    diff = schema_diff(empty_db)
    assert [d[0] for d in diff] == ["add_index"]
    assert diff[0][1].name == "ix_indexed_files_source_status"


def test_flask_db_downgrade_and_upgrade_from_empty(empty_db, make_app):
    application = make_app(empty_db)
    runner = application.test_cli_runner()
    result = runner.invoke(args=["db", "downgrade", "base"])
    assert result.exit_code == 0, result.output
    engine = create_engine(empty_db)
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()
    result = runner.invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert revision(empty_db) == head()
    assert schema_diff(empty_db) == []


def test_records_keep_their_unique_key_after_migration(empty_db, make_app):
    application = make_app(empty_db)
    from sqlalchemy.exc import IntegrityError

    from webapp.extensions import db
    from webapp.models import IndexedFile, Source, utcnow

    with application.app_context():
        db.session.add(
            Source(id="s", name="S", root_path="/x", include_patterns=["**/*"], exclude_patterns=[])
        )
        db.session.commit()
        row = {
            "source_id": "s",
            "path": "/x/a",
            "size_bytes": 1,
            "mtime_ns": 1,
            "modified_at": utcnow(),
            "hash": "h",
            "status": "success",
        }
        db.session.add(IndexedFile(**row))
        db.session.commit()
        db.session.add(IndexedFile(**row))
        with pytest.raises(IntegrityError):
            db.session.commit()
        db.session.rollback()


def test_database_made_by_create_all_is_stamped_not_recreated(tmp_path, make_app):
    """Installs from before migrations existed: tables there, no alembic_version."""
    from webapp import models  # noqa: F401
    from webapp.extensions import db

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    db.metadata.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO users (username, username_key, password_hash, is_admin, "
                "created_at, active, generation) "
                "VALUES ('old', 'old', 'x', 1, '2026-01-01 00:00:00', 1, 0)"
            )
        )
    engine.dispose()
    make_app(url)
    assert revision(url) == head()
    engine = create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT username FROM users")).scalars().all() == ["old"]
    engine.dispose()


def test_upgrade_from_0001_keeps_the_admin_working_and_seeing_everything(empty_db, make_app, roots):
    """An install of the first schema with an admin, a source and a document record: after
    the upgrade the admin logs in as before, is an active admin and sees every source."""
    from argon2 import PasswordHasher

    application = make_app(empty_db)
    runner = application.test_cli_runner()
    result = runner.invoke(args=["db", "downgrade", "0001"])
    assert result.exit_code == 0, result.output
    folder = roots / "old"
    folder.mkdir()
    engine = create_engine(empty_db)
    with engine.begin() as conn:
        assert "active" not in {c["name"] for c in inspect(conn).get_columns("users")}
        conn.execute(
            text(
                "INSERT INTO users (username, password_hash, is_admin, created_at) "
                "VALUES ('boss', :h, :t, '2026-01-01 00:00:00')"
            ),
            {
                "h": PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash("old password 1"),
                "t": True,
            },
        )
        conn.execute(
            text(
                "INSERT INTO sources (id, name, root_path, include_patterns, exclude_patterns, "
                "created_at, updated_at) VALUES ('old', 'Old', :root, '[\"**/*\"]', '[]', "
                "'2026-01-01 00:00:00', '2026-01-01 00:00:00')"
            ),
            {"root": str(folder)},
        )
    engine.dispose()
    result = runner.invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert revision(empty_db) == head()
    assert schema_diff(empty_db) == []
    application.config["AUTH_RATE_LIMIT"] = "1000/minute"  # Redis is shared with other tests
    client = application.test_client()
    login = client.post("/api/auth/login", json={"username": "boss", "password": "old password 1"})
    assert login.status_code == 200, login.get_json()
    auth = {"Authorization": f"Bearer {login.get_json()['access_token']}"}
    me = client.get("/api/auth/me", headers=auth).get_json()
    assert (me["role"], me["is_admin"], me["active"]) == ("admin", True, True)
    assert [s["id"] for s in client.get("/api/sources", headers=auth).get_json()] == ["old"]
    assert client.get("/api/users", headers=auth).status_code == 200


def test_upgrade_renames_later_accounts_whose_names_clash_by_case(empty_db, make_app):
    """Before 0009 `boss` and `Boss` could both exist. After it the older keeps its name,
    the later one is `Boss-<id>` with its own password, and login ignores case."""
    from webapp.services.auth import _hasher

    application = make_app(empty_db)
    runner = application.test_cli_runner()
    assert runner.invoke(args=["db", "downgrade", "0008"]).exit_code == 0
    with application.app_context():
        hasher = _hasher()
    engine = create_engine(empty_db)
    with engine.begin() as conn:
        for name, password, admin in (
            ("boss", "first password", True),
            ("Boss", "second password", False),
            ("clerk", "third password", False),
        ):
            conn.execute(
                text(
                    "INSERT INTO users (username, password_hash, is_admin, created_at,"
                    " active, generation) VALUES (:u, :h, :a, '2026-01-01', :t, 0)"
                ),
                {"u": name, "h": hasher.hash(password), "a": admin, "t": True},
            )
    engine.dispose()
    result = runner.invoke(args=["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert schema_diff(empty_db) == []
    engine = create_engine(empty_db)
    with engine.connect() as conn:
        names = conn.execute(text("SELECT id, username FROM users ORDER BY id")).all()
    engine.dispose()
    later = names[1][0]
    assert [n for _, n in names] == ["boss", f"Boss-{later}", "clerk"]
    application.config["AUTH_RATE_LIMIT"] = "1000/minute"
    application.config["LOGIN_USER_RATE_LIMIT"] = "1000/minute"
    client = application.test_client()

    def login(name, password):
        return client.post("/api/auth/login", json={"username": name, "password": password})

    assert login("BOSS", "first password").status_code == 200
    assert login("boss", "second password").status_code == 401
    assert login(f"boss-{later}", "second password").status_code == 200
    assert login("Clerk", "third password").status_code == 200


STARTER = """
import sys
from webapp import create_app
from webapp.runtime import init_data

init_data(create_app({"DATA_DIR": sys.argv[1], "DATABASE_URL": sys.argv[2],
                      "REDIS_URL": sys.argv[3], "SECRET_KEY": "x" * 32,
                      "ALLOWED_ROOTS": sys.argv[1]}))
"""


@pytest.mark.slow
def test_processes_starting_together_migrate_once(empty_db, tmp_path, redis_url):
    """Three `trawl init` at the same moment on a new database (compose's init service started
    twice, `make run` beside it): all succeed and the schema is migrated once."""
    data = tmp_path / "shared-data"
    data.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", STARTER, str(data), empty_db, redis_url],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120)[0].decode() for p in procs]
    for proc, out in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, out
    assert revision(empty_db) == head()
    assert schema_diff(empty_db) == []
