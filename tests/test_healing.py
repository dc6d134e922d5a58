"""Records that heal: a file recorded as failed because it vanished, could not be
read or timed out is tried again by the next scan, even with the same size and mtime, and
`verify` reports such failed records whose file now reads."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from tests.workers import Worker, finished, permissions_bind_worker, poll_status, records, verify


def _scan(client, auth, sid: str) -> None:
    resp = client.post(f"/api/sources/{sid}/reindex", headers=auth)
    assert resp.status_code == 200, resp.get_json()


def _fail_records(app, sid: str, message: str) -> None:
    """Leave the records as a scan leaves them when every file failed with `message`."""
    from webapp.extensions import db
    from webapp.models import IndexedFile

    with app.app_context():
        db.session.execute(
            update(IndexedFile)
            .where(IndexedFile.source_id == sid)
            .values(status="failed", error_message=message)
        )
        db.session.commit()
        db.session.remove()


def _hits(client, auth, q: str) -> int:
    return client.post("/api/search", headers=auth, json={"q": q}).get_json()["total"]


@pytest.mark.parametrize(
    "message", ["File no longer exists", "File is not readable", "Extraction timed out after 5 s"]
)
def test_access_failures_are_retried_with_the_same_size_and_mtime(
    app, client, auth, make_tree, make_source, run_jobs, message
):
    root = make_tree("docs", {"a.txt": "aardvark heals", "b.txt": "bison stays"})
    sid = make_source(root)["id"]
    _scan(client, auth, sid)
    run_jobs()
    _fail_records(app, sid, message)
    _scan(client, auth, sid)
    run_jobs()
    recs = records(app, sid)
    assert {status for status, _ in recs.values()} == {"success"}, recs
    assert _hits(client, auth, "aardvark") == 1
    last = client.get(f"/api/status/{sid}", headers=auth).get_json()["last_run"]
    assert last["modified_files"] == 2 and last["unchanged_files"] == 0


def test_content_failures_are_not_retried(app, client, auth, make_tree, make_source, run_jobs):
    sid = make_source(make_tree("docs", {"a.txt": "aardvark"}))["id"]
    _scan(client, auth, sid)
    run_jobs()
    _fail_records(app, sid, "Not a valid PDF file")  # the same bytes would fail the same way
    _scan(client, auth, sid)
    run_jobs()
    assert {status for status, _ in records(app, sid).values()} == {"failed"}
    assert client.get(f"/api/status/{sid}", headers=auth).get_json()["last_run"]["unchanged_files"] == 1


def test_verify_reports_failed_files_that_now_read(app, client, auth, make_tree, make_source, run_jobs):
    root = make_tree("docs", {"a.txt": "aardvark", "b.txt": "bison", "c.txt": "cat"})
    sid = make_source(root)["id"]
    _scan(client, auth, sid)
    run_jobs()
    assert verify(app, sid)["problems"] == 0
    _fail_records(app, sid, "File no longer exists")
    (root / "c.txt").unlink()  # still gone: a vanished record, not one that now reads
    report = verify(app, sid)
    assert report["failed_files_now_readable"] == 2
    assert report["sample"]["failed_files_now_readable"] == [str(root / "a.txt"), str(root / "b.txt")]
    _scan(client, auth, sid)
    run_jobs()
    assert verify(app, sid)["problems"] == 0
    assert {s for s, _ in records(app, sid).values()} == {"success"}


@pytest.mark.slow
@pytest.mark.skipif(not permissions_bind_worker(), reason="needs setpriv when run as root")
def test_unreadable_file_heals_once_readable(app, client, auth, make_tree, make_source):
    """A real worker (without DAC override) meets a mode-000 file, then its mode is fixed:
    size and mtime stay the same, yet the next scan indexes it."""
    root = make_tree("docs", {"locked.txt": "armadillo behind a lock", "open.txt": "open"})
    locked = root / "locked.txt"
    locked.chmod(0)
    sid = make_source(root)["id"]
    with Worker(app):
        _scan(client, auth, sid)
        poll_status(client, auth, sid, finished)
        assert records(app, sid)[str(locked)] == ("failed", "File is not readable")
        locked.chmod(0o644)  # changes ctime only
        assert verify(app, sid)["failed_files_now_readable"] == 1
        before = client.get(f"/api/status/{sid}", headers=auth).get_json()["last_run"]
        _scan(client, auth, sid)
        poll_status(client, auth, sid, lambda s: finished(s) and s["last_run"] != before)
    assert records(app, sid)[str(locked)] == ("success", None)
    assert _hits(client, auth, "armadillo") == 1
