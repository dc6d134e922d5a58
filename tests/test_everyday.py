"""Everyday use: the Jobs history, failed files by message, scan_now, saved searches,
form errors in the field's label, clamped pages, favicon, the API pages' way back."""

from __future__ import annotations

import re

import pytest

from tests.ui_helpers import csrf, login, post, setup_admin

HX = {"HX-Request": "true"}
BROKEN_PDF = b"%PDF-1.4 not really a pdf"
BROKEN_DOCX = b"PK\x03\x04 not really a zip"


def _text(resp) -> str:
    return resp.get_data(as_text=True)


@pytest.fixture
def ui(client):
    setup_admin(client)
    return client


# -- Jobs: the history of ended scans -------------------------------------------------------------


@pytest.mark.pg
def test_jobs_lists_ended_scans_with_outcome_duration_and_counts(
    client, auth, make_tree, make_source, run_jobs
):
    root = make_tree("docs", {"a.txt": "alpha", "b.txt": "beta", "bad.pdf": BROKEN_PDF})
    sid = make_source(root, name="Docs")["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()
    (root / "c.txt").write_text("gamma")
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()
    runs = client.get("/api/status", headers=auth).get_json()["recent_runs"]
    assert [(r["source_id"], r["state"]) for r in runs] == [(sid, "finished")] * 2
    newest, first = runs
    assert (first["total_scanned"], first["new_files"], first["failed"]) == (3, 3, 1)
    assert (newest["total_scanned"], newest["new_files"], newest["failed"]) == (4, 1, 0)
    assert first["duration_seconds"] >= 0 and first["started_at"] <= first["finished_at"]
    assert first["source_name"] == "Docs"


@pytest.mark.pg
def test_jobs_keep_the_newest_runs_per_source_and_go_with_the_source(
    client, auth, make_tree, make_source, run_jobs, monkeypatch
):
    from webapp.indexing import history

    monkeypatch.setattr(history, "RUNS_KEPT", 2)
    sid = make_source(make_tree("docs", {"a.txt": "alpha"}))["id"]
    for _ in range(3):
        client.post(f"/api/sources/{sid}/reindex", headers=auth)
        run_jobs()
    runs = client.get("/api/status", headers=auth).get_json()["recent_runs"]
    assert len(runs) == 2 and runs[0]["new_files"] == 0 and runs[1]["new_files"] == 0
    client.delete(f"/api/sources/{sid}", headers=auth)
    assert client.get("/api/status", headers=auth).get_json()["recent_runs"] == []


@pytest.mark.pg
def test_a_run_whose_worker_died_is_listed_as_interrupted(app, client, auth, make_tree, make_source):
    from webapp import keys
    from webapp.indexing.runstats import RunState, RunStats
    from webapp.indexing.state import scan_lock, stamp
    from webapp.runtime import get_redis

    sid = make_source(make_tree("docs", {"a.txt": "alpha"}))["id"]
    with app.app_context():
        lock = scan_lock(sid)
        assert lock.start(lock.acquire_queued("job", False))
        lock.write_stats(RunStats(RunState.INDEXING, started_at=stamp(), total_scanned=7))
        get_redis().delete(keys.scan_lock(sid))  # its heartbeat stopped: the lock expired
    shown = client.get("/api/status", headers=auth).get_json()
    assert shown["sources"][0]["last_run"]["state"] == "interrupted"
    assert shown["recent_runs"] == []  # a read shows it; the scheduler's sweep records it
    with app.app_context():
        from webapp.indexing.state import settle_dead_runs

        settle_dead_runs(app)
    runs = client.get("/api/status", headers=auth).get_json()["recent_runs"]
    assert [(r["state"], r["total_scanned"]) for r in runs] == [("interrupted", 7)]
    assert "Interrupted" in runs[0]["message"]


def test_status_page_has_a_jobs_section_with_a_failed_link(ui, make_tree, run_jobs):
    root = make_tree("docs", {"a.txt": "alpha", "bad.pdf": BROKEN_PDF})
    post(ui, "/sources/new", {"name": "Docs", "root_path": str(root)})
    html = _text(ui.get("/status"))
    assert "No scan has ended yet." in html
    post(ui, "/sources/docs/reindex")
    run_jobs()
    html = _text(ui.get("/status"))
    jobs = html[html.index('id="jobs"') :]
    row = re.search(r'<tr data-run-state="finished">(.*?)</tr>', jobs, re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", row, re.S)]
    assert cells[0] == "Docs" and cells[1] == "Finished"
    assert re.fullmatch(r"\d+ s", cells[3]) and cells[4:] == ["2", "2", "0", "0", "1"]
    assert re.search(r'<time datetime="[^"]+Z" title="[^"]+ UTC" data-local>', row)
    assert 'href="/sources/docs/failed"' in row


# -- failed files, grouped by message and paged ----------------------------------------------------


@pytest.mark.pg
def test_failed_files_are_grouped_by_message_and_paged(
    client, auth, make_tree, make_source, run_jobs, monkeypatch
):
    from webapp.services import status

    files = {f"pdf{i}.pdf": BROKEN_PDF for i in range(3)}
    files.update({f"doc{i}.docx": BROKEN_DOCX for i in range(2)})
    files["fine.txt"] = "fine"
    make_source(make_tree("docs", files), name="Docs")
    client.post("/api/sources/docs/reindex", headers=auth)
    run_jobs()
    ui = client
    login(ui)
    monkeypatch.setattr(status, "FAILED_PAGE", 2)
    body = client.get("/api/status/docs/failed", headers=auth).get_json()
    assert (body["total"], body["pages"], body["page"]) == (5, 3, 1)
    counts = sorted(m["count"] for m in body["messages"])
    assert counts == [2, 3]  # two messages: one of the PDFs, one of the DOCX files
    last = client.get("/api/status/docs/failed?page=99", headers=auth).get_json()
    assert last["page"] == 3 and sum(len(g["paths"]) for g in last["groups"]) == 1
    seen = []
    for page in (1, 2, 3):
        seen += [
            p
            for g in client.get(f"/api/status/docs/failed?page={page}", headers=auth).get_json()["groups"]
            for p in g["paths"]
        ]
    assert sorted(p.rsplit("/", 1)[1] for p in seen) == sorted(k for k in files if k != "fine.txt")
    html = _text(ui.get("/sources/docs/failed"))
    assert "5 failed files" in html and "2 different errors" in html
    assert "Page 1 of 3" in html and 'href="/sources/docs/failed?page=2"' in html
    assert "fine.txt" not in html
    assert client.get("/api/status/docs/failed?page=0", headers=auth).status_code == 400
    assert ui.get("/sources/nope/failed").status_code == 404


# -- scan_now --------------------------------------------------------------------------------------


def test_api_scan_now_is_off_by_default_and_queues_when_asked(client, auth, make_tree):
    root = make_tree("docs", {"a.txt": "alpha"})
    plain = client.post("/api/sources", headers=auth, json={"name": "Plain", "root_path": str(root)})
    assert plain.status_code == 201 and plain.get_json()["state"] == "idle"
    assert client.post("/api/sources/plain/reindex", headers=auth).status_code == 200
    now = client.post(
        "/api/sources",
        headers=auth,
        json={"name": "Now", "root_path": str(root), "scan_now": True, "allow_overlap": True},
    )
    assert now.status_code == 201
    assert client.get("/api/sources/now", headers=auth).get_json()["state"] == "queued"
    assert client.post("/api/sources/now/reindex", headers=auth).status_code == 409
    bad = client.post(
        "/api/sources", headers=auth, json={"name": "Bad", "root_path": str(root), "scan_now": "soon"}
    )
    assert bad.status_code == 400 and bad.get_json()["detail"].startswith("scan_now:")


def test_form_starts_the_first_scan_unless_unticked(ui, make_tree, run_jobs):
    root = make_tree("docs", {"a.txt": "alpha"})
    form = _text(ui.get("/sources/new"))
    assert re.search(r'name="scan_now" value="1"\s+checked', form)
    resp = post(
        ui, "/sources/new", {"name": "Docs", "root_path": str(root), "scan_now": "1"}, page="/sources/new"
    )
    assert resp.status_code == 302
    page = _text(ui.get("/sources"))
    assert "its first scan has started" in page and 'data-state="queued"' in page
    run_jobs()
    assert "Last scan finished" in _text(ui.get("/sources"))
    post(
        ui,
        "/sources/new",
        {"name": "Later", "root_path": str(root), "allow_overlap": "1"},
        page="/sources/new",
    )
    later = _text(ui.get("/sources"))
    assert "Start its first scan with “Scan now”" in later
    bad = post(ui, "/sources/new", {"name": "", "root_path": str(root)}, page="/sources/new")
    assert not re.search(r'name="scan_now" value="1"\s+checked', _text(bad))  # as submitted


# -- counts during a scan ---------------------------------------------------------------------------


def test_counts_during_a_scan_come_from_the_run(ui, app, make_tree):
    from webapp.indexing.runstats import Progress, RunState, RunStats
    from webapp.indexing.state import scan_lock

    root = make_tree("docs", {"a.txt": "alpha"})
    post(ui, "/sources/new", {"name": "Docs", "root_path": str(root)})
    with app.app_context():
        lock = scan_lock("docs")
        run_id = lock.acquire_queued("job", False)
        assert lock.start(run_id)
        lock.write_stats(
            RunStats(
                RunState.INDEXING,
                total_scanned=4700,
                new_files=4700,
                successful=990,
                failed=10,
                progress=Progress(1000, 4700),
            )
        )
    html = _text(ui.get("/sources/docs/status", headers=HX))
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html))
    # numbers in the page's language (docs/ui.md, "Languages"): English groups thousands
    assert "4,700 files found · 990 indexed · 10 failed · 0 skipped" in text
    assert "1,000 / 4,700 files" in text and not re.search(r"(?<![\d,])0 files", text)


# -- saved searches ---------------------------------------------------------------------------------


@pytest.mark.pg
def test_saved_searches_api(client, auth, make_tree, make_source):
    make_source(make_tree("docs", {"a.txt": "alpha"}), name="Docs")
    assert client.get("/api/saved-searches", headers=auth).get_json() == []
    body = {
        "name": " Budget PDFs ",
        "q": "budget -draft",
        "source_id": "docs",
        "type": "pdf",
        "sort": "modified_at:desc",
    }
    made = client.post("/api/saved-searches", headers=auth, json=body)
    assert made.status_code == 201
    saved = made.get_json()
    assert set(saved) == {"id", "name", "q", "source_id", "type", "sort", "created_at"}
    assert (saved["name"], saved["q"], saved["source_id"], saved["type"], saved["sort"]) == (
        "Budget PDFs",
        "budget -draft",
        "docs",
        "pdf",
        "modified_at:desc",
    )
    again = client.post("/api/saved-searches", headers=auth, json={**body, "q": "other"})
    assert again.status_code == 409 and "Budget PDFs" in again.get_json()["detail"]
    for change, detail in (
        ({"type": "PDF"}, "type: unknown type 'PDF'"),
        ({"source_id": "nope"}, "source_id: unknown source 'nope'"),
        ({"sort": "size"}, "sort: must be one of"),
        ({"q": " ", "type": None, "source_id": None, "sort": "relevance"}, "q: must not be empty"),
        ({"name": ""}, "name: must be 1 to 100 characters"),
        ({"colour": "red"}, "colour: unknown field"),
    ):
        bad = client.post("/api/saved-searches", headers=auth, json={**body, "name": "Other", **change})
        assert bad.status_code == 400 and bad.get_json()["detail"].startswith(detail), change
    listed = client.get("/api/saved-searches", headers=auth).get_json()
    assert listed == [saved]
    assert client.delete(f"/api/saved-searches/{saved['id']}", headers=auth).status_code == 204
    assert client.delete(f"/api/saved-searches/{saved['id']}", headers=auth).status_code == 404
    assert client.get("/api/saved-searches", headers=auth).get_json() == []
    assert client.get("/api/saved-searches").status_code == 401


@pytest.mark.pg
def test_saved_searches_are_per_user(client, auth, app):
    from webapp.services import auth as accounts

    with app.app_context():
        accounts.create_user("bob", "bobs long password", is_admin=False)
    bob = {
        "Authorization": "Bearer "
        + client.post(
            "/api/auth/login", json={"username": "bob", "password": "bobs long password"}
        ).get_json()["access_token"]
    }
    mine = client.post("/api/saved-searches", headers=auth, json={"name": "Mine", "q": "x"})
    theirs = client.post("/api/saved-searches", headers=bob, json={"name": "Mine", "q": "y"})
    assert mine.status_code == 201 and theirs.status_code == 201  # names are unique per user
    assert [s["q"] for s in client.get("/api/saved-searches", headers=bob).get_json()] == ["y"]
    gone = client.delete(f"/api/saved-searches/{mine.get_json()['id']}", headers=bob)
    assert gone.status_code == 404
    assert len(client.get("/api/saved-searches", headers=auth).get_json()) == 1


def test_saved_searches_in_the_page(ui, make_tree, run_jobs):
    root = make_tree("notes", {"a.txt": "wonderful alpha", "b.md": "# wonderful beta"})
    post(ui, "/sources/new", {"name": "Notes", "root_path": str(root)})
    post(ui, "/sources/notes/reindex")
    run_jobs()
    page = _text(ui.get("/?q=wonderful&type=markdown&sort=basename:asc&ext=md"))
    # the chosen type shows in the box, the one state of the filter (ui/querybox.py)
    assert "Saved searches (0)" in page and 'name="q" value="wonderful type:markdown"' in page
    resp = ui.post(
        "/saved-searches",
        data={
            "csrf_token": csrf(ui, "/"),
            "name": "Wonder notes",
            "q": "wonderful",
            "source": "notes",
            "type": "markdown",
            "sort": "basename:asc",
            "ext": "md",
        },
    )
    assert resp.status_code == 302
    target = resp.headers["Location"]
    assert target == "/?q=wonderful+ext:md&source=notes&type=markdown&sort=basename:asc"
    page = _text(ui.get(target))
    assert "Search saved as “Wonder notes”." in page and "Saved searches (1)" in page
    link = f'<a href="{target.replace("&", "&amp;")}" title="wonderful ext:md" dir="auto">Wonder notes</a>'
    assert link in page
    assert "b.md" in page and "a.txt" not in page
    dup = ui.post("/saved-searches", data={"csrf_token": csrf(ui, "/"), "name": "Wonder notes", "q": "other"})
    assert "Not saved: Name: you already have a saved search named" in _text(ui.get(dup.headers["Location"]))
    saved_id = re.search(r'action="/saved-searches/(\d+)/delete"', page).group(1)
    gone = ui.post(f"/saved-searches/{saved_id}/delete", data={"csrf_token": csrf(ui, "/")})
    assert gone.status_code == 302
    assert "Saved searches (0)" in _text(ui.get("/"))
    assert (
        ui.post(f"/saved-searches/{saved_id}/delete", data={"csrf_token": csrf(ui, "/")}).status_code == 404
    )


# -- search pages clamp --------------------------------------------------------------------------


def test_a_page_past_the_end_shows_the_last_page(ui, make_tree, run_jobs):
    root = make_tree("many", {f"n{i:02d}.txt": f"common word {i}" for i in range(25)})
    post(ui, "/sources/new", {"name": "Many", "root_path": str(root)})
    post(ui, "/sources/many/reindex")
    run_jobs()
    html = _text(ui.get("/?q=common&limit=10&page=999"))
    assert "Page 3 of 3" in html and "21–25 of <strong>25</strong>" in html
    assert "Page 1 of 3" in _text(ui.get("/?q=common&limit=10&page=-4"))
    frag = ui.get("/?q=common&limit=10&page=999", headers=HX)
    assert frag.headers["HX-Push-Url"].endswith("page=3")
    assert ui.get("/?q=common&page=abc").status_code == 400


# -- favicon and the API pages ---------------------------------------------------------------------


def test_favicon_is_served_to_everyone_and_linked(client):
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.mimetype == "image/vnd.microsoft.icon"
    assert icon.data[:4] == b"\x00\x00\x01\x00"  # an ICO file
    setup_admin(client)
    page = _text(client.get("/"))
    assert 'rel="icon" href="/static/favicon.svg"' in page
    assert client.get("/static/favicon.svg").status_code == 200


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_api_pages_link_back_to_trawl_and_follow_the_dark_preference(client, path):
    html = _text(client.get(path))
    back = re.search(r'<nav class="docs-back"[^>]*>\s*<a href="([^"]+)">', html)
    assert back and back.group(1) == "/"
    assert 'href="/static/css/docs.css"' in html and 'name="color-scheme" content="light dark"' in html
    css = _text(client.get("/static/css/docs.css"))
    assert "prefers-color-scheme: dark" in css
    script = "swagger-init.js" if path == "/docs" else "redoc-init.js"
    assert _text(client.get(f"/static/js/{script}")).count("prefers-color-scheme: dark") == 1
