"""What a helper sends the coordinator through Redis arrives whole (indexing/batch.py)."""

from __future__ import annotations

from webapp.indexing.batch import Batch, BatchResult
from webapp.indexing.runstats import FileStatus


def test_a_batch_arrives_whole():
    batch = Batch(3, [("/data/a.txt", 10, 1_700_000_000_123_456_789), ("/data/ü b.pdf", 0, 0)])
    assert Batch.from_json(batch.to_json().encode())  # RPUSH / LPOP carry bytes == batch


def test_a_helpers_result_arrives_whole_with_thumbnails_and_statuses():
    doc = {
        "id": "docs--1",
        "source_id": "docs",
        "source_name": "Docs",
        "path": "/data/photo.jpg",
        "basename": "photo.jpg",
        "extension": "jpg",
        "type": "image",
        "size_bytes": 5,
        "modified_at": 1_700_000_000,
        "indexed_at": 1_700_000_100,
        "content": "",
        "title": None,
        "metadata": {"width": 2},
        "container_id": None,
    }
    record = {
        "path": "/data/photo.jpg",
        "size_bytes": 5,
        "mtime_ns": 1_700_000_000_000_000_000,
        "doc_type": "image",
        "status": FileStatus.FAILED,
        "error_message": "Extractor crashed on this file",
        "container": None,
        "ocr": None,
    }
    sent = BatchResult(
        7,
        [doc, {**doc, "id": "docs--2"}],
        {"docs--1": b"\xff\xd8\xff\x00jpeg", "docs--2": None},  # None: an older one is removed
        [record],
        ["/data/photo.jpg"],
        partial=True,
    )
    received = BatchResult.from_json(sent.to_json().encode())
    assert received == sent
    assert received.records[0]["status"] is FileStatus.FAILED
