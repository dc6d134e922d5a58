"""Scans through RQ: incremental runs, 409, full rebuilds, clear-stale, schedules, progress, crashes."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta

import psutil
import pytest

from tests.workers import Worker, poll_status

FILES = {
    "a.txt": "alpha report",
    "b.md": "# Bravo\nbudget notes",
    "sub/c.py": "print('charlie')",
    "node_modules/x/skip.js": "never indexed",
    "sub/.git/config": "never indexed",
}


def _reindex(client, auth, sid, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return client.post(f"/api/sources/{sid}/reindex" + (f"?{query}" if query else ""), headers=auth)


def _scan(client, auth, run_jobs, sid, **params) -> dict:
    resp = _reindex(client, auth, sid, **params)
    assert resp.status_code == 200, resp.get_json()
    run_jobs()
    return client.get(f"/api/status/{sid}", headers=auth).get_json()["last_run"]


def _search(client, auth, q, **extra) -> dict:
    resp = client.post("/api/search", headers=auth, json={"q": q, **extra})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def test_reindex_answers_at_once_and_a_second_one_gets_409(client, auth, make_tree, make_source):
    src = make_source(make_tree("docs", FILES))
    first = _reindex(client, auth, src["id"])
    assert first.status_code == 200
    body = first.get_json()
    assert body["job_id"] and "queued" in body["message"]
    assert body["stats"]["state"] == "queued" and body["stats"]["progress"] == {"done": 0, "total": 0}
    assert client.get(f"/api/sources/{src['id']}", headers=auth).get_json()["state"] == "queued"
    second = _reindex(client, auth, src["id"])
    assert second.status_code == 409
    assert second.get_json() == {"detail": f"Source '{src['id']}' is already queued"}
    assert client.post(f"/api/sources/{src['id']}/clear-stale", headers=auth).status_code == 409


@pytest.mark.pg
def test_incremental_scans(client, auth, make_tree, make_source, run_jobs):
    root = make_tree("docs", FILES)
    sid = make_source(root)["id"]
    first = _scan(client, auth, run_jobs, sid)
    assert first["state"] == "finished"
    assert (first["total_scanned"], first["new_files"], first["successful"]) == (3, 3, 3)
    assert first["progress"] == {"done": 3, "total": 3}
    assert _search(client, auth, "charlie")["total"] == 1
    assert _search(client, auth, "never")["total"] == 0  # excluded folders are not indexed

    second = _scan(client, auth, run_jobs, sid)
    assert (second["unchanged_files"], second["new_files"], second["modified_files"]) == (3, 0, 0)

    os.utime(root / "a.txt", ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    third = _scan(client, auth, run_jobs, sid)
    assert (third["modified_files"], third["unchanged_files"]) == (1, 2)

    (root / "sub" / "c.py").unlink()
    fourth = _scan(client, auth, run_jobs, sid)
    assert fourth["deleted_files"] == 1
    assert _search(client, auth, "charlie")["total"] == 0

    excludes = ["**/*.md", "**/node_modules", "**/.git"]
    client.put(f"/api/sources/{sid}", headers=auth, json={"exclude_patterns": excludes})
    fifth = _scan(client, auth, run_jobs, sid)
    assert fifth["deleted_files"] == 1 and fifth["total_scanned"] == 1
    assert _search(client, auth, "budget")["total"] == 0
    status = client.get(f"/api/status/{sid}", headers=auth).get_json()
    assert status["total_files"] == 1 and status["last_scan_at"]
    src = client.get(f"/api/sources/{sid}", headers=auth).get_json()
    assert src["document_count"] == 1 and src["state"] == "idle"


def test_wait_returns_the_finished_stats(app, client, auth, make_tree, make_source):
    """?wait=N blocks until a real worker process has finished the scan."""
    sid = make_source(make_tree("docs", FILES))["id"]
    with Worker(app):
        for _ in range(3):  # the source is free as soon as a run is seen finished
            resp = _reindex(client, auth, sid, wait=60)
            assert resp.status_code == 200, resp.get_json()
            stats = resp.get_json()["stats"]
            assert stats["state"] == "finished"
    assert stats["unchanged_files"] == 3


@pytest.mark.pg
def test_full_rebuild_reextracts_everything_and_checks_the_root(
    client, auth, make_tree, make_source, run_jobs
):
    root = make_tree("docs", FILES)
    sid = make_source(root)["id"]
    _scan(client, auth, run_jobs, sid)
    full = _scan(client, auth, run_jobs, sid, full="true")
    assert full["modified_files"] == 3 and full["successful"] == 3
    assert _search(client, auth, "alpha")["total"] == 1
    root.rename(root.parent / "moved")
    gone = _reindex(client, auth, sid, full="true")
    assert gone.status_code == 400 and gone.get_json()["detail"].startswith("root_path:")
    assert _search(client, auth, "alpha")["total"] == 1  # nothing was cleared


@pytest.mark.pg
def test_a_vanished_root_fails_the_scan_without_deleting_anything(
    client, auth, make_tree, make_source, run_jobs
):
    root = make_tree("docs", FILES)
    sid = make_source(root)["id"]
    _scan(client, auth, run_jobs, sid)
    root.rename(root.parent / "unmounted")
    run = _scan(client, auth, run_jobs, sid)
    assert run["state"] == "failed" and "does not exist" in run["message"]
    assert _search(client, auth, "alpha")["total"] == 1


@pytest.mark.pg
def test_failed_files_are_recorded_searchable_by_name_and_cleared(
    client, auth, make_tree, make_source, run_jobs
):
    root = make_tree("docs", {"good.txt": "fine words", "broken-report.pdf": b"%PDF-1.4 garbage"})
    sid = make_source(root)["id"]
    run = _scan(client, auth, run_jobs, sid)
    assert (run["successful"], run["failed"], run["error_count"]) == (1, 1, 1)
    assert run["errors"][0]["path"].endswith("broken-report.pdf") and run["errors"][0]["error"]
    status = client.get(f"/api/status/{sid}", headers=auth).get_json()
    assert status["failed"] == 1 and status["failed_files"][0]["path"].endswith("broken-report.pdf")
    assert _search(client, auth, "broken report")["total"] == 1  # findable by its name
    again = _scan(client, auth, run_jobs, sid)
    assert again["unchanged_files"] == 2 and again["failed"] == 0  # not retried unless changed
    cleared = client.post(f"/api/sources/{sid}/clear-stale", headers=auth)
    assert cleared.status_code == 200 and cleared.get_json() == {"removed": 1}
    assert _search(client, auth, "broken report")["total"] == 0
    retried = _scan(client, auth, run_jobs, sid)
    assert retried["new_files"] == 1 and retried["failed"] == 1


@pytest.mark.pg
def test_too_large_files_are_skipped_but_findable(app, client, auth, make_tree, make_source, run_jobs):
    app.config["MAX_FILE_SIZE_MB"] = 1
    root = make_tree("docs", {"huge-archive.txt": "x" * (2 * 1024 * 1024), "small.txt": "tiny"})
    sid = make_source(root)["id"]
    run = _scan(client, auth, run_jobs, sid)
    assert (run["skipped"], run["successful"]) == (1, 1)
    hits = _search(client, auth, "huge archive")
    assert hits["total"] == 1 and hits["results"][0]["basename"] == "huge-archive.txt"


@pytest.mark.pg
def test_delete_source_removes_documents_and_records(client, auth, make_tree, make_source, run_jobs):
    root = make_tree("docs", FILES)
    sid = make_source(root)["id"]
    _scan(client, auth, run_jobs, sid)
    assert client.delete(f"/api/sources/{sid}", headers=auth).status_code == 204
    assert _search(client, auth, "alpha")["total"] == 0
    assert (root / "a.txt").read_text() == "alpha report"
    status = client.get("/api/status", headers=auth).get_json()
    assert status["documents"] == 0 and status["sources"] == []


@pytest.mark.pg
def test_delete_cancels_a_queued_scan(client, auth, make_tree, make_source, run_jobs):
    sid = make_source(make_tree("docs", FILES))["id"]
    _reindex(client, auth, sid)
    assert client.delete(f"/api/sources/{sid}", headers=auth).status_code == 204
    run_jobs()  # the queued job finds its run cancelled and writes nothing
    assert _search(client, auth, "alpha")["total"] == 0


@pytest.mark.pg
def test_rename_updates_source_name_in_results(client, auth, make_tree, make_source, run_jobs):
    sid = make_source(make_tree("docs", FILES), name="Old name")["id"]
    _scan(client, auth, run_jobs, sid)
    client.put(f"/api/sources/{sid}", headers=auth, json={"name": "New name"})
    run_jobs()  # a worker rewrites the documents
    assert _search(client, auth, "alpha")["results"][0]["source_name"] == "New name"


@pytest.mark.pg
def test_overall_status_counts_queue_and_documents(client, auth, make_tree, make_source, run_jobs):
    sid = make_source(make_tree("docs", FILES))["id"]
    _scan(client, auth, run_jobs, sid)
    body = client.get("/api/status", headers=auth).get_json()
    assert body["documents"] == 3 and body["search_backend"] == "tantivy"
    assert set(body["queue"]) == {"queued", "started", "failed", "workers"}
    entry = body["sources"][0]
    assert entry["source_id"] == sid and entry["successful"] == 3 and entry["state"] == "idle"
    assert entry["last_run"]["state"] == "finished" and entry["last_indexed_at"]


# -- schedules ----------------------------------------------------------------------------------


def _scheduled_jobs(app, sid):
    from webapp.jobs import _scheduler

    with app.app_context():
        return [j for j in _scheduler(app).get_jobs(with_times=True) if j[0].id == f"schedule-{sid}"]


@pytest.mark.pg
def test_schedule_is_booked_moved_and_removed(app, client, auth, make_tree, make_source):
    sid = make_source(make_tree("docs", FILES), scan_schedule="0 3 * * 7")["id"]
    src = client.get(f"/api/sources/{sid}", headers=auth).get_json()
    assert src["next_scan_at"].endswith("03:00:00")
    booked = _scheduled_jobs(app, sid)
    assert len(booked) == 1 and booked[0][1].isoformat().startswith(src["next_scan_at"][:16])
    client.put(f"/api/sources/{sid}", headers=auth, json={"scan_schedule": "@hourly"})
    booked = _scheduled_jobs(app, sid)
    assert len(booked) == 1 and booked[0][1].minute == 0
    client.put(f"/api/sources/{sid}", headers=auth, json={"scan_schedule": None})
    assert _scheduled_jobs(app, sid) == []


@pytest.mark.pg
def test_a_missed_run_runs_once_at_start_and_books_the_next(
    app, client, auth, make_tree, make_source, run_jobs
):
    from webapp.extensions import db
    from webapp.jobs import rebuild_schedules
    from webapp.models import Source, utcnow

    sid = make_source(make_tree("docs", FILES), scan_schedule="@daily")["id"]
    with app.app_context():
        db.session.get(Source, sid).next_scan_at = utcnow() - timedelta(hours=3)
        db.session.commit()
    assert rebuild_schedules(app) == 1
    assert rebuild_schedules(app) == 1  # rebuilding twice books no duplicates
    run_jobs()
    src = client.get(f"/api/sources/{sid}", headers=auth).get_json()
    assert src["last_scan_at"] is not None
    assert src["next_scan_at"] > src["last_scan_at"] and src["next_scan_at"].endswith("02:00:00")
    assert len(_scheduled_jobs(app, sid)) == 1
    assert _search(client, auth, "alpha")["total"] == 1


@pytest.mark.pg
def test_a_due_run_is_skipped_while_the_source_is_busy(app, client, auth, make_tree, make_source):
    from webapp.jobs import scheduled_scan

    sid = make_source(make_tree("docs", FILES), scan_schedule="@hourly")["id"]
    _reindex(client, auth, sid)
    with app.app_context():
        assert scheduled_scan(sid) == "skipped: busy"


# -- real worker processes: progress and crashes ------------------------------------------------


def _many_files(n: int) -> dict[str, str]:
    return {f"notes/n{i:04d}.txt": f"note number {i} about topic{i % 7}" for i in range(n)}


@pytest.mark.slow
def test_progress_moves_while_a_scan_runs(app, client, auth, make_tree, make_source):
    # enough small batches that the scan lasts seconds, however fast the machine is
    app.config["SCAN_BATCH_SIZE"] = 2
    n = 2000
    sid = make_source(make_tree("docs", _many_files(n)))["id"]
    _reindex(client, auth, sid)
    with Worker(app):
        mid = poll_status(
            client,
            auth,
            sid,
            lambda s: s["state"] == "indexing" and 0 < s["last_run"]["progress"]["done"] < n,
        )
        assert mid["last_run"]["progress"]["total"] == n and mid["last_run"]["current_file"]
        done = poll_status(client, auth, sid, lambda s: s["state"] == "idle")
    assert done["last_run"]["successful"] == n and done["total_files"] == n


@pytest.mark.slow
def test_a_killed_worker_does_not_leave_the_source_stuck(app, client, auth, make_tree, make_source):
    app.config.update(SCAN_BATCH_SIZE=5, SCAN_LOCK_SECONDS=3)
    sid = make_source(make_tree("docs", _many_files(600)))["id"]
    _reindex(client, auth, sid)
    with Worker(app) as worker:
        poll_status(client, auth, sid, lambda s: s["last_run"] and s["last_run"]["progress"]["done"] > 0)
        worker.kill()
    poll_status(client, auth, sid, lambda s: s["state"] == "idle", timeout=30)
    assert _reindex(client, auth, sid).status_code == 200
    with Worker(app):
        final = poll_status(
            client, auth, sid, lambda s: s["state"] == "idle" and s["last_run"]["state"] == "finished"
        )
    assert final["total_files"] == 600
    assert _search(client, auth, "note")["total"] == 600
    from webapp.indexing.verify import verify_source

    with app.app_context():
        report = verify_source(sid, repair=False)
    assert report["problems"] == 0, report


@pytest.mark.pg
def test_a_run_ending_while_its_status_is_read_is_not_taken_for_dead(
    app, client, auth, make_tree, make_source, run_jobs
):
    """A run commits its final stats, frees the source, then publishes them: a status read that
    holds the source from before that commit sees the run finished, not interrupted."""
    from sqlalchemy import update

    from webapp.extensions import db
    from webapp.indexing.runstats import RunState, RunStats
    from webapp.indexing.state import scan_lock
    from webapp.models import Source
    from webapp.services.status import source_status

    sid = make_source(make_tree("docs", FILES))["id"]
    done = RunStats.from_dict(_scan(client, auth, run_jobs, sid))
    done.started_at = "2026-11-24T10:00:00"  # the next run, ending now
    running = RunStats.from_dict(done.to_dict())
    running.state, running.finished_at = RunState.INDEXING, None
    with app.app_context():
        source = db.session.get(Source, sid)  # the reader loaded it before the run ended
        scan_lock(sid).write_stats(running)  # the run's latest published stats
        with db.engine.begin() as conn:  # the run's own commit; its lock is already gone
            conn.execute(update(Source).where(Source.id == sid).values(last_run=done.to_dict()))
        status = source_status(source)
        db.session.remove()
    assert status["state"] == "idle"
    assert status["last_run"].state == RunState.FINISHED, status["last_run"]
    assert client.get(f"/api/status/{sid}", headers=auth).get_json()["last_run"]["state"] == "finished"


@pytest.mark.slow
def test_a_killed_coordinator_leaves_its_run_interrupted_not_indexing(
    app, client, auth, make_tree, make_source
):
    app.config.update(SCAN_BATCH_SIZE=2, SCAN_LOCK_SECONDS=3)  # small batches: seconds of work
    n = 2000
    sid = make_source(make_tree("docs", _many_files(n)))["id"]
    _reindex(client, auth, sid)
    with Worker(app) as worker:
        running = poll_status(
            client,
            auth,
            sid,
            lambda s: s["state"] == "indexing" and 0 < s["last_run"]["progress"]["done"] < n / 2,
        )
        # the coordinator is RQ's work horse, in a process group of its own with its
        # extraction child: kill -9 that group, the worker itself lives on
        horse = psutil.Process(worker.proc.pid).children()[0]
        os.killpg(horse.pid, signal.SIGKILL)
        # once the lock has expired, a status read finds the run dead and says so, for good
        status = poll_status(client, auth, sid, lambda s: s["state"] == "idle", timeout=30)
        run = status["last_run"]
        assert run["state"] == "interrupted" and "Interrupted" in run["message"]
        assert run["started_at"] == running["last_run"]["started_at"] and run["finished_at"]
        assert run["current_file"] is None and 0 < run["progress"]["done"] < n
        time.sleep(1)
        assert client.get(f"/api/status/{sid}", headers=auth).get_json()["last_run"] == run
        listed = client.get("/api/status", headers=auth).get_json()["sources"][0]["last_run"]
        assert listed["state"] == "interrupted"
        assert _reindex(client, auth, sid).status_code == 200
        final = poll_status(
            client, auth, sid, lambda s: s["state"] == "idle" and s["last_run"]["state"] == "finished"
        )
    assert final["total_files"] == n and final["last_run"]["message"] is None
