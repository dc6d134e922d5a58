"""GET /metrics: who may scrape it, and series that move when searches and scans happen in
other processes (a real worker process); the launcher's cleaning of the metrics folder; the
folder named by the entry points, never by importing `webapp`."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import REPO
from tests.workers import Worker, finished, poll_status
from webapp.launcher import clean_metrics


def scrape(client, headers=None) -> dict[tuple, float]:
    """{(series name, ((label, value), ...)): value} of one scrape (it must succeed)."""
    resp = client.get("/metrics", headers=headers or {})
    assert resp.status_code == 200, resp.get_data(as_text=True)
    assert resp.mimetype == "text/plain"
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(resp.get_data(as_text=True))
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float:
    """One series' value, 0 when it has not appeared yet."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def non_admin_headers(app, client) -> dict:
    from webapp.services import auth as auth_service

    with app.app_context():
        auth_service.create_user("reader", "reader-password", is_admin=False)
    resp = client.post("/api/auth/login", json={"username": "reader", "password": "reader-password"})
    return {"Authorization": f"Bearer {resp.get_json()['access_token']}"}


def test_metrics_need_an_admin_token(app, client, auth):
    missing = client.get("/metrics")
    assert missing.status_code == 401
    assert missing.get_json() == {"detail": "Missing or invalid authentication token"}
    assert client.get("/metrics", headers={"Authorization": "Bearer nonsense"}).status_code == 401
    reader = client.get("/metrics", headers=non_admin_headers(app, client))
    assert reader.status_code == 403 and reader.get_json() == {"detail": "Only an admin may do this"}
    assert "trawl_queue_jobs" in client.get("/metrics", headers=auth).get_data(as_text=True)
    # a scraper's key that does not expire with the session: an admin's read-scope API token
    made = client.post("/api/tokens", headers=auth, json={"name": "prometheus", "scope": "read"})
    key = {"Authorization": f"Bearer {made.get_json()['token']}"}
    assert "trawl_queue_jobs" in client.get("/metrics", headers=key).get_data(as_text=True)
    client.delete(f"/api/tokens/{made.get_json()['id']}", headers=auth)
    assert client.get("/metrics", headers=key).status_code == 401


def test_metrics_public_when_configured(app_config, client):
    app_config["METRICS_PUBLIC"] = True
    from webapp import create_app

    public = create_app(app_config).test_client()
    samples = scrape(public)
    assert value(samples, "trawl_workers") == 0
    assert ("trawl_index_bytes", ()) in samples
    assert client.get("/metrics").status_code == 401  # the default app still asks for a token


def test_scan_in_a_worker_and_search_move_the_series(app, client, auth, make_tree, tmp_path):
    files = {f"notes/n{i}.txt": f"salmon run {i}" for i in range(4)}
    files |= {"readme.md": "# Trawl\nsalmon nets", "skip.bin": b"\x00\x01"}
    root = make_tree("docs", files)
    sid = client.post("/api/sources", headers=auth, json={"name": "Docs", "root_path": str(root)}).get_json()[
        "id"
    ]
    before = scrape(client, auth)
    assert value(before, "trawl_documents", source=sid) == 0
    log = tmp_path / "worker.log"
    with open(log, "wb") as out, Worker(app, output=out, LOG_FORMAT="json", LOG_LEVEL="INFO"):
        for _ in range(2):  # the second job's work horse carries on the first one's counts
            assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
            status = poll_status(client, auth, sid, finished, timeout=90)
            assert status["last_run"]["state"] == "finished", status
            (root / "readme.md").write_text("# Trawl\nsalmon nets, mended")
        during = scrape(client, auth)
        assert value(during, "trawl_workers") == 1
    moved = {
        outcome: value(during, "trawl_scan_files_total", source=sid, outcome=outcome)
        - value(before, "trawl_scan_files_total", source=sid, outcome=outcome)
        for outcome in ("success", "failed", "skipped", "unchanged", "deleted")
    }
    assert moved == {"success": 7, "failed": 0, "skipped": 0, "unchanged": 5, "deleted": 0}
    extracted = value(during, "trawl_extraction_seconds_count", type="text") - value(
        before, "trawl_extraction_seconds_count", type="text"
    )
    assert extracted == 4
    assert (
        value(during, "trawl_scan_runs_total", source=sid, state="finished")
        == value(before, "trawl_scan_runs_total", source=sid, state="finished") + 2
    )
    assert value(during, "trawl_documents", source=sid) == 6
    assert value(during, "trawl_index_bytes") > value(before, "trawl_index_bytes")

    assert client.post("/api/search", headers=auth, json={"q": "salmon"}).status_code == 200
    after = scrape(client, auth)
    assert (
        value(after, "trawl_search_duration_seconds_count", backend="tantivy")
        == value(during, "trawl_search_duration_seconds_count", backend="tantivy") + 1
    )

    lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    summary = [x for x in lines if x["message"].startswith(f"Scan of {sid} finished")]
    assert len(summary) == 2, lines
    assert summary[0]["source_id"] == sid and summary[0]["job_id"]
    assert summary[0]["level"] == "INFO" and summary[0]["logger"] == "webapp.indexing.pipeline"
    assert "6 files seen" in summary[0]["message"] and "files/s" in summary[0]["message"]
    assert "1 modified, 5 unchanged" in summary[1]["message"]
    assert {"time", "level", "logger", "message"} <= set(lines[0])


def test_launcher_removes_the_metric_files_of_dead_processes(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    gone, mine = int(dead.stdout), os.getpid()
    for name in (
        f"counter_{gone}.db",
        f"histogram_{gone}h.db",
        f"counter_{mine}.db",
        f"counter_{mine}h.db",
        "notes.txt",
    ):
        (tmp_path / name).write_bytes(b"")
    assert clean_metrics(tmp_path) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"counter_{mine}.db",
        f"counter_{mine}h.db",
        "notes.txt",
    ]


IMPORT_EVERYTHING = """
import importlib, json, os, pkgutil
before = dict(os.environ)
import webapp
for module in pkgutil.walk_packages(webapp.__path__, "webapp."):
    importlib.import_module(module.name)
print(json.dumps({k: os.environ.get(k) for k in set(before) | set(os.environ)
                  if before.get(k) != os.environ.get(k)}))
"""


def clean_environment(home) -> dict[str, str]:
    """A process environment without any of Trawl's settings (nor the test run's)."""
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "PYTHONPATH": str(REPO),
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def test_importing_webapp_sets_nothing_and_writes_nothing(tmp_path):
    """`import webapp` (and every module of it) only defines things: no environment variable
    set, no file or folder made (before, it made ./data/metrics/<host>)."""
    cwd, home = tmp_path / "cwd", tmp_path / "home"
    cwd.mkdir()
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING],
        cwd=cwd,
        env=clean_environment(home),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["cwd", "home"]


def test_an_entry_point_names_the_metrics_folder_first(tmp_path):
    """wsgi.py (gunicorn's workers and `flask --app wsgi`) prepares METRICS_DIR/<host> before
    the app imports prometheus_client, whose series then go to files there."""
    data, home = tmp_path / "data", tmp_path / "home"
    home.mkdir()
    script = (
        "import os, wsgi\n"
        "from webapp.metrics import search_duration\n"
        "search_duration.labels('tantivy').observe(0.01)\n"
        "print(os.environ['PROMETHEUS_MULTIPROC_DIR'])\n"
    )
    env = {**clean_environment(home), "DATA_DIR": str(data), "SECRET_KEY": "k" * 32}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=home, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    folder = data / "metrics" / socket.gethostname()
    assert done.stdout.strip() == str(folder)
    assert len(list(folder.glob("histogram_*.db"))) == 1  # the search's series is written there
