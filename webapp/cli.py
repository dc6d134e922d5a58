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
from webapp.extensions import db
from webapp.indexing.runstats import RunStats
from webapp.indexing.verify import verify_source
from webapp.models import User
from webapp.services import auth, documents, scans, search_args, sources

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


@click.command("set-password")
@with_appcontext
@click.argument("username")
@click.option("--password", default=None, help="Read from the prompt (or TRAWL_NEW_PASSWORD).",
              envvar="TRAWL_NEW_PASSWORD")
def set_password(username: str, password: str | None) -> None:
    """Give an account a new password; its tokens, sessions and download links end."""
    user = db.session.query(User).filter_by(username=username).first()
    if user is None:
        click.echo(f"Error: no user '{username}'", err=True)
        sys.exit(1)
    try:
        auth.change_password(user, password or getpass.getpass("New password: "))
    except TrawlError as exc:
        _fail(exc)
    click.echo(f"Password of '{username}' changed; its sessions and links have ended")


@trawl.command("add-source")
@click.argument("name")
@click.argument("root_path")
@click.option("--id", "source_id", default=None)
@click.option("--schedule", default=None, help="cron expression or @hourly/@daily/@weekly")
@click.option("--watch/--no-watch", default=True, help="Index changes as they happen (default).")
def add_source(name: str, root_path: str, source_id: str | None, schedule: str | None,
               watch: bool) -> None:
    """Add a source folder."""
    try:
        source = sources.create({"name": name, "root_path": root_path, "id": source_id,
                                 "scan_schedule": schedule, "watch": watch})
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
            stats = scans.live_stats(source_id) or RunStats()
            bar.total, bar.n = stats.progress.total, stats.progress.done
            bar.set_postfix(state=stats.state, failed=stats.failed)
            bar.refresh()
            if stats.final:
                break
            time.sleep(0.5)
    shown = {k: v for k, v in stats.to_dict().items() if k != "errors"}
    click.echo(json.dumps(shown, indent=2))


@trawl.command("search")
@click.argument("query")
@click.option("--limit", default="10", help="Results to show (1-100).")
@click.option("--offset", default="0", help="Results to skip.")
@click.option("--source", "source_id", default=None, help="Only this source (id).")
@click.option("--type", "doc_type", default=None, help="Only this document type.")
@click.option("--sort", default="relevance", help="relevance, modified_at:desc, ...")
@click.option("--facet", "facets", multiple=True, help="Count matches per type, extension, "
              "source_id or year (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the API's JSON answer.")
def search(query: str, limit: str, offset: str, source_id: str | None, doc_type: str | None,
           sort: str, facets: tuple[str, ...], as_json: bool) -> None:
    """Search from the shell, with the query language and checks of the API."""
    raw = {"q": query, "limit": limit, "offset": offset, "source_id": source_id,
           "type": doc_type, "sort": sort, "snippet_length": 160, "facets": list(facets)}
    try:
        page = documents.search(search_args.load(raw))
    except TrawlError as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps(page, indent=2, ensure_ascii=False))
        return
    click.echo(f"{page['total']} results in {page['processing_time_ms']} ms")
    for r in page["results"]:
        click.echo(f"{r['score']:7.2f}  {r['path']}")
    for facet, counts in (page.get("facet_distribution") or {}).items():
        click.echo(f"{facet}: " + ", ".join(f"{value} {n}" for value, n in counts.items()))


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
    app.cli.add_command(set_password)
    app.cli.add_command(trawl)
