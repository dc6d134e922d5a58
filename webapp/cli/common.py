"""What the commands share: refusing with one line, JSON output, and the checks that the data
folder is used and prepared and its Redis answers (before a command acts on nothing)."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
import redis
from flask import current_app

from webapp import config
from webapp.exceptions import TrawlError
from webapp.extensions import db
from webapp.models import Source, User
from webapp.runtime import get_redis, not_initialised

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts).")


def fail(exc: TrawlError | str, code: int = 1) -> NoReturn:
    """Print `Error: <why>` on stderr and end the command with `code`."""
    click.echo(f"Error: {exc.detail if isinstance(exc, TrawlError) else exc}", err=True)
    sys.exit(code)


def print_json(data: Any) -> None:
    """Print data as indented JSON (for scripts)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def data_folder_check() -> None:
    """Say which data folder is used (on a terminal); refuse an unused default `./data`, and a
    data folder `trawl init` has not prepared.

    Without DATA_DIR the commands use `./data` of the working folder, as `make run` does; run
    from elsewhere that folder is new and empty, and a command would act on nothing."""
    folder = current_app.config["DATA_DIR"]
    if sys.stderr.isatty():
        click.echo(f"Data folder: {folder}", err=True)
    problem = not_initialised(current_app)
    default = Path(config.Settings.DATA_DIR).expanduser().resolve()
    if Path(folder) == default and not config.env_value("DATA_DIR") and (problem or _holds_nothing()):
        fail(
            f"the data folder {folder} holds no Trawl data (no account, no source). Set "
            "DATA_DIR (in .env or the environment) to the folder `make run` uses, or run "
            "this command in the folder you start `make run` from."
        )
    if problem:
        fail(problem)


def _holds_nothing() -> bool:
    return db.session.query(User.id).first() is None and db.session.query(Source.id).first() is None


def initialised_check() -> None:
    """Refuse, saying to run `trawl init`, a data folder or database it has not prepared."""
    problem = not_initialised(current_app)
    if problem:
        fail(problem)


def redis_check() -> None:
    """Refuse at once when Trawl's Redis does not answer (instead of queueing into nothing)."""
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
        fail(
            f"Trawl's Redis does not answer at {url} ({exc}). {hint} "
            f"(data folder: {current_app.config['DATA_DIR']})"
        )


def roots_note() -> str:
    """Which allowed roots this command used, and where they came from (for its refusals)."""
    return (
        f" (allowed roots: {', '.join(current_app.config['ALLOWED_ROOTS'])}; "
        f"{config.origin('ALLOWED_ROOTS', current_app.config['DATA_DIR'])})"
    )


def needs_trawl(func: Callable) -> Callable:
    """The command works on a used data folder and reaches its Redis, or refuses at once."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        data_folder_check()
        redis_check()
        return func(*args, **kwargs)

    return wrapper


def needs_data(func: Callable) -> Callable:
    """The command works on a used data folder (no Redis needed)."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        data_folder_check()
        return func(*args, **kwargs)

    return wrapper
