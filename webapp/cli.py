"""Flask commands over the same services as the API: create-admin, and `flask trawl ...`."""

from __future__ import annotations

import getpass
import json
import sys
import time

import click
from flask import Flask
from flask.cli import AppGroup, with_appcontext

from webapp.exceptions import TrawlError
from webapp.indexing.verify import verify_source
from webapp.services import auth, documents, scans, sources

trawl = AppGroup("trawl", help="Manage sources, scans and searches from the shell.")


def _fail(exc: TrawlError) -> None:
    click.echo(f"Error: {exc.detail}", err=True)
    sys.exit(1)


@click.command("create-admin")
@with_appcontext
@click.option("--username", prompt=True)
@click.option("--password", default=None, help="Read from the prompt (or TRAWL_ADMIN_PASSWORD).",
              envvar="TRAWL_ADMIN_PASSWORD")
def create_admin(username: str, password: str | None) -> None:
    """Create an admin account (for headless installs)."""
    if password is None:
        password = getpass.getpass("Password: ")
    try:
        user = auth.create_user(username, password, is_admin=True)
    except TrawlError as exc:
        _fail(exc)
    click.echo(f"Created admin '{user.username}'")


@trawl.command("add-source")
@click.argument("name")
@click.argument("root_path")
@click.option("--id", "source_id", default=None)
@click.option("--schedule", default=None, help="cron expression or @hourly/@daily/@weekly")
def add_source(name: str, root_path: str, source_id: str | None, schedule: str | None) -> None:
    """Add a source folder."""
    try:
        source = sources.create({"name": name, "root_path": root_path, "id": source_id,
                                 "scan_schedule": schedule})
    except TrawlError as exc:
        _fail(exc)
    click.echo(json.dumps(sources.to_json(source), indent=2))


@trawl.command("sources")
def list_sources() -> None:
    """List the sources with their state and counts."""
    for s in sources.list_json():
        click.echo(f"{s['id']:<24} {s['state']:<9} {s['document_count']:>8} docs  "
                   f"{s['failed_count']:>5} failed  {s['root_path']}")


@trawl.command("scan")
@click.argument("source_id")
@click.option("--full", is_flag=True, help="Rebuild every file.")
def scan(source_id: str, full: bool) -> None:
    """Queue a scan and show its progress until it ends (needs a running worker)."""
    from tqdm import tqdm

    try:
        started = scans.request_scan(source_id, full=full)
    except TrawlError as exc:
        _fail(exc)
    click.echo(started["message"])
    with tqdm(total=0, unit="file", desc=source_id) as bar:
        while True:
            stats = scans.live_stats(source_id) or {}
            progress = stats.get("progress") or {}
            bar.total = progress.get("total", 0)
            bar.n = progress.get("done", 0)
            bar.set_postfix(state=stats.get("state"), failed=stats.get("failed", 0))
            bar.refresh()
            if stats.get("state") in scans.FINAL_STATES:
                break
            time.sleep(0.5)
    click.echo(json.dumps({k: v for k, v in stats.items() if k != "errors"}, indent=2))


@trawl.command("search")
@click.argument("query")
@click.option("--limit", default=10)
def search(query: str, limit: int) -> None:
    """Search from the shell."""
    page = documents.search({"q": query, "limit": limit, "offset": 0, "sort": "relevance",
                             "snippet_length": 160})
    click.echo(f"{page['total']} results in {page['processing_time_ms']} ms")
    for r in page["results"]:
        click.echo(f"{r['score']:7.2f}  {r['path']}")


@trawl.command("verify")
@click.argument("source_id")
@click.option("--repair/--no-repair", default=True, help="Fix what disagrees (default).")
def verify(source_id: str, repair: bool) -> None:
    """Compare records, index and disk for a source; report and repair any disagreement."""
    try:
        report = verify_source(source_id, repair=repair)
    except TrawlError as exc:
        _fail(exc)
    click.echo(json.dumps(report, indent=2))
    if report["problems"] and not repair:
        sys.exit(2)


def register(app: Flask) -> None:
    """Attach the commands to the app's CLI."""
    app.cli.add_command(create_admin)
    app.cli.add_command(trawl)
