"""Looking after a data folder: prepare it (`init`) and check a source against its files
(`verify`)."""

from __future__ import annotations

import sys

import click
from flask import current_app
from flask.cli import with_appcontext

from webapp.cli.common import fail, needs_trawl, print_json
from webapp.embed_jobs import enqueue_embed
from webapp.exceptions import TrawlError
from webapp.indexing.verify import verify_source
from webapp.runtime import init_data


@click.command("init")
@with_appcontext
def init() -> None:
    """Make the data folder ready: its folders, the secret key, the newest database schema.

    Safe to repeat (each start of `make run` and of docker compose runs it): what exists is
    kept, the schema is migrated when the code brought a new migration."""
    for line in init_data(current_app):
        click.echo(line)
    click.echo(f"Trawl's data folder {current_app.config['DATA_DIR']} is ready")


@click.command("verify")
@with_appcontext
@click.argument("source_id")
@click.option(
    "--repair/--no-repair", default=False, help="Fix what disagrees (without it the command only reports)."
)
@needs_trawl
def verify(source_id: str, repair: bool) -> None:
    """Compare records, index and disk for a source and report (JSON); exit status 2 when they
    disagree and nothing was repaired."""
    try:
        report = verify_source(source_id, repair=repair)
    except TrawlError as exc:
        fail(exc)
    if report.get("repaired") and report.get("vectors"):
        enqueue_embed(source_id)  # the vectors were dropped: the source is read again
    print_json(report)
    if report["problems"] and not report.get("repaired"):
        sys.exit(2)
