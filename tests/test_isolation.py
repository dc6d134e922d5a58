"""The extraction child: reuse, timeouts that kill, crashes, memory cap and size limits."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from webapp.indexing.extractors import Extracted, ExtractionSettings, ExtractorSpec
from webapp.indexing.isolation import Extractor


def _loop_forever(path: str, settings: ExtractionSettings) -> Extracted:
    while True:
        pass


def _segfault(path: str, settings: ExtractionSettings) -> Extracted:
    os.kill(os.getpid(), signal.SIGSEGV)
    time.sleep(10)
    raise AssertionError("not reached")


def _hog_memory(path: str, settings: ExtractionSettings) -> Extracted:
    hoard = [bytearray(64 * 1024 * 1024) for _ in range(64)]  # 4 GiB, far above the cap
    return Extracted(type="text", content=str(len(hoard)))


# Test-only extractors, handed to the child through Extractor(extra_extractors=...). The endless
# one is a PDF: its type's timeout is the short one, while ordinary text files get a timeout no
# loaded machine reaches (a test of many files must not fail because one waited 0.5 s for a core).
TEST_EXTRACTORS = (
    ExtractorSpec(type="pdf", extract=_loop_forever, extensions=("hang",)),
    ExtractorSpec(type="pdf", extract=_segfault, extensions=("crash",)),
    ExtractorSpec(type="text", extract=_hog_memory, extensions=("hog",)),
)
FAST = ExtractionSettings(timeout_text=30, timeout_pdf=0.5, memory_mb=256)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """One file per test extractor plus an ordinary text file."""
    paths = {}
    for name, data in {"a.hang": "x", "b.crash": "x", "c.hog": "x", "ok.txt": "still serving files"}.items():
        (tmp_path / name).write_text(data)
        paths[name] = str(tmp_path / name)
    return paths


@pytest.fixture
def extractor():
    with Extractor(FAST, extra_extractors=TEST_EXTRACTORS) as ex:
        yield ex


def test_child_is_reused_between_files(extractor, files):
    first = extractor.run(files["ok.txt"])
    pid = extractor.pid
    second = extractor.run(files["ok.txt"])
    assert first.status == second.status == "success"
    assert second.doc.content == "still serving files"
    assert extractor.pid == pid and extractor.children_started == 1


def test_endless_extractor_is_killed_at_timeout(extractor, files):
    extractor.run(files["ok.txt"])
    old_pid = extractor.pid
    started = time.monotonic()
    result = extractor.run(files["a.hang"])
    assert time.monotonic() - started < 3
    assert result.status == "failed"
    assert result.error_message == "Extraction timed out after 0.5 s"
    assert result.doc.type == "pdf" and result.doc.content == ""
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)
    after = extractor.run(files["ok.txt"])
    assert after.status == "success" and extractor.pid != old_pid


def test_segfault_is_a_failed_file(extractor, files):
    result = extractor.run(files["b.crash"])
    assert result.status == "failed"
    assert result.error_message == "Extractor crashed on this file"
    assert extractor.run(files["ok.txt"]).status == "success"


def test_memory_cap_stops_a_greedy_file(files):
    # a generous timeout (FAST's for text), so that only the memory cap can stop it
    with Extractor(FAST, extra_extractors=TEST_EXTRACTORS) as extractor:
        result = extractor.run(files["c.hog"])
        assert result.status == "failed"
        assert result.error_message in (
            "File needs too much memory to extract",
            "Extractor crashed on this file",
        )
        assert extractor.run(files["ok.txt"]).status == "success"


def test_oversize_file_is_skipped_unopened(tmp_path):
    big = tmp_path / "big.hang"  # would hang if it were ever opened
    big.write_bytes(b"x" * (1024 * 1024 + 1))
    with Extractor(ExtractionSettings(max_file_size_mb=1), TEST_EXTRACTORS) as ex:
        result = ex.run(str(big))
        assert result.status == "skipped"
        assert result.error_message == "File is larger than 1 MB"
        assert result.doc.type == "pdf" and ex.children_started == 0


def test_missing_file_fails_with_message(extractor, tmp_path):
    result = extractor.run(str(tmp_path / "gone.txt"))
    assert (result.status, result.error_message) == ("failed", "File no longer exists")


def test_close_stops_the_child(files):
    ex = Extractor(FAST)
    ex.run(files["ok.txt"])
    pid = ex.pid
    ex.close()
    assert ex.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_many_files_answer_in_order_and_a_bad_one_fails_alone(files, tmp_path):
    notes = []
    for index in range(150):  # more than one group of CHILD_GROUP files
        (tmp_path / f"note{index}.txt").write_text(f"note number {index}")
        notes.append(str(tmp_path / f"note{index}.txt"))
    bad = {10: files["a.hang"], 70: files["b.crash"], 71: files["c.hog"], 130: str(tmp_path / "gone.txt")}
    paths = list(notes)
    for index, path in sorted(bad.items()):
        paths.insert(index, path)
    with Extractor(FAST, extra_extractors=TEST_EXTRACTORS) as ex:
        results = list(ex.run_many(paths))
        started = ex.children_started
    assert len(results) == len(paths)
    good = [r.doc.content for i, r in enumerate(results) if i not in bad]
    assert good == [f"note number {i}" for i in range(150)]
    assert results[10].error_message == "Extraction timed out after 0.5 s"
    assert results[70].error_message == "Extractor crashed on this file"
    assert results[71].error_message == "File needs too much memory to extract"
    assert results[130].status == "failed"
    assert started == 3  # the first child, then one after the hang and one after the crash


def test_a_group_left_early_does_not_answer_the_next_request(extractor, tmp_path):
    paths = []
    for index in range(20):
        (tmp_path / f"n{index}.txt").write_text(f"first group {index}")
        paths.append(str(tmp_path / f"n{index}.txt"))
    results = extractor.run_many(paths)
    assert next(results).doc.content == "first group 0"
    results.close()  # the child may be extracting the others: their answers must not leak
    (tmp_path / "later.txt").write_text("asked later")
    assert extractor.run(str(tmp_path / "later.txt")).doc.content == "asked later"


def test_spawn_start_method_also_works(files):
    with Extractor(FAST, TEST_EXTRACTORS, start_method="spawn") as ex:
        assert ex.run(files["ok.txt"]).doc.content == "still serving files"
        assert ex.run(files["a.hang"]).error_message == "Extraction timed out after 0.5 s"
        assert ex.run(files["ok.txt"]).status == "success"


def test_a_slow_child_start_does_not_count_against_the_first_file(files):
    # A spawned child re-imports the app (1-4 s here); a tiny text file extracts in ~1 ms, and
    # 0.25 s leaves room for a loaded machine to give the child a core.
    quick = ExtractionSettings(timeout_text=0.25, timeout_pdf=0.25, memory_mb=256)
    with Extractor(quick, TEST_EXTRACTORS, start_method="spawn") as ex:
        first = ex.run(files["ok.txt"])
        assert first.status == "success", first.error_message
        assert first.doc.content == "still serving files"


def test_a_hanging_child_dies_with_its_parent(files):
    """A worker (here a forked process) killed mid-extraction leaves no child spinning."""
    import psutil

    settings = ExtractionSettings(timeout_pdf=600, memory_mb=256)
    reader, writer = os.pipe()
    parent = os.fork()
    if parent == 0:  # the "worker": hands the child an endless file and waits for its answer
        os.close(reader)
        extractor = Extractor(settings, extra_extractors=TEST_EXTRACTORS)
        extractor.run(files["ok.txt"])
        os.write(writer, str(extractor.pid).encode())
        extractor.run(files["a.hang"])
        os._exit(0)
    os.close(writer)
    child = psutil.Process(int(os.read(reader, 32)))
    os.close(reader)
    time.sleep(0.3)  # the child is spinning on the endless file now
    os.kill(parent, signal.SIGKILL)
    os.waitpid(parent, 0)
    try:
        child.wait(timeout=5)  # reaped by init once it is gone
    except psutil.TimeoutExpired:
        child.kill()
        raise AssertionError("the extraction child outlived its parent") from None
    except psutil.NoSuchProcess:
        pass


def test_a_worker_keeps_its_child_between_batches_until_the_settings_change(app, files):
    from webapp.indexing.batch import get_extractor

    first = get_extractor(app)
    assert first.run(files["ok.txt"]).status == "success"
    child = first.pid
    assert get_extractor(app) is first and first.pid == child  # the next batch: the same child
    app.config["EXTRACT_TIMEOUT_TEXT"] = 1.5
    second = get_extractor(app)
    try:
        assert second is not first and first.pid is None  # the old child was stopped
        assert second.run(files["ok.txt"]).status == "success" and second.pid != child
    finally:
        second.close()


def test_a_forked_process_makes_its_own_entries_and_leaves_the_parents():
    from webapp.procs import Kept

    closed = []
    kept = Kept()
    mine = kept.get("thing", 1, lambda: ["parent's"], closed.append)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a new entry although the key is the same, the parent's not closed
        ok = kept.get("thing", 1, lambda: ["child's"], closed.append) == ["child's"] and not closed
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1"
    assert kept.get("thing", 1, lambda: ["new"], closed.append) is mine and not closed
    assert kept.get("thing", 2, lambda: ["new"], closed.append) == ["new"] and closed == [mine]


def test_the_child_does_not_keep_an_index_lock_its_worker_held(tmp_path, files):
    """A lock taken with flock belongs to the open file, which a fork shares. Tantivy's reader
    holds the index's meta lock for a moment as it reloads: if the extraction child is forked
    then, the worker's next commit must not wait for the child to let it go (a scan hung at
    its commit for as long as its child lived)."""
    import fcntl

    lock = tmp_path / ".tantivy-meta.lock"
    held = open(lock, "w")  # noqa: SIM115 - held across the fork, let go after it
    fcntl.flock(held, fcntl.LOCK_EX)  # a thread of the worker holds it as the child is forked
    with Extractor(FAST, extra_extractors=TEST_EXTRACTORS, start_method="fork") as ex:
        assert ex.run(files["ok.txt"]).status == "success"  # the child runs
        held.close()  # the worker's thread lets go
        with open(lock, "w") as again:  # the worker's commit takes it: at once, not never
            fcntl.flock(again, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert ex.run(files["ok.txt"]).status == "success"
