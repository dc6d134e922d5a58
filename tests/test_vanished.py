"""Files that vanish while they are read: the failure is one of access, not of
content, so the next scan tries them again and `trawl verify` reports them once they read.

Before, a PDF or EPUB gone between the scan's look at it and the extractor's open was
recorded "Not a valid PDF/EPUB file": a content verdict that no rescan revisits.
"""

from __future__ import annotations

import os

import pytest

from tests import samples
from tests.test_healing import _fail_records, _hits, _scan
from tests.workers import records, verify

FILES = {
    "report.pdf": samples.pdf(["quokka figures"]),
    "book.epub": samples.epub(samples.picture((40, 60), samples.RED, "PNG"), "Chapter of the wombat."),
}


def _extract_error(app, path: str) -> str:
    """The message the real extractor gives for `path` (in this process)."""
    from webapp.indexing.extractors import ExtractionError, ExtractionSettings, extract

    settings = ExtractionSettings.from_config(app.config)
    with pytest.raises(ExtractionError) as caught:
        extract(path, settings)
    return str(caught.value)


def test_a_pdf_or_epub_gone_when_opened_is_a_vanished_file(app, tmp_path):
    for name, data in FILES.items():
        path = tmp_path / name
        path.write_bytes(data)
        os.rename(path, tmp_path / f"away-{name}")
        assert _extract_error(app, str(path)) == "File no longer exists", name


def test_a_file_back_after_vanishing_mid_read_is_retried_and_verify_reports_it(
    app, client, auth, make_tree, make_source, run_jobs, tmp_path
):
    root = make_tree("docs", FILES)
    sid = make_source(root)["id"]
    _scan(client, auth, sid)
    run_jobs()
    assert {s for s, _ in records(app, sid).values()} == {"success"}
    messages = set()
    for name in FILES:  # gone while the scan reads it: what the extractor says is recorded
        os.rename(root / name, tmp_path / name)
        messages.add(_extract_error(app, str(root / name)))
        os.rename(tmp_path / name, root / name)  # back, same bytes, size and mtime
    assert messages == {"File no longer exists"}
    _fail_records(app, sid, messages.pop())
    report = verify(app, sid)
    assert report["failed_files_now_readable"] == 2
    _scan(client, auth, sid)
    run_jobs()
    assert {s for s, _ in records(app, sid).values()} == {"success"}
    assert _hits(client, auth, "quokka") == 1 and _hits(client, auth, "wombat") == 1
    assert verify(app, sid)["problems"] == 0
