"""Accounts from the shell: the first admin of a headless install, a forgotten password."""

from __future__ import annotations

import getpass

import click
from flask import current_app
from flask.cli import with_appcontext

from webapp.cli.common import fail, initialised_check
from webapp.exceptions import TrawlError
from webapp.extensions import db
from webapp.models import User
from webapp.services import auth


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
    initialised_check()
    if password is None:
        password = getpass.getpass("Password: ")
    try:
        user = auth.create_user(username, password, is_admin=True)
    except TrawlError as exc:
        fail(exc)
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
    initialised_check()
    user = db.session.query(User).filter_by(username=username).first()
    if user is None:
        fail(f"no user '{username}' (data folder {current_app.config['DATA_DIR']})")
    try:
        auth.change_password(user, password or getpass.getpass("New password: "))
    except TrawlError as exc:
        fail(exc)
    click.echo(f"Password of '{username}' changed; its sessions and links have ended")
