"""Memory tuning of the worker: index pages handed back while writing, freed heap trimmed."""

from __future__ import annotations

import mmap
import os

import psutil
import pytest

from webapp.memtune import PageOut, page_out_mappings, release_freed

SIZE = 16 * 2**20


def mapping_rss_kb(path: str) -> int:
    """Resident kB of this process's mappings of `path` (from /proc/self/smaps)."""
    total, inside = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            first = line.split(None, 1)[0]
            if "-" in first and not first.endswith(":"):
                inside = line.rstrip().endswith(path)
            elif inside and first == "Rss:":
                total += int(line.split()[1])
    return total


@pytest.fixture
def mapped_file(tmp_path):
    path = tmp_path / "index" / "segment.store"
    path.parent.mkdir()
    data = os.urandom(SIZE)
    path.write_bytes(data)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for offset in range(0, SIZE, mmap.PAGESIZE):  # fault every page in, as a merge does
            m[offset]
        yield path, m, data


def test_index_pages_are_handed_back_and_read_back_intact(mapped_file):
    path, m, data = mapped_file
    assert mapping_rss_kb(str(path)) > SIZE // 1024 // 2
    advised = page_out_mappings(str(path.parent))
    if advised < 0:
        pytest.skip("kernel without MADV_PAGEOUT (Linux < 5.4): page-out is a no-op here")
    assert advised == 1
    assert mapping_rss_kb(str(path)) < SIZE // 1024 // 8
    assert m[:] == data  # read again from the file: nothing lost


def test_mappings_outside_the_folder_are_left_alone(mapped_file, tmp_path):
    path, _, _ = mapped_file
    before = mapping_rss_kb(str(path))
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert page_out_mappings(str(other)) in (0, -1)
    assert mapping_rss_kb(str(path)) == before


def test_page_out_runs_while_the_block_runs(mapped_file):
    path, m, _ = mapped_file
    if page_out_mappings(str(path.parent)) < 0:
        pytest.skip("kernel without MADV_PAGEOUT (Linux < 5.4): page-out is a no-op here")
    with PageOut(str(path.parent), every=0.05):
        for offset in range(0, SIZE, mmap.PAGESIZE):
            m[offset]
    assert mapping_rss_kb(str(path)) < SIZE // 1024 // 8  # the exit pages out what is left


def test_release_freed_hands_back_a_fragmented_heap():
    """What a coordinator frees between writes (texts, documents) leaves holes in the heap
    that glibc keeps; release_freed gives the whole free pages back."""
    process = psutil.Process()
    start = process.memory_info().rss
    blocks = [bytes(2000) + bytes([i % 256]) for i in range(60_000)]  # ~120 MB, malloc'd
    kept = blocks[::16]  # one in 16 stays: the heap cannot shrink from its top
    del blocks
    held = process.memory_info().rss - start
    release_freed()
    after = process.memory_info().rss - start
    assert len(kept) == 3750
    assert held > 60 * 2**20 and after < held / 2
