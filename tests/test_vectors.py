"""Vector storage (search/vectors.py): a write adds a segment and leaves the rest untouched,
merges keep what search and deletions say, a store of one file is adopted, a kill -9 in the
middle of a write leaves the old vectors whole, and a write that finds the disk full leaves
nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from webapp.search import segments as segment_files
from webapp.search import vectors
from webapp.search.embedder import DIMENSIONS
from webapp.search.segments import NoSpace
from webapp.search.vectors import VectorStore

ROOT = Path(__file__).resolve().parent.parent


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    matrix = rng.standard_normal((n, DIMENSIONS)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def _id(n: int) -> str:
    return f"s--{n:012x}"


def _files(folder: Path) -> dict[str, tuple[int, int, int]]:
    return {p.name: (p.stat().st_ino, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def test_a_write_adds_a_segment_and_leaves_the_others_untouched(tmp_path):
    store, rng = VectorStore(tmp_path), np.random.default_rng(1)
    for batch in range(3):
        store.add("s", {_id(batch * 8 + i): _unit(rng, 2) for i in range(8)})
    before = _files(tmp_path / "s")
    store.add("s", {_id(100): _unit(rng, 2)})
    after = _files(tmp_path / "s")
    assert {name: after[name] for name in before} == before  # not read, not rewritten
    (new,) = set(after) - set(before)
    assert after[new][1] < sum(size for _, size, _ in before.values()) / 2
    assert store.passages("s") == 3 * 8 * 2 + 2


def test_deletes_replacements_and_merges_keep_what_search_says(tmp_path, monkeypatch):
    monkeypatch.setattr(segment_files, "SIZE_CLASS_BASE", 1 << 30)  # every segment of one class
    store, rng = VectorStore(tmp_path), np.random.default_rng(2)
    model: dict[str, np.ndarray] = {}
    for _ in range(10):
        added = {_id(rng.integers(0, 30)): _unit(rng, int(rng.integers(1, 3))) for _ in range(4)}
        store.add("s", added)
        model.update(added)
        gone = [_id(rng.integers(0, 30)) for _ in range(2)]
        store.delete_ids(gone)
        for doc in gone:
            model.pop(doc, None)

    def same() -> None:
        assert store.passages("s") == sum(len(m) for m in model.values())
        for n in range(30):
            got = store.vectors_of(_id(n))
            assert (got is None) == (_id(n) not in model)
            if got is not None:
                assert np.allclose(got, model[_id(n)], atol=2e-3)
        for doc, matrix in model.items():  # each document is its own nearest
            assert store.nearest(matrix[0], ["s"], 1)[0][0] == doc

    same()
    segments = len(list((tmp_path / "s").glob("seg-*")))
    assert store.merge("s") >= vectors.MERGE_FANOUT
    assert len(list((tmp_path / "s").glob("seg-*"))) < segments
    assert not list((tmp_path / "s").glob("del-*"))  # merged into the oldest: nothing to hide
    same()
    maps = Path("/proc/self/maps").read_text()  # the files merged away are no longer mapped
    assert not [line for line in maps.splitlines() if str(tmp_path) in line and "(deleted)" in line]


def test_a_large_segment_mostly_superseded_is_rewritten_alone(tmp_path, monkeypatch):
    store, rng = VectorStore(tmp_path), np.random.default_rng(5)
    first = {_id(n): _unit(rng, 2) for n in range(200)}
    store.add("s", first)  # one large segment (as after many merges)
    (large,) = (tmp_path / "s").glob("seg-*")
    monkeypatch.setattr(segment_files, "MERGE_MAX_BYTES", large.stat().st_size * 2)
    monkeypatch.setattr(vectors, "COMPACT_EVERY", 1)
    again = {_id(n): _unit(rng, 1) for n in range(150)}  # embedded again (a full rebuild)
    store.add("s", again)
    store.merge("s")
    assert not large.exists()  # rewritten with the 50 documents still its own
    assert store.passages("s") == 150 + 50 * 2
    assert np.allclose(store.vectors_of(_id(10)), again[_id(10)], atol=2e-3)
    assert np.allclose(store.vectors_of(_id(180)), first[_id(180)], atol=2e-3)
    assert store.nearest(first[_id(190)][1], ["s"], 1)[0][0] == _id(190)


def test_a_store_of_one_file_is_read_and_adopted(tmp_path):
    from usearch.index import Index

    rng = np.random.default_rng(3)
    old = Index(ndim=DIMENSIONS, metric="cos", dtype="f16", multi=True)
    first = _unit(rng, 2)
    old.add(np.array([1, 1], dtype=np.uint64), first)
    old.save(str(tmp_path / "s.usearch"))  # as stored before segments
    store = VectorStore(tmp_path)
    assert store.nearest(first[0], ["s"], 1)[0][0] == _id(1)
    second = _unit(rng, 1)
    store.add("s", {_id(2): second})
    assert not (tmp_path / "s.usearch").exists()
    assert store.nearest(first[1], ["s"], 1)[0][0] == _id(1)
    assert store.nearest(second[0], ["s"], 1)[0][0] == _id(2)
    assert store.problem("s") is None and store.check("s") is None


WRITER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from webapp.search.vectors import VectorStore
    store, rng = VectorStore(sys.argv[1]), np.random.default_rng(int(sys.argv[2]))
    start = int(sys.argv[2]) * 100000
    for batch in range(1000):
        docs = {f"s--{start + batch * 10 + i:012x}": rng.random((50, 384)) for i in range(10)}
        store.add("s", docs)
        store.merge("s")
        print(start + batch * 10, flush=True)
    """
)


def _kill_mid_write(root: Path, seed: int) -> list[int]:
    """Run a writer and kill -9 it while a temporary file of a write exists; the batches it
    said were written."""
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(seed)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    deadline = time.monotonic() + 60
    folder = root / "s"
    try:
        while time.monotonic() < deadline:
            if folder.is_dir() and any(n.endswith(".tmp") for n in os.listdir(folder)):
                child.send_signal(signal.SIGKILL)
                break
            time.sleep(0.0005)
        else:
            pytest.fail("no write seen within a minute")
    finally:
        child.kill()
        out = child.communicate()[0]
    return [int(line) for line in out.split()]


def test_a_kill_mid_write_leaves_the_old_vectors_whole(tmp_path):
    for seed in (1, 2, 3):
        written = set(_kill_mid_write(tmp_path, seed))
        assert any(p.name.endswith(".tmp") for p in (tmp_path / "s").iterdir()), "not killed mid-write"
        store = VectorStore(tmp_path)
        assert store.sweep() >= 1
        assert not [p for p in (tmp_path / "s").iterdir() if p.name.startswith(".")]
        assert store.problem("s") is None and store.check("s") is None
        for first in range(seed * 100000, seed * 100000 + (max(written, default=0) % 100000) + 20, 10):
            there = sum(store.vectors_of(_id(first + i)) is not None for i in range(10))
            assert there == (10 if first in written else there)  # every finished batch, whole
            assert there in (0, 10)  # the one killed: all or nothing


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs (skipped where mounting is refused), unmounted after the test."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Fill the disk holding `folder` with one file; returns it."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_fails_a_write_whole_and_leaves_no_temporary_file(small_disk):
    store, rng = VectorStore(small_disk / "vectors"), np.random.default_rng(4)
    store.add("s", {_id(1): _unit(rng, 2)})
    filler = _fill(small_disk)
    with pytest.raises(NoSpace):
        store.add("s", {_id(n): _unit(rng, 8) for n in range(2, 40)})
    with pytest.raises(NoSpace):
        store.delete_ids([_id(n) for n in range(1000)])
    assert not [p for p in (small_disk / "vectors" / "s").iterdir() if p.name.startswith(".")]
    assert store.vectors_of(_id(1)) is not None and store.vectors_of(_id(2)) is None
    filler.unlink()
    store.add("s", {_id(2): _unit(rng, 1)})
    assert store.vectors_of(_id(2)) is not None
