"""The `trawl` command (and its alias `flask --app wsgi trawl`): a lazy group of commands over
the same services as the API.

Each command lives in a module of this package by what it works on (sources, scans, users,
tokens, search, doctor) and imports what it needs at its top; the group imports a command's
module only when that command runs or shows its own help (click's lazy-group pattern). The
list of commands with their one-line help is written here, so `trawl --help` and a mistyped
command answer with click, Flask and the settings alone (docs/performance.md, "The CLI").
The commands read the settings `make run` reads (webapp/config.py) and so reach its data folder
and the Redis it started.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, NoReturn

import click
from flask import Flask
from flask.cli import ScriptInfo

from webapp import metrics_dir
from webapp.cli import early


class Lazy(NamedTuple):
    """Where a command is defined, its one-line help for the group's list, and what to start
    with the command's arguments before its module loads (webapp/cli/early.py)."""

    module: str
    name: str
    help: str
    early: Callable[[list[str]], Any] | None = None


# name -> where it lives; tests/test_cli.py checks each help against the command's own
COMMANDS: dict[str, Lazy] = {
    "init": Lazy(
        "doctor",
        "init",
        "Make the data folder ready: its folders, the secret key, the newest database schema.",
    ),
    "add-source": Lazy("sources", "add_source", "Add a source folder and scan it (prints it as JSON)."),
    "sources": Lazy("sources", "list_sources", "List the sources with their state and counts."),
    "scan": Lazy(
        "scans",
        "scan",
        "Queue a scan and follow it to its end; exit status 1 when files failed, 2 when the scan "
        "did not finish.",
    ),
    "jobs": Lazy(
        "scans", "jobs", "The latest scans that ended: outcome, duration and counts (the status page's Jobs)."
    ),
    "failed": Lazy("scans", "failed", "The source's failed files, grouped by error message."),
    "search": Lazy(
        "search",
        "search",
        "Search from the shell: rank, title, type, where and a snippet of each result.",
        early.search,
    ),
    "verify": Lazy(
        "doctor",
        "verify",
        "Compare records, index and disk for a source and report (JSON); exit status 2 when they "
        "disagree and nothing was repaired.",
    ),
    "create-admin": Lazy("users", "create_admin", "Create an admin account (for headless installs)."),
    "set-password": Lazy(
        "users",
        "set_password",
        "Give an account a new password; its tokens, sessions and download links end.",
    ),
    "create-token": Lazy(
        "tokens", "create_token", "Create an API token for USERNAME and print it (shown only this once)."
    ),
}


class LazyGroup(click.Group):
    """A group that imports a command's module when the command is looked up, and lists the
    commands from `COMMANDS` without importing any."""

    def __init__(self, *args, lazy: dict[str, Lazy], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.lazy])

    def get_command(self, ctx: click.Context | None, cmd_name: str) -> click.Command | None:
        where = self.lazy.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)  # type: ignore[arg-type]
        command = getattr(importlib.import_module(f"{__name__}.{where.module}"), where.name)
        if not isinstance(command, click.Command):
            raise TypeError(f"{where.module}.{where.name} is not a click command")
        return command

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """The command named first in `args`; what it starts early is started before its
        module is imported."""
        where = self.lazy.get(args[0]) if args else None
        if where is not None and where.early is not None:
            where.early(args[1:])
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The list of commands with the help written in `COMMANDS` (importing none of them)."""
        rows = [(name, self.lazy[name].help) for name in sorted(self.lazy)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


trawl = LazyGroup(
    "trawl",
    lazy=COMMANDS,
    help="Manage sources, scans and searches from the shell, beside `make run` (same .env and DATA_DIR).",
)


def register(app: Flask) -> None:
    """`flask --app wsgi trawl ...`, and the account commands also as `flask create-admin` and
    `flask set-password` (their first spelling)."""
    app.cli.add_command(trawl)
    for name in ("create-admin", "set-password"):
        app.cli.add_command(trawl.get_command(None, name))


def main() -> NoReturn:
    """The `trawl` console script (and `python -m webapp.cli`): the commands in the
    command-line app (webapp.create_cli_app: no API, UI or Alembic), loaded only for the
    command that runs."""
    metrics_dir.prepare()  # an entry point: before the app imports prometheus_client
    try:
        trawl.main(prog_name="trawl", obj=ScriptInfo(app_import_path="webapp.cli.app:create_cli_app"))
    except SystemExit as exc:
        leave(exc.code)
    leave(0)


def leave(code: int | str | None) -> NoReturn:
    """End the command as `sys.exit(code)` would, without the interpreter's teardown: freeing
    the search engine, the model and some hundred modules took a third of a search's CPU time
    (docs/performance.md, "The CLI"). Everything the command wrote is flushed first; its
    database work is committed by then, and nothing it opened needs closing to stay whole."""
    if isinstance(code, str):
        print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`trawl search x | head`)
            code = code or 1
    os._exit(code or 0)
