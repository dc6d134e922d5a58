"""The folder this process writes its metrics to, prepared by each entry point first thing.

prometheus_client chooses its multiprocess mode when it is imported, from the variable
PROMETHEUS_MULTIPROC_DIR, and `webapp.metrics` chooses ours the same way (metrics.py): so the
entry points (launcher, worker.py, wsgi.py and with it the CLI, `python -m webapp.cli`,
gunicorn's master, the tests' conftest, the benchmarks that read metrics) call `prepare` before
anything imports the library. Importing `webapp` sets and creates nothing. One folder per host
(METRICS_DIR/<host name>): process ids name the files, and containers sharing a data volume
reuse the same small ids. A process that never calls it keeps its series in memory.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from webapp import config

VARIABLE = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's; children inherit it


def folder(settings: Mapping[str, Any] | None = None) -> Path:
    """METRICS_DIR/<host name> of loaded settings, or of the environment when none are given."""
    root = settings["METRICS_DIR"] if settings is not None else config.metrics_root()
    return Path(root) / socket.gethostname()


def prepare(settings: Mapping[str, Any] | None = None) -> Path:
    """Make this host's metrics folder and name it in the environment (for prometheus_client
    and every child started from here); returns it. Idempotent."""
    path = folder(settings)
    path.mkdir(parents=True, exist_ok=True)
    os.environ[VARIABLE] = str(path)
    return path
