"""Code that must end: run in a child process under a time bound."""

from __future__ import annotations

import subprocess
import sys

import pytest

BOUND_SECONDS = 30  # far above what linear work takes here, far below what backtracking needs


def child_output(code: str, *args: str, stdin: str | None = None, what: str = "it") -> str:
    """The standard output of `python -c code args` fed `stdin`; the test fails when it does
    not end within BOUND_SECONDS. In a child because a regular expression stuck backtracking
    holds the interpreter until it is killed: no bound in the test's own process could stop it."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", code, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=BOUND_SECONDS,
            check=True,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} did not end")
    return done.stdout
