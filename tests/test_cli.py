"""The CLI (`trawl ...`, alias `flask --app wsgi trawl ...`): JSON output, exit statuses, and one
configuration with `make run` (its data folder, the Redis it started and the settings it runs
with), refusing clearly when they are missing or malformed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from click.testing import CliRunner
from flask.cli import ScriptInfo

from tests.conftest import REPO, initialised_app
from tests.workers import Worker
from webapp import cli, config, create_app, create_cli_app

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
    quiet = create_app({**app_config, "REDIS_URL": f"unix://{tmp_path / 'none.sock'}"})
    started = time.monotonic()
    result = quiet.test_cli_runner().invoke(args=["trawl", "sources"])
    assert result.exit_code == 1
    assert f"Trawl's Redis does not answer at unix://{tmp_path / 'none.sock'}" in result.output
    assert time.monotonic() - started < 20


def test_an_unused_default_data_folder_is_refused(app_config, tmp_path, monkeypatch):
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


def test_the_cli_takes_the_allowed_roots_of_the_running_service(app_config, tmp_path, roots, monkeypatch):
    """`ALLOWED_ROOTS=... make run` in another shell: the launcher writes the settings its
    environment gave into the data folder, and a command whose own environment leaves them
    unset takes them (naming where they came from when it refuses); once that launcher is
    gone its file counts for nothing."""
    (tmp_path / "shell").mkdir()
    monkeypatch.chdir(tmp_path / "shell")  # no .env
    monkeypatch.delenv("ALLOWED_ROOTS", raising=False)
    own = {k: v for k, v in app_config.items() if k != "ALLOWED_ROOTS"}  # this shell: the default
    elsewhere = tmp_path / "mnt" / "nas"
    (elsewhere / "team").mkdir(parents=True)
    data = Path(app_config["DATA_DIR"])
    runner = initialised_app(own).test_cli_runner()
    refused = runner.invoke(args=["trawl", "add-source", "Team", str(elsewhere / "team"), "--no-scan"])
    assert refused.exit_code == 1
    assert f"(allowed roots: {data / 'sources'}; ALLOWED_ROOTS unset: the default)" in refused.output
    monkeypatch.setenv("ALLOWED_ROOTS", f"{roots},{tmp_path / 'mnt'}")
    config.write_service_settings(data)  # what the launcher does at start, with its environment
    monkeypatch.delenv("ALLOWED_ROOTS")
    runner = create_app(own).test_cli_runner()  # each command loads the settings anew
    added = runner.invoke(args=["trawl", "add-source", "Team", str(elsewhere / "team"), "--no-scan"])
    assert added.exit_code == 0, added.output
    outside = runner.invoke(args=["trawl", "add-source", "Etc", "/etc"])
    assert outside.exit_code == 1
    assert "ALLOWED_ROOTS from the running service" in outside.output
    assert os.path.realpath(tmp_path / "mnt") in outside.output
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    stale = json.loads((data / config.SERVICE_FILE).read_text()) | {"pid": int(gone.stdout)}
    (data / config.SERVICE_FILE).write_text(json.dumps(stale))  # its launcher was killed
    after = create_app(own).test_cli_runner().invoke(args=["trawl", "add-source", "Nas", str(elsewhere)])
    assert after.exit_code == 1 and "ALLOWED_ROOTS unset: the default" in after.output


def test_a_forged_redis_settings_record_changes_nothing(app, roots):
    """Redis holds no setting: a record in the old place naming `/` as an allowed root (or
    garbage) neither widens what a command may touch nor breaks it."""
    store = redis.Redis.from_url(app.config["REDIS_URL"])
    runner = app.test_cli_runner()
    forged = {"ALLOWED_ROOTS": ["/"], "DATA_DIR": app.config["DATA_DIR"], "started_at": "now"}
    forged["DATABASE_URL"] = app.config["DATABASE_URL"]
    for record in (json.dumps(forged), "{not json"):
        store.set("trawl:service:settings", record)
        refused = runner.invoke(args=["trawl", "add-source", "Etc", "/etc"])
        assert refused.exit_code == 1, refused.output
        assert "outside the allowed roots" in refused.output and "Traceback" not in refused.output
    listed = runner.invoke(args=["trawl", "sources", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.stdout) == []


def _run_trawl(args: list[str], overrides: dict):
    """`trawl ARGS` as its console script runs it (the command-line app), in this process."""
    info = ScriptInfo(create_app=lambda: create_cli_app(overrides))
    return CliRunner().invoke(cli.trawl, args, obj=info)


@pytest.mark.parametrize(
    "where, value",
    [
        ("environment", "WORKERS=two"),
        ("file", "not json"),
        ("file", '{"pid": 1, "host": "h", "settings": {"ALLOWED_ROOTS": ["/"]}}'),
        ("file", '{"pid": 1, "host": "h", "settings": {"NO_SUCH_SETTING": "x"}}'),
    ],
)
def test_a_malformed_setting_is_one_line(app, app_config, monkeypatch, where, value):
    data = Path(app_config["DATA_DIR"])
    if where == "environment":
        monkeypatch.setenv(*value.split("=", 1))
    else:
        (data / config.SERVICE_FILE).write_text(value)
    result = _run_trawl(["sources"], app_config)
    assert result.exit_code not in (0, None) and isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert lines[0].startswith("Setting WORKERS" if where == "environment" else "Settings file")


def test_add_source_scans_at_once_unless_told_not_to(app, make_tree, run_jobs):
    """As the web form does: the folder's existing files are found without a second command."""
    make_tree("docs", {"a.txt": "alpha"})
    make_tree("later", {"b.txt": "beta"})
    runner = app.test_cli_runner()
    roots = Path(app.config["ALLOWED_ROOTS"][0])
    assert runner.invoke(args=["trawl", "add-source", "Docs", str(roots / "docs")]).exit_code == 0
    quiet = runner.invoke(args=["trawl", "add-source", "Later", str(roots / "later"), "--no-scan"])
    assert quiet.exit_code == 0, quiet.output
    run_jobs()
    listed = _json(runner.invoke(args=["trawl", "sources", "--json"]))
    assert {s["id"]: s["document_count"] for s in listed} == {"docs": 1, "later": 0}


def test_search_prints_rank_title_type_where_and_a_snippet(app, indexed):
    runner = app.test_cli_runner()
    shown = runner.invoke(args=["trawl", "search", "budget", "--sort", "basename:asc"])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("3 results in ")
    assert lines[1:4] == [
        "   1. notes.md  [markdown]",
        f"      {Path(app.config['ALLOWED_ROOTS'][0]) / 'docs' / 'notes.md'}",
        "      budget notes",
    ]
    assert "   2. other.txt  [text]" in lines and "      budget elsewhere" in lines
    assert "<em>" not in shown.stdout
    page = _json(runner.invoke(args=["trawl", "search", "budget", "--json", "--limit", "2", "--offset", "1"]))
    assert [r["rank"] for r in page["results"]] == [2, 3]


def test_terminal_text_keeps_a_files_control_characters_off_the_terminal():
    from webapp.cli.search import plain_snippet

    assert plain_snippet("a \x1b]0;owned\x07 <em>b</em> &amp; \u202ec\n") == "a ]0;owned b & c"


def test_help_answers_without_loading_the_app(tmp_path):
    """`trawl --help` lists the commands without importing a command's module, the app, the
    database layer or the search engine (what made `--help` take seconds)."""
    probe = (
        "import sys\nfrom webapp.cli import trawl\n"
        "try:\n    trawl.main(['--help'], prog_name='trawl')\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('sqlalchemy', 'tantivy', 'flask_smorest', 'alembic', "
        "'webapp.models', 'webapp.cli.common', 'webapp.cli.search', 'redis') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "DATA_DIR": str(tmp_path)},
    )
    assert "Usage: trawl " in done.stdout, done.stderr
    assert "search" in done.stdout and "add-source" in done.stdout, done.stderr
    assert "LOADED []" in done.stdout, done.stdout


def test_the_list_of_commands_says_what_each_command_says():
    """`trawl --help` reads the one-line helps from cli.COMMANDS: each is its command's own."""
    for name, lazy in cli.COMMANDS.items():
        command = cli.trawl.get_command(None, name)
        assert command.name == name
        assert command.get_short_help_str(limit=1000) == lazy.help, name
    assert sorted(cli.trawl.list_commands(None)) == sorted(cli.COMMANDS)


def test_the_console_script_is_the_trawl_group(app):
    """pyproject's `trawl` console script (installed into .venv/bin by `make install`) runs
    webapp.cli:main, the same group `flask --app wsgi trawl` serves."""
    import tomllib

    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert declared == {"trawl": "webapp.cli:main"}
    assert "--no-deps -e ." in (REPO / "Makefile").read_text()
    assert app.cli.commands["trawl"] is cli.trawl  # the alias: the whole app's CLI holds the group


def test_commands_run_in_the_light_app(tmp_path, app_config):
    """`trawl` builds create_cli_app: its commands never import the API, the UI, the
    dashboard or Alembic (most of what a search from the shell used to cost)."""
    probe = (
        "import sys\nfrom webapp import create_cli_app\nfrom webapp.cli import trawl\n"
        "app = create_cli_app()\n"
        "with app.app_context():\n    trawl.get_command(None, 'search')\n"
        "print('LOADED', sorted(m for m in ('alembic', 'flask_smorest', 'flask_migrate', 'apispec', "
        "'rq_dashboard', 'flask_babel', 'webapp.api', 'webapp.ui') if m in sys.modules))"
    )
    env = {**os.environ, **{k: v for k, v in app_config.items() if isinstance(v, str) and v}}
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, env=env
    )
    assert "LOADED []" in done.stdout, done.stdout + done.stderr


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
