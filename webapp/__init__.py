"""Trawl: index the files under server folders and search them by full text.

`import webapp` defines nothing but where its two app factories live, so a command of the
`trawl` group imports only what it uses: `create_app` (webapp/factory.py, the whole app) and
`create_cli_app` (webapp/cli/app.py, the command line's) are imported on first use."""

from __future__ import annotations

import importlib
from typing import Any

FACTORIES = {"create_app": "webapp.factory", "create_cli_app": "webapp.cli.app"}


def __getattr__(name: str) -> Any:
    """`from webapp import create_app` (PEP 562): the factory's module, imported when asked for."""
    if name in FACTORIES:
        return getattr(importlib.import_module(FACTORIES[name]), name)
    raise AttributeError(f"module 'webapp' has no attribute {name!r}")
