"""Flask commands over the same services as the API: create-admin, and `flask trawl ...`.

The commands read the settings `make run` reads (`.env`, then the environment) and so reach the
Redis it started (a unix socket in the data folder); they refuse at once, saying why, when that
Redis does not answer or when the default data folder was never used.
"""

from __future__ import annotations

import functools
import getpass
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click
from flask import Flask, current_app
from flask.cli import AppGroup, ScriptInfo, with_appcontext

from webapp import config, metrics_dir
from webapp.exceptions import TrawlError

if TYPE_CHECKING:
    from webapp.indexing.runstats import RunStats

# The services, models and the app are imported inside the commands: `--help` and the refusals
# need none of them (see docs/performance.md, "The CLI").

SERVICE_SETTINGS_KEY = "trawl:service:settings"  # written by `make run`, read by the commands
JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")


def _fail(exc: TrawlError | str, code: int = 1) -> None:
    click.echo(f"Error: {exc.detail if isinstance(exc, TrawlError) else exc}", err=True)
    sys.exit(code)


def _print_json(data) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def _data_folder_check() -> None:
    """Say which data folder is used (on a terminal); refuse an unused default `./data`, and a
    data folder `trawl init` has not prepared.

    Without DATA_DIR the commands use `./data` of the working folder, as `make run` does; run
    from elsewhere that folder is new and empty, and a command would act on nothing."""
    from webapp.extensions import db
    from webapp.models import Source, User
    from webapp.runtime import not_initialised

    folder = current_app.config["DATA_DIR"]
    if sys.stderr.isatty():
        click.echo(f"Data folder: {folder}", err=True)
    problem = not_initialised(current_app)
    default = Path(config.Settings.DATA_DIR).expanduser().resolve()
    if (
        Path(folder) == default
        and not config.env_value("DATA_DIR")
        and (
            problem
            or (db.session.query(User.id).first() is None and db.session.query(Source.id).first() is None)
        )
    ):
        _fail(
            f"the data folder {folder} holds no Trawl data (no account, no source). Set "
            "DATA_DIR (in .env or the environment) to the folder `make run` uses, or run "
            "this command in the folder you start `make run` from."
        )
    if problem:
        _fail(problem)


def _initialised_check() -> None:
    """Refuse, saying to run `trawl init`, a data folder or database it has not prepared."""
    from webapp.runtime import not_initialised

    problem = not_initialised(current_app)
    if problem:
        _fail(problem)


def _redis_check() -> None:
    """Refuse at once when Trawl's Redis does not answer (instead of queueing into nothing)."""
    import redis

    from webapp.runtime import get_redis

    url = current_app.config["REDIS_URL"]
    try:
        get_redis().ping()
    except redis.RedisError as exc:
        embedded = url == config.embedded_redis_url(Path(current_app.config["DATA_DIR"]))
        hint = (
            "Start Trawl first: `make run` starts it."
            if embedded
            else "Start that Redis, or set REDIS_URL to the one your Trawl uses."
        )
        _fail(
            f"Trawl's Redis does not answer at {url} ({exc}). {hint} "
            f"(data folder: {current_app.config['DATA_DIR']})"
        )
    _learn_service_settings()


def _database_name(url: str) -> str:
    """The database URL without its password (it is shown in messages)."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def publish_service_settings(app: Flask) -> None:
    """Write the settings the running service uses into its Redis (`make run` calls this once
    it started), so the CLI beside it acts on the same ones."""
    from webapp.runtime import get_redis

    settings = {
        "ALLOWED_ROOTS": app.config["ALLOWED_ROOTS"],
        "DATA_DIR": app.config["DATA_DIR"],
        "DATABASE_URL": _database_name(app.config["DATABASE_URL"]),
        "SEARCH_BACKEND": app.config["SEARCH_BACKEND"],
        "started_at": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    get_redis(app).set(SERVICE_SETTINGS_KEY, json.dumps(settings))


def _setting_origin(name: str) -> str:
    """Where this command's value of a setting came from."""
    return f"{name} from the environment or .env" if config.env_value(name) else f"{name} unset: the default"


def _learn_service_settings() -> None:
    """Take the allowed roots from the running service (they may come from its own environment,
    `ALLOWED_ROOTS=... make run`); refuse when it works on another database than this command."""
    from webapp.runtime import get_redis

    raw = get_redis().get(SERVICE_SETTINGS_KEY)
    if not raw:
        return  # a service started before this was written, or without `make run`
    service = json.loads(raw)
    mine = _database_name(current_app.config["DATABASE_URL"])
    if service["DATABASE_URL"] != mine:
        _fail(
            f"the running service (started {service['started_at']}) uses the database "
            f"{service['DATABASE_URL']} (data folder {service['DATA_DIR']}); this command "
            f"uses {mine} ({_setting_origin('DATABASE_URL')}, data folder "
            f"{current_app.config['DATA_DIR']}). Set DATA_DIR or DATABASE_URL as the service "
            "has them."
        )
    if service["ALLOWED_ROOTS"] != current_app.config["ALLOWED_ROOTS"]:
        current_app.config["ALLOWED_ROOTS"] = service["ALLOWED_ROOTS"]
        current_app.config["ALLOWED_ROOTS_ORIGIN"] = "learnt from the running service"
        if sys.stderr.isatty():
            click.echo(
                "Allowed roots of the running service: " + ", ".join(service["ALLOWED_ROOTS"]), err=True
            )


def _roots_note() -> str:
    """Which allowed roots this command used, and where they came from (for its refusals)."""
    origin = current_app.config.get("ALLOWED_ROOTS_ORIGIN") or _setting_origin("ALLOWED_ROOTS")
    return f" (allowed roots: {', '.join(current_app.config['ALLOWED_ROOTS'])}; {origin})"


def needs_trawl(func: Callable) -> Callable:
    """The command works on a used data folder and reaches its Redis, or refuses at once."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        _data_folder_check()
        _redis_check()
        return func(*args, **kwargs)

    return wrapper


def needs_data(func: Callable) -> Callable:
    """The command works on a used data folder (no Redis needed)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        _data_folder_check()
        return func(*args, **kwargs)

    return wrapper


trawl = AppGroup(
    "trawl",
    help="Manage sources, scans and searches from the shell, beside `make run` (same .env and DATA_DIR).",
)


@click.command("create-admin")
@with_appcontext
@click.option("--username", prompt=True)
@click.option(
    "--password",
    default=None,
    help="Read from the prompt (or TRAWL_ADMIN_PASSWORD).",
    envvar="TRAWL_ADMIN_PASSWORD",
)
def create_admin(username: str, password: str | None) -> None:
    """Create an admin account (for headless installs)."""
    _initialised_check()
    from webapp.services import auth

    if password is None:
        password = getpass.getpass("Password: ")
    try:
        user = auth.create_user(username, password, is_admin=True)
    except TrawlError as exc:
        _fail(exc)
    click.echo(f"Created admin '{user.username}' (data folder {current_app.config['DATA_DIR']})")


@click.command("set-password")
@with_appcontext
@click.argument("username")
@click.option(
    "--password",
    default=None,
    help="Read from the prompt (or TRAWL_NEW_PASSWORD).",
    envvar="TRAWL_NEW_PASSWORD",
)
def set_password(username: str, password: str | None) -> None:
    """Give an account a new password; its tokens, sessions and download links end."""
    _initialised_check()
    from webapp.extensions import db
    from webapp.models import User
    from webapp.services import auth

    user = db.session.query(User).filter_by(username=username).first()
    if user is None:
        _fail(f"no user '{username}' (data folder {current_app.config['DATA_DIR']})")
    try:
        auth.change_password(user, password or getpass.getpass("New password: "))
    except TrawlError as exc:
        _fail(exc)
    click.echo(f"Password of '{username}' changed; its sessions and links have ended")


@trawl.command("init")
def init() -> None:
    """Make the data folder ready: its folders, the secret key, the newest database schema.

    Safe to repeat (each start of `make run` and of docker compose runs it): what exists is
    kept, the schema is migrated when the code brought a new migration."""
    from webapp.runtime import init_data

    for line in init_data(current_app):
        click.echo(line)
    click.echo(f"Trawl's data folder {current_app.config['DATA_DIR']} is ready")


@trawl.command("add-source")
@click.argument("name")
@click.argument("root_path")
@click.option("--id", "source_id", default=None)
@click.option("--schedule", default=None, help="cron expression or @hourly/@daily/@weekly")
@click.option("--scan-now", is_flag=True, help="Queue the first scan at once.")
@click.option("--watch/--no-watch", default=True, help="Index changes as they happen (default).")
@click.option(
    "--allow-overlap",
    is_flag=True,
    help="Accept a folder that is, lies inside or "
    "holds another source's (refused otherwise; search shows each file once).",
)
@needs_trawl
def add_source(
    name: str,
    root_path: str,
    source_id: str | None,
    schedule: str | None,
    scan_now: bool,
    watch: bool,
    allow_overlap: bool,
) -> None:
    """Add a source folder (prints it as JSON)."""
    from webapp.services import sources

    try:
        source = sources.create(
            {
                "name": name,
                "root_path": root_path,
                "id": source_id,
                "scan_schedule": schedule,
                "watch": watch,
                "allow_overlap": allow_overlap,
            },
            scan_now=scan_now,
        )
    except TrawlError as exc:
        outside = exc.detail.startswith("root_path: the path is outside the allowed roots")
        _fail(exc.detail + (_roots_note() if outside else ""))
    _print_json(sources.to_json(source))


@trawl.command("sources")
@JSON_OPTION
@needs_trawl
def list_sources(as_json: bool) -> None:
    """List the sources with their state and counts."""
    from webapp.services import sources

    rows = sources.list_json(None)  # the shell runs as the server's operator: all
    if as_json:
        _print_json(rows)
        return
    if not rows:
        click.echo("No sources yet (add one with `flask --app wsgi trawl add-source`).")
    for s in rows:
        click.echo(
            f"{s['id']:<24} {s['state']:<9} {s['document_count']:>8} docs  "
            f"{s['failed_count']:>5} failed  {s['root_path']}"
        )


@trawl.command("jobs")
@JSON_OPTION
@click.option("--limit", default=20, type=click.IntRange(1, 100), help="Scans to show.")
@needs_data
def jobs(as_json: bool, limit: int) -> None:
    """The latest scans that ended: outcome, duration and counts (the status page's Jobs)."""
    from webapp.services import status

    runs = status.recent_runs(None, limit)
    if as_json:
        _print_json(runs)
        return
    for r in runs:
        took = f"{r['duration_seconds']:.0f} s" if r["duration_seconds"] is not None else "-"
        click.echo(
            f"{r['finished_at']}  {r['source_id']:<20} {r['state']:<11} {took:>7}  "
            f"{r['total_scanned']} seen, {r['new_files']} new, {r['modified_files']} "
            f"changed, {r['deleted_files']} removed, {r['failed']} failed"
        )


def _no_worker() -> bool:
    from webapp.runtime import get_queue, worker_count

    return worker_count(get_queue()) == 0


def _follow(source_id: str, show_bar: bool) -> RunStats:
    """Poll the run's stats until it ends; a progress bar only on a terminal."""
    from tqdm import tqdm

    from webapp.indexing.runstats import RunStats
    from webapp.services import scans

    with tqdm(total=0, unit="file", desc=source_id, disable=not show_bar) as bar:
        while True:
            stats = scans.live_stats(source_id) or RunStats()
            bar.total, bar.n = stats.progress.total, stats.progress.done
            bar.set_postfix(state=stats.state, failed=stats.failed)
            bar.refresh()
            if stats.final:
                return stats
            time.sleep(0.5)


@trawl.command("scan")
@click.argument("source_id")
@click.option("--full", is_flag=True, help="Rebuild every file.")
@click.option("--no-wait", is_flag=True, help="Queue the scan and return at once.")
@JSON_OPTION
@needs_trawl
def scan(source_id: str, full: bool, no_wait: bool, as_json: bool) -> None:
    """Queue a scan and follow it to its end; exit status 1 when files failed, 2 when the scan
    did not finish."""
    from webapp.services import scans

    if not no_wait and _no_worker():
        _fail(
            "no worker is running, so the scan would never start. Start Trawl with "
            "`make run` (or `python worker.py`), or pass --no-wait to only queue it."
        )
    try:
        started = scans.request_scan(source_id, full=full)
    except TrawlError as exc:
        _fail(exc)
    if no_wait:
        if as_json:
            _print_json({"message": started["message"], "job_id": started["job_id"]})
        else:
            click.echo(started["message"])
        return
    if not as_json:
        click.echo(started["message"], err=True)
    stats = _follow(source_id, show_bar=sys.stderr.isatty() and not as_json)
    shown = {k: v for k, v in stats.to_dict().items() if k != "errors"}
    if as_json:
        _print_json(shown)
    else:
        click.echo(
            f"Scan {stats.state}: {stats.total_scanned} seen, {stats.new_files} new, "
            f"{stats.modified_files} changed, {stats.deleted_files} removed, "
            f"{stats.failed} failed" + (f" ({stats.message})" if stats.message else "")
        )
    if stats.state != "finished":
        sys.exit(2)
    if stats.failed:
        click.echo(
            f"Error: {stats.failed} file{'' if stats.failed == 1 else 's'} failed; "
            f"see /sources/{source_id}/failed or `flask --app wsgi trawl failed "
            f"{source_id}`",
            err=True,
        )
        sys.exit(1)


@trawl.command("failed")
@click.argument("source_id")
@click.option("--page", default=1, type=click.IntRange(1), help="Page of 50 files.")
@JSON_OPTION
@needs_data
def failed(source_id: str, page: int, as_json: bool) -> None:
    """The source's failed files, grouped by error message."""
    from webapp.services import status

    try:
        info = status.failed_files(source_id, page, None)
    except TrawlError as exc:
        _fail(exc)
    if as_json:
        _print_json(info)
        return
    click.echo(f"{info['total']} failed files (page {info['page']} of {info['pages']})")
    for group in info["groups"]:
        click.echo(f"\n{group['message'] or '(no message)'}  [{group['count']}]")
        for path in group["paths"]:
            click.echo(f"  {path}")


@trawl.command("search")
@click.argument("query")
@click.option("--limit", default="10", help="Results to show (1-100).")
@click.option("--offset", default="0", help="Results to skip.")
@click.option("--source", "source_id", default=None, help="Only this source (id).")
@click.option("--type", "doc_type", default=None, help="Only this document type.")
@click.option("--sort", default="relevance", help="relevance, modified_at:desc, ...")
@click.option(
    "--facet",
    "facets",
    multiple=True,
    help="Count matches per type, extension, source_id or year (repeatable).",
)
@JSON_OPTION
@needs_data
def search(
    query: str,
    limit: str,
    offset: str,
    source_id: str | None,
    doc_type: str | None,
    sort: str,
    facets: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search from the shell, with the query language and checks of the API."""
    from webapp.services import documents, search_args

    raw = {
        "q": query,
        "limit": limit,
        "offset": offset,
        "source_id": source_id,
        "type": doc_type,
        "sort": sort,
        "snippet_length": 160,
        "facets": list(facets),
    }
    try:
        page = documents.search(search_args.load(raw), None)
    except TrawlError as exc:
        _fail(exc)
    if as_json:
        _print_json(page)
        return
    click.echo(f"{page['total']} results in {page['processing_time_ms']} ms")
    # rank, not score: a hybrid page mixes keyword scores with meaning's similarities (--json has both)
    for rank, r in enumerate(page["results"], start=page["offset"] + 1):
        click.echo(f"{rank:>4}. {r['path']}" + ("  (by meaning)" if r.get("match") == "meaning" else ""))
    for facet, counts in (page.get("facet_distribution") or {}).items():
        click.echo(f"{facet}: " + ", ".join(f"{value} {n}" for value, n in counts.items()))


@trawl.command("create-token")
@click.argument("username")
@click.option("--name", required=True, help="What the token is for (shown in its list).")
@click.option(
    "--scope",
    default="read",
    show_default=True,
    help="read: GET endpoints and search; full: everything the user may do.",
)
@click.option("--expires-days", type=int, default=None, help="Days until it stops working (default: never).")
def create_token(username: str, name: str, scope: str, expires_days: int | None) -> None:
    """Create an API token for USERNAME and print it (shown only this once)."""
    from webapp.extensions import db
    from webapp.models import User
    from webapp.services import tokens

    user = db.session.query(User).filter_by(username=username).first()
    if user is None:
        click.echo(f"Error: no user '{username}'", err=True)
        sys.exit(1)
    try:
        made = tokens.create(user, name, scope, expires_days)
    except TrawlError as exc:
        _fail(exc)
    click.echo(
        f"API token '{made['name']}' ({made['scope']}) of '{username}', expires "
        f"{made['expires_at'] or 'never'}; it is shown only now:",
        err=True,
    )
    click.echo(made["token"])


@trawl.command("verify")
@click.argument("source_id")
@click.option(
    "--repair/--no-repair", default=False, help="Fix what disagrees (without it the command only reports)."
)
@needs_trawl
def verify(source_id: str, repair: bool) -> None:
    """Compare records, index and disk for a source and report (JSON); exit status 2 when they
    disagree and nothing was repaired."""
    from webapp.indexing.verify import verify_source

    try:
        report = verify_source(source_id, repair=repair)
    except TrawlError as exc:
        _fail(exc)
    _print_json(report)
    if report["problems"] and not report.get("repaired"):
        sys.exit(2)


def register(app: Flask) -> None:
    """Attach the commands to the app's CLI."""
    app.cli.add_command(create_admin)
    app.cli.add_command(set_password)
    app.cli.add_command(trawl)


def main() -> None:
    """`python -m webapp.cli ...`: the trawl commands, loading the command-line app
    (webapp.create_cli_app: no API, UI or Alembic) only for the command that runs: `--help` and
    a mistyped option answer without it."""
    metrics_dir.prepare()  # an entry point: before the app imports prometheus_client
    trawl.main(prog_name="python -m webapp.cli", obj=ScriptInfo(app_import_path="webapp:create_cli_app"))


if __name__ == "__main__":
    main()
