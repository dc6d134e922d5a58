"""Sources from the shell: add one (scanned at once, as the web form does) and list them."""

from __future__ import annotations

import click
from flask.cli import with_appcontext

from webapp.cli.common import JSON_OPTION, fail, needs_trawl, print_json, roots_note
from webapp.exceptions import TrawlError
from webapp.services import sources

OUTSIDE_ROOTS = "root_path: the path is outside the allowed roots"


@click.command("add-source")
@with_appcontext
@click.argument("name")
@click.argument("root_path")
@click.option("--id", "source_id", default=None)
@click.option("--schedule", default=None, help="cron expression or @hourly/@daily/@weekly")
@click.option(
    "--scan/--no-scan", default=True, help="Scan the folder at once (default), as the web form does."
)
@click.option("--scan-now", is_flag=True, hidden=True)  # the default now; kept for old scripts
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
    scan: bool,
    scan_now: bool,
    watch: bool,
    allow_overlap: bool,
) -> None:
    """Add a source folder and scan it (prints it as JSON)."""
    data = {
        "name": name,
        "root_path": root_path,
        "id": source_id,
        "scan_schedule": schedule,
        "watch": watch,
        "allow_overlap": allow_overlap,
    }
    try:
        source = sources.create(data, scan_now=scan or scan_now)
    except TrawlError as exc:
        fail(exc.detail + (roots_note() if exc.detail.startswith(OUTSIDE_ROOTS) else ""))
    print_json(sources.to_json(source))


@click.command("sources")
@with_appcontext
@JSON_OPTION
@needs_trawl
def list_sources(as_json: bool) -> None:
    """List the sources with their state and counts."""
    rows = sources.list_json(None)  # the shell runs as the server's operator: all
    if as_json:
        print_json(rows)
        return
    if not rows:
        click.echo("No sources yet (add one with `trawl add-source NAME FOLDER`).")
    for s in rows:
        click.echo(
            f"{s['id']:<24} {s['state']:<9} {s['document_count']:>8} docs  "
            f"{s['failed_count']:>5} failed  {s['root_path']}"
        )
