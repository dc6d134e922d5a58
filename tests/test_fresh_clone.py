"""The project alone, as a newcomer clones it: no ../shared beside it. The test modules that
name the corpus must collect (only they could reach it at import time: the main run collects
every other one), their tests that read the real corpus must skip with one message, and the
ones that only need some files must still pass on files they make themselves."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CORPUS_NAMES, CORPUS_SKIP, REPO

# The copy runs its own SQLite pass; once per `make test` is enough.
pytestmark = pytest.mark.skipif(
    os.environ.get("TRAWL_TEST_DATABASE") == "postgres",
    reason="the bare-clone run happens once, in the SQLite pass",
)


def _project_files() -> list[str]:
    """The files a clone of this checkout holds (tracked, plus new files not ignored)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout: no clone to make")
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout
    return [name for name in out.decode().split("\0") if name and (REPO / name).is_file()]


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> Path:
    """A copy of the project in an empty folder: nothing named `shared` beside it."""
    top = tmp_path_factory.mktemp("alone") / "trawl"
    for name in _project_files():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, top / name)
    assert not (top.parent / "shared").exists()
    return top


def _pytest(where: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CI", "TRAWL_CORPUS", "TRAWL_TEST_DATABASE", "PYTEST_ADDOPTS")
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=where,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_corpus_tests_skip_and_the_rest_pass_without_the_corpus(alone):
    modules = sorted(
        str(p.relative_to(alone))
        for p in (alone / "tests").glob("test_*.py")
        if p.name != Path(__file__).name and CORPUS_NAMES.search(p.read_text())
    )
    assert "tests/test_readonly.py" in modules and "tests/test_query.py" in modules
    # only their tests that touch the corpus: the others behave the same with it or without
    run = _pytest(alone, "-q", "-m", "not browser", *modules, TRAWL_TEST_CORPUS_ONLY="1")
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]
    assert "real-corpus tests: SKIPPED" in output and CORPUS_SKIP in output
    assert re.search(r"\d+ passed", output)


def test_ci_refuses_to_run_without_the_corpus(alone):
    run = _pytest(alone, "--collect-only", "-q", "tests/test_query.py", CI="true")
    assert run.returncode != 0
    assert "CI=true but the shared corpus is missing" in run.stdout + run.stderr
