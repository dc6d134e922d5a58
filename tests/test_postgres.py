"""Trawl on PostgreSQL: a scan end to end; concurrent record writers neither deadlock nor lose rows.

These run in every pass of the suite, on a database of their own, whenever PostgreSQL answers
on 127.0.0.1:5432 (TRAWL_TEST_PG_SERVER); otherwise they are skipped.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from sqlalchemy import func, select

from tests.conftest import initialised_app, new_pg_database

REPO = Path(__file__).resolve().parent.parent
ADMIN = {"username": "admin", "password": "correct horse battery"}


@pytest.fixture
def pg_url():
    """A new, empty PostgreSQL database for one test, dropped afterwards."""
    with new_pg_database("trawl_pg") as url:
        yield url


@pytest.fixture
def app_config(app_config, pg_url):
    """The suite's app, on PostgreSQL."""
    return {**app_config, "DATABASE_URL": pg_url}


def _source(app, source_id: str = "docs") -> None:
    from webapp.extensions import db
    from webapp.models import Source

    with app.app_context():
        db.session.add(
            Source(
                id=source_id,
                name=source_id,
                root_path="/nowhere",
                include_patterns=["**/*"],
                exclude_patterns=[],
            )
        )
        db.session.commit()


def _rows(paths: list[str], writer: int) -> list[dict]:
    """Record rows as a scan batch carries them; size and mtime tell which writer wrote them."""
    return [
        {
            "path": p,
            "size_bytes": writer,
            "mtime_ns": writer * 1_000_000_000,
            "doc_type": "text",
            "status": "success",
            "error_message": None,
        }
        for p in paths
    ]


def test_the_app_runs_on_postgresql(app):
    from webapp.extensions import db

    with app.app_context():
        assert db.engine.dialect.name == "postgresql"


def test_scan_and_search_on_postgresql(client, auth, make_tree, make_source, run_jobs):
    files = {f"notes/n{i:02d}.txt": f"walrus memo number {i}" for i in range(30)}
    source = make_source(make_tree("pgdocs", files), name="PG docs")
    assert client.post(f"/api/sources/{source['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    status = client.get(f"/api/status/{source['id']}", headers=auth).get_json()
    assert (status["total_files"], status["successful"], status["failed"]) == (30, 30, 0)
    found = client.post("/api/search", headers=auth, json={"q": "walrus"}).get_json()
    assert found["total"] == 30
    # a second scan finds nothing changed: the records were written and read back exactly
    client.post(f"/api/sources/{source['id']}/reindex", headers=auth)
    run_jobs()
    status = client.get(f"/api/status/{source['id']}", headers=auth).get_json()
    assert status["last_run"]["unchanged_files"] == 30
    assert status["last_run"]["new_files"] == status["last_run"]["modified_files"] == 0


def test_upsert_updates_in_place(app):
    from webapp.extensions import db
    from webapp.indexing.records import upsert_records
    from webapp.models import IndexedFile

    _source(app)
    with app.app_context():
        upsert_records("docs", _rows(["/d/a", "/d/b"], writer=1))
        upsert_records("docs", [*_rows(["/d/b"], writer=2), *_rows(["/d/c"], writer=2)])
        got = dict(db.session.execute(select(IndexedFile.path, IndexedFile.size_bytes)).all())
    assert got == {"/d/a": 1, "/d/b": 2, "/d/c": 2}


def test_concurrent_upserts_of_the_same_records_do_not_deadlock(app):
    """Writers hit overlapping rows in different orders (a lost run and its successor, or
    two scans of overlapping folders): every statement must finish, no row doubled or torn."""
    from webapp.extensions import db
    from webapp.indexing.records import upsert_records
    from webapp.models import IndexedFile

    _source(app)
    paths = [f"/d/{i:04d}" for i in range(400)]
    errors: list[BaseException] = []
    written: set[str] = set()
    start = threading.Barrier(4)

    def writer(n: int) -> None:
        rng = random.Random(n)
        try:
            with app.app_context():
                start.wait()
                for _ in range(5):
                    batch = rng.sample(paths, 200)  # overlapping, each in its own order
                    upsert_records("docs", _rows(batch, writer=n))
                    written.update(batch)
                db.session.remove()
        except BaseException as exc:  # noqa: BLE001  (reported by the assertion below)
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, str(errors[0]).splitlines()[0]
    with app.app_context():
        count = db.session.scalar(select(func.count()).select_from(IndexedFile))
        distinct = db.session.scalar(select(func.count(func.distinct(IndexedFile.path))))
        torn = db.session.scalar(
            select(func.count())
            .select_from(IndexedFile)
            .where(IndexedFile.mtime_ns != IndexedFile.size_bytes * 1_000_000_000)
        )
    assert count == distinct == len(written)
    assert torn == 0


def _documented_copy_script() -> str:
    """The SQLite -> PostgreSQL copy script exactly as docs/scaling.md prints it."""
    text_ = (REPO / "docs" / "scaling.md").read_text()
    block = text_.split("<!-- copy-sqlite-to-postgres -->", 1)[1]
    return block.split("```python\n", 1)[1].split("```", 1)[0]


def test_documented_move_from_sqlite_keeps_users_sources_and_records(
    app, client, app_config, pg_url, tmp_path, make_tree
):
    """docs/scaling.md: `flask db upgrade` on PostgreSQL (the app fixture did it), copy, start."""
    from webapp.extensions import db
    from webapp.indexing.records import upsert_records
    from webapp.models import IndexedFile

    old_url = f"sqlite:///{tmp_path / 'old.db'}"
    old = initialised_app({**app_config, "DATABASE_URL": old_url})
    old_client = old.test_client()
    token = old_client.post("/api/auth/setup", json=ADMIN).get_json()["access_token"]
    root = make_tree("moved", {"a.txt": "a"})
    resp = old_client.post(
        "/api/sources",
        headers={"Authorization": f"Bearer {token}"},
        json={"name": "Moved", "root_path": str(root), "scan_schedule": "@daily"},
    )
    assert resp.status_code == 201, resp.get_json()
    with old.app_context():
        upsert_records("moved", _rows([f"{root}/f{i}.txt" for i in range(30)], writer=3))
        db.engine.dispose()

    script = tmp_path / "copy_to_postgres.py"
    script.write_text(_documented_copy_script())
    done = subprocess.run(
        [sys.executable, str(script), old_url, pg_url],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "indexed_files 30" in done.stdout

    login = client.post("/api/auth/login", json=ADMIN)
    assert login.status_code == 200, login.get_json()
    headers = {"Authorization": f"Bearer {login.get_json()['access_token']}"}
    moved = client.get("/api/sources/moved", headers=headers).get_json()
    assert (moved["name"], moved["scan_schedule"]) == ("Moved", "@daily")
    with app.app_context():  # new rows get new ids: the sequences were moved past the copies
        upsert_records("moved", _rows([f"{root}/new.txt"], writer=4))
        assert db.session.scalar(select(func.count()).select_from(IndexedFile)) == 31
    assert client.post("/api/auth/logout", headers=headers).status_code == 200
