"""Archive members served to browsers: Range requests answer 206/416 as on plain
files, a member is read out of its archive once (a bounded copy under DATA_DIR/members), and
the copy goes with its document."""

from __future__ import annotations

import io
import os
import time
from pathlib import Path

from tests import samples
from tests.ui_helpers import login

PAYLOAD = bytes(range(256)) * 400 + b"lemming payload"  # 102,415 bytes


def _member(client, auth, make_tree, make_source, run_jobs) -> tuple[dict, str]:
    root = make_tree(
        "media", {"box.zip": samples.archive({"notes/lemming.txt": PAYLOAD, "tone.wav": PAYLOAD})}
    )
    sid = make_source(root, id="media")["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()
    hits = client.post("/api/search", headers=auth, json={"q": "lemming"}).get_json()["results"]
    hit = next(h for h in hits if h["container_id"])
    return hit, sid


def _copies(app) -> list[Path]:
    return sorted((Path(app.config["DATA_DIR"]) / "members").rglob("*--*"))


def _get(client, auth, doc_id: str, **headers):
    url = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()["url"]
    return client.get(url, headers=headers)


def test_range_requests_on_a_member_answer_206_and_416(app, client, auth, make_tree, make_source, run_jobs):
    hit, _ = _member(client, auth, make_tree, make_source, run_jobs)
    part = _get(client, auth, hit["id"], Range="bytes=100-199")
    assert part.status_code == 206 and part.data == PAYLOAD[100:200]
    assert part.headers["Content-Range"] == f"bytes 100-199/{len(PAYLOAD)}"
    tail = _get(client, auth, hit["id"], Range="bytes=-15")
    assert tail.status_code == 206 and tail.data == b"lemming payload"
    beyond = _get(client, auth, hit["id"], Range=f"bytes={len(PAYLOAD) + 10}-")
    assert beyond.status_code == 416
    assert beyond.headers["Content-Range"] == f"bytes */{len(PAYLOAD)}"
    whole = _get(client, auth, hit["id"])
    assert whole.status_code == 200 and whole.data == PAYLOAD
    assert whole.headers.get("Accept-Ranges") == "bytes", dict(whole.headers)


def test_a_member_is_read_out_once_and_goes_with_its_document(
    app, client, auth, make_tree, make_source, run_jobs
):
    hit, sid = _member(client, auth, make_tree, make_source, run_jobs)
    assert _get(client, auth, hit["id"], Range="bytes=0-9").status_code == 206
    [copy] = _copies(app)
    first = copy.stat().st_ino
    for start in range(0, 5000, 500):  # a player's requests: the same copy each time
        assert (
            _get(client, auth, hit["id"], Range=f"bytes={start}-{start + 99}").data
            == PAYLOAD[start : start + 100]
        )
    assert [c.stat().st_ino for c in _copies(app)] == [first]
    assert client.delete(f"/api/sources/{sid}", headers=auth).status_code == 204
    assert _copies(app) == []


def test_the_player_of_a_member_gets_ranges(app, client, auth, make_tree, make_source, run_jobs):
    _member(client, auth, make_tree, make_source, run_jobs)
    hits = client.post("/api/search", headers=auth, json={"q": "tone"}).get_json()["results"]
    wav = next(h for h in hits if h["basename"] == "tone.wav")
    browser = app.test_client()
    login(browser)
    part = browser.get(f"/documents/{wav['id']}/media", headers={"Range": "bytes=10-19"})
    assert part.status_code == 206 and part.data == PAYLOAD[10:20]
    assert part.mimetype.startswith("audio/")


def test_the_copies_are_bounded_least_recently_used_first(tmp_path):
    from webapp.indexing import membercache

    data = str(tmp_path)
    for i in range(5):
        path = membercache.get(
            data, f"src--{i:012x}", "1-2", lambda: io.BytesIO(b"x" * 1000), limit_bytes=10_000
        )
        old = time.time() - 3600 + i  # used an hour ago, the first ones earliest
        os.utime(path, (old, old))
    membercache.evict(data, limit_bytes=2500)
    assert [p.name for p in sorted((tmp_path / "members" / "src").iterdir())] == [
        f"src--{3:012x}.1-2",
        f"src--{4:012x}.1-2",
    ]
