"""The CLI (`flask --app wsgi trawl ...`): JSON output, exit statuses, and one configuration with
`make run` (its data folder and the Redis it started), refusing clearly when they are missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import redis

from tests.conftest import REPO, initialised_app
from tests.workers import Worker

BROKEN_PDF = b"%PDF-1.4 not really a pdf"


@pytest.fixture
def indexed(client, auth, make_tree, make_source, run_jobs):
    """Two sources, scanned: docs (a text, a markdown file, a broken PDF) and misc."""
    make_source(
        make_tree("docs", {"plan.txt": "budget plan", "notes.md": "# budget notes", "bad.pdf": BROKEN_PDF}),
        name="Docs",
    )
    make_source(make_tree("misc", {"other.txt": "budget elsewhere"}), name="Misc")
    for sid in ("docs", "misc"):
        client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()


def _json(result):
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_commands_that_print_data_have_json(app, indexed):
    runner = app.test_cli_runner()
    listed = _json(runner.invoke(args=["trawl", "sources", "--json"]))
    assert [(s["id"], s["failed_count"]) for s in listed] == [("docs", 1), ("misc", 0)]
    runs = _json(runner.invoke(args=["trawl", "jobs", "--json"]))
    assert sorted((r["source_id"], r["state"]) for r in runs) == [("docs", "finished"), ("misc", "finished")]
    failed = _json(runner.invoke(args=["trawl", "failed", "docs", "--json"]))
    assert failed["total"] == 1 and failed["groups"][0]["paths"][0].endswith("bad.pdf")
    human = runner.invoke(args=["trawl", "jobs"])
    assert human.exit_code == 0 and "docs" in human.output and "1 failed" in human.output


def test_search_options(app, indexed):
    runner = app.test_cli_runner()
    every = _json(runner.invoke(args=["trawl", "search", "budget", "--json"]))
    assert every["total"] == 3
    only = _json(
        runner.invoke(args=["trawl", "search", "budget", "--json", "--source", "docs", "--type", "markdown"])
    )
    assert [r["basename"] for r in only["results"]] == ["notes.md"]
    paged = _json(
        runner.invoke(
            args=[
                "trawl",
                "search",
                "budget",
                "--json",
                "--limit",
                "1",
                "--offset",
                "2",
                "--sort",
                "basename:asc",
            ]
        )
    )
    assert (paged["limit"], paged["offset"]) == (1, 2)
    assert [r["basename"] for r in paged["results"]] == ["plan.txt"]
    bad = runner.invoke(args=["trawl", "search", "budget", "--source", "nope"])
    assert bad.exit_code == 1 and "Error: source_id: unknown source 'nope'" in bad.output


def _wait_for_worker(app) -> None:
    from rq import Worker as RQWorker

    from webapp.runtime import get_queue, get_redis

    deadline = time.monotonic() + 60
    while not RQWorker.count(connection=get_redis(app), queue=get_queue(app)):
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.2)


def test_scan_exits_non_zero_when_files_failed(app, client, auth, make_tree, make_source):
    make_source(make_tree("docs", {"a.txt": "alpha", "bad.pdf": BROKEN_PDF}), name="Docs")
    make_source(make_tree("good", {"b.txt": "beta"}), name="Good")
    runner = app.test_cli_runner()
    alone = runner.invoke(args=["trawl", "scan", "docs"])
    assert alone.exit_code == 1 and "no worker is running" in alone.output  # refused, not hung
    with Worker(app):
        _wait_for_worker(app)
        failed = runner.invoke(args=["trawl", "scan", "docs"])
        good = runner.invoke(args=["trawl", "scan", "good", "--json"])
    assert failed.exit_code == 1, failed.output
    assert "Scan finished: 2 seen, 2 new" in failed.output
    assert "Error: 1 file failed" in failed.output
    assert "it/s" not in failed.output  # no progress bar when not on a terminal
    assert good.exit_code == 0 and json.loads(good.stdout)["state"] == "finished"
    queued = runner.invoke(args=["trawl", "scan", "good", "--no-wait", "--json"])
    assert queued.exit_code == 0 and json.loads(queued.stdout)["job_id"].startswith("scan-good-")


@pytest.mark.pg
def test_verify_reports_and_repairs_only_when_asked(app, client, auth, make_tree, make_source, run_jobs):
    root = make_tree("docs", {"a.txt": "alpha", "b.txt": "beta"})
    make_source(root, name="Docs")
    client.post("/api/sources/docs/reindex", headers=auth)
    run_jobs()
    (root / "b.txt").unlink()
    runner = app.test_cli_runner()
    report = runner.invoke(args=["trawl", "verify", "docs"])
    assert report.exit_code == 2 and json.loads(report.stdout)["repaired"] is False
    again = runner.invoke(args=["trawl", "verify", "docs"])
    assert json.loads(again.stdout)["records_of_vanished_files"] == 1  # nothing was changed
    fixed = runner.invoke(args=["trawl", "verify", "docs", "--repair"])
    assert fixed.exit_code == 0 and json.loads(fixed.stdout)["repaired"] is True
    assert json.loads(runner.invoke(args=["trawl", "verify", "docs"]).stdout)["problems"] == 0


def test_no_redis_is_refused_at_once(app_config, tmp_path, auth):
    from webapp import create_app

    quiet = create_app({**app_config, "REDIS_URL": f"unix://{tmp_path / 'none.sock'}"})
    started = time.monotonic()
    result = quiet.test_cli_runner().invoke(args=["trawl", "sources"])
    assert result.exit_code == 1
    assert f"Trawl's Redis does not answer at unix://{tmp_path / 'none.sock'}" in result.output
    assert time.monotonic() - started < 20


def test_an_unused_default_data_folder_is_refused(app_config, tmp_path, monkeypatch):
    from webapp import create_app

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATA_DIR", raising=False)
    fresh = create_app({**app_config, "DATA_DIR": "./data", "DATABASE_URL": ""})
    for args in (["trawl", "sources"], ["trawl", "search", "x"]):
        result = fresh.test_cli_runner().invoke(args=args)
        assert result.exit_code == 1, result.output
        assert f"the data folder {tmp_path / 'data'} holds no Trawl data" in result.output
        assert "Set DATA_DIR" in result.output
    early = fresh.test_cli_runner().invoke(
        args=["create-admin", "--username", "ops", "--password", "long enough password"]
    )
    assert early.exit_code == 1 and "is not initialised" in early.output, early.output
    assert "Traceback" not in early.output
    assert fresh.test_cli_runner().invoke(args=["trawl", "init"]).exit_code == 0
    made = fresh.test_cli_runner().invoke(
        args=["create-admin", "--username", "ops", "--password", "long enough password"]
    )
    assert made.exit_code == 0 and str(tmp_path / "data") in made.output
    assert fresh.test_cli_runner().invoke(args=["trawl", "sources", "--json"]).exit_code == 0


def test_a_restart_waits_for_the_embedded_redis_to_load_its_data(tmp_path):
    """After a big scan the embedded Redis's data file is hundreds of MB and loading it takes
    a while, during which Redis answers INFO and CONFIG but refuses data commands: the
    launcher waits until it has loaded (it used to go on and die on its first data call)."""
    from webapp import launcher

    data = tmp_path / "data"
    data.mkdir()
    url = f"unix://{data / 'redis.sock'}"
    first = subprocess.Popen(launcher.redis_command(data), stdout=subprocess.DEVNULL)
    try:
        assert launcher.redis_ready(url, first)
        filled = redis.Redis.from_url(url)
        for batch in range(8):
            with filled.pipeline(transaction=False) as pipe:
                for i in range(25_000):
                    pipe.set(f"k{batch}:{i}", "x" * 64)
                pipe.execute()
        filled.shutdown()  # written out, as the launcher's stop leaves it
    finally:
        first.wait(30)
    again = subprocess.Popen(launcher.redis_command(data), stdout=subprocess.DEVNULL)
    try:
        assert launcher.redis_ready(url, again)
        assert redis.Redis.from_url(url).dbsize() == 200_000
    finally:
        again.terminate()
        again.wait(30)


def test_the_cli_finds_the_redis_of_make_run(tmp_path, roots, database_url):
    """With only DATA_DIR set, as in `make run`'s .env, the CLI uses the Redis `make run` starts
    for that folder (launched here as the launcher launches it): a schedule lands there, and
    once that Redis is stopped the CLI says so at once instead of hanging."""
    from webapp import launcher

    data = tmp_path / "data"
    data.mkdir()
    server = subprocess.Popen(launcher.redis_command(data), stdout=subprocess.DEVNULL)
    try:
        assert launcher.redis_ready(f"unix://{data / 'redis.sock'}", server)
        settings = {
            "DATA_DIR": str(data),
            "REDIS_URL": "",
            "DATABASE_URL": database_url,
            "ALLOWED_ROOTS": str(roots),
        }
        runner = initialised_app(settings).test_cli_runner()
        (roots / "docs").mkdir()
        added = runner.invoke(
            args=["trawl", "add-source", "Docs", str(roots / "docs"), "--schedule", "@daily"]
        )
        assert added.exit_code == 0, added.output
        embedded = redis.Redis(unix_socket_path=str(data / "redis.sock"))
        assert embedded.zcard("rq:scheduler:scheduled_jobs") == 1  # the schedule is there
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        env.update({"DATA_DIR": str(data), "ALLOWED_ROOTS": str(roots)})
        if database_url:
            env["DATABASE_URL"] = database_url
        listed = subprocess.run(
            [sys.executable, "-m", "flask", "--app", "wsgi", "trawl", "sources", "--json"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )  # the real entry point, DATA_DIR only
        assert listed.returncode == 0, listed.stderr
        assert [s["id"] for s in json.loads(listed.stdout)] == ["docs"]
    finally:
        server.terminate()
        server.wait(10)
    stopped = runner.invoke(args=["trawl", "scan", "docs"])
    assert stopped.exit_code == 1
    assert f"does not answer at unix://{data / 'redis.sock'}" in stopped.output
    assert "`make run` starts it" in stopped.output


def test_the_cli_learns_the_allowed_roots_of_the_running_service(app, app_config, tmp_path, roots):
    """`ALLOWED_ROOTS=... make run` in another shell: the command takes the service's roots
    (written into its Redis at start), names the roots it used when it refuses, and refuses
    to act on another database than the service's."""
    from webapp import cli, create_app

    elsewhere = tmp_path / "mnt" / "nas"
    (elsewhere / "team").mkdir(parents=True)
    service = create_app({**app_config, "ALLOWED_ROOTS": f"{roots},{tmp_path / 'mnt'}"})
    runner = app.test_cli_runner()  # this shell's settings: only `roots` allowed
    refused = runner.invoke(args=["trawl", "add-source", "Team", str(elsewhere / "team")])
    assert refused.exit_code == 1
    assert f"(allowed roots: {os.path.realpath(roots)};" in refused.output
    cli.publish_service_settings(service)
    added = runner.invoke(args=["trawl", "add-source", "Team", str(elsewhere / "team")])
    assert added.exit_code == 0, added.output
    outside = runner.invoke(args=["trawl", "add-source", "Etc", "/etc"])
    assert outside.exit_code == 1
    assert "learnt from the running service" in outside.output
    assert os.path.realpath(tmp_path / "mnt") in outside.output
    other = create_app({**app_config, "DATABASE_URL": f"sqlite:///{tmp_path / 'other.db'}"})
    cli.publish_service_settings(other)
    mismatch = runner.invoke(args=["trawl", "sources"])
    assert mismatch.exit_code == 1 and "the running service (started" in mismatch.output
    assert "other.db" in mismatch.output and "Set DATA_DIR or DATABASE_URL" in mismatch.output


def test_help_answers_without_loading_the_app(tmp_path):
    """`python -m webapp.cli --help` lists the commands without importing the app, the
    database layer or the search engine (what made `--help` take seconds)."""
    probe = (
        "import sys, runpy; sys.argv = ['webapp.cli', '--help']\n"
        "try:\n    runpy.run_module('webapp.cli', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('sqlalchemy', 'tantivy', 'flask_smorest', "
        "'alembic', 'webapp.models') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DATA_DIR": str(tmp_path)},
    )
    assert "search" in done.stdout and "add-source" in done.stdout, done.stderr
    assert "LOADED []" in done.stdout, done.stdout


def test_commands_run_in_the_light_app(tmp_path, app_config):
    """`python -m webapp.cli` builds create_cli_app: its commands never import the API, the UI,
    the dashboard or Alembic (most of what a search from the shell used to cost)."""
    probe = (
        "import sys\nfrom webapp import create_cli_app\napp = create_cli_app()\n"
        "with app.app_context():\n    from webapp.services import documents, search_args\n"
        "print('COMMANDS', sorted(app.cli.commands))\n"
        "print('LOADED', sorted(m for m in ('alembic', 'flask_smorest', 'flask_migrate', 'apispec', "
        "'rq_dashboard', 'flask_babel', 'webapp.api', 'webapp.ui') if m in sys.modules))"
    )
    env = {**os.environ, **{k: v for k, v in app_config.items() if isinstance(v, str) and v}}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert "'trawl'" in done.stdout and "'create-admin'" in done.stdout, done.stderr
    assert "LOADED []" in done.stdout, done.stdout


def test_init_in_the_light_app_prepares_a_new_data_folder(tmp_path, redis_url):
    """`python -m webapp.cli init` (the light app, which binds no Flask-Migrate of its own)
    makes a new data folder ready: the schema is created and a second run has nothing to do."""
    env = {
        **os.environ,
        "DATA_DIR": str(tmp_path / "data"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'new.db'}",
        "REDIS_URL": redis_url,
    }
    env.pop("SECRET_KEY", None)
    command = [sys.executable, "-m", "webapp.cli", "init"]
    first = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0, first.stderr
    assert "database schema empty ->" in first.stdout + first.stderr
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0, again.stderr
    assert "->" not in again.stdout + again.stderr and "is ready" in again.stdout + again.stderr
