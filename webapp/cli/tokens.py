"""API tokens from the shell (for scripts and backups)."""

from __future__ import annotations

import click
from flask.cli import with_appcontext

from webapp.cli.common import fail, initialised_check
from webapp.exceptions import TrawlError
from webapp.extensions import db
from webapp.models import User
from webapp.services import tokens


@click.command("create-token")
@with_appcontext
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
    initialised_check()
    user = db.session.query(User).filter_by(username=username).first()
    if user is None:
        fail(f"no user '{username}'")
    try:
        made = tokens.create(user, name, scope, expires_days)
    except TrawlError as exc:
        fail(exc)
    click.echo(
        f"API token '{made['name']}' ({made['scope']}) of '{username}', expires "
        f"{made['expires_at'] or 'never'}; it is shown only now:",
        err=True,
    )
    click.echo(made["token"])
