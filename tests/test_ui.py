"""The web UI through the Flask test client: login, CSRF, search, documents, sources, status."""

from __future__ import annotations

import re
import time

import pytest

from tests.ui_helpers import ADMIN, csrf, post, setup_admin

HX = {"HX-Request": "true"}


@pytest.fixture
def ui(client):
    """A client whose session is the logged-in admin (created through the setup page)."""
    setup_admin(client)
    return client


@pytest.fixture
def indexed(ui, make_tree, run_jobs):
    """A source over a few files, scanned by a real RQ worker; returns its id."""
    root = make_tree(
        "notes",
        {
            "hello.txt": "hello wonderful world of searching",
            "xss.md": "# Danger\n\nthis file says <script>alert(1)</script> to the wonderful reader",
            "deep/plan.txt": "the quarterly plan " + "filler words here. " * 40,
        },
    )
    resp = post(ui, "/sources/new", {"name": "Notes", "root_path": str(root), "schedule_choice": "manual"})
    assert resp.status_code == 302
    assert post(ui, "/sources/notes/reindex").status_code == 302
    run_jobs()
    return "notes"


def _text(resp) -> str:
    return resp.get_data(as_text=True)


# -- first run, login, logout, sessions ---------------------------------------------------------


def test_first_visit_goes_to_setup_and_setup_logs_in(client):
    resp = client.get("/sources")
    assert resp.status_code == 302 and resp.headers["Location"].endswith("/setup")
    assert client.get("/login").headers["Location"].endswith("/setup")
    setup_admin(client)
    page = client.get("/sources")
    assert page.status_code == 200 and "Add a source" in _text(page)
    assert ADMIN["username"] in _text(page)
    # setup is over: the page sends people on instead of creating a second admin
    assert client.get("/setup").status_code == 302


def test_setup_shows_inline_errors(client):
    token = csrf(client, "/setup")
    cases = [
        (
            {"username": "admin", "password": "long enough 1", "password_confirm": "different 12"},
            "do not match",
        ),
        (
            {"username": "a", "password": "long enough 1", "password_confirm": "long enough 1"},
            "User name must be 3-50 characters",
        ),  # the form's words, not the field's name
        (
            {"username": "admin", "password": "short", "password_confirm": "short"},
            "Password must be at least 8 characters",
        ),
    ]
    for data, message in cases:
        resp = client.post("/setup", data={"csrf_token": token, **data})
        assert resp.status_code == 400 and message in _text(resp), data
        assert 'value="' + data["username"] + '"' in _text(resp)  # the name is kept
    assert client.get("/setup").status_code == 200  # still no account


def test_pages_redirect_to_login_with_next(ui):
    post(ui, "/logout")
    for path in ("/", "/sources", "/status", "/documents/x--abc", "/sources/new"):
        resp = ui.get(path)
        assert resp.status_code == 302, path
        assert "/login" in resp.headers["Location"], path
    resp = ui.get("/?q=plan&limit=10")
    assert resp.headers["Location"].endswith("/login?next=/?q%3Dplan%26limit%3D10")


def test_htmx_requests_get_hx_redirect_instead(ui):
    """A session that ended while typing (or while a card polls) comes back to that page after
    login; a page of another site is never the way back."""
    post(ui, "/logout")
    resp = ui.get("/?q=lighthouse+kee", headers=HX)
    assert resp.status_code == 401
    assert resp.headers["HX-Redirect"] == "/login?next=/?q%3Dlighthouse%2Bkee"
    polled = ui.get("/sources/docs/status", headers={**HX, "HX-Current-URL": "http://localhost/sources"})
    assert polled.headers["HX-Redirect"] == "/login?next=/sources"
    other = ui.get("/sources/docs/status", headers={**HX, "HX-Current-URL": "http://evil.example/sources"})
    assert other.headers["HX-Redirect"] == "/login"
    assert ui.get("/", headers=HX).headers["HX-Redirect"] == "/login"
    back = post(
        ui,
        "/login",
        {"username": "admin", "password": "correct horse battery", "next": "/?q=lighthouse+kee"},
        page="/login",
    )
    assert back.headers["Location"].endswith("/?q=lighthouse+kee")


def test_login_logout_and_next(ui):
    assert post(ui, "/logout").headers["Location"].endswith("/login")
    assert ui.get("/sources").status_code == 302
    token = csrf(ui, "/login")
    bad = ui.post("/login", data={"csrf_token": token, "username": "admin", "password": "nope"})
    assert bad.status_code == 401 and "Invalid username or password" in _text(bad)
    ok = ui.post("/login", data={"csrf_token": token, **ADMIN, "next": "/status"})
    assert ok.status_code == 302 and ok.headers["Location"] == "/status"
    assert ui.get("/status").status_code in (200, 503)


def test_login_refuses_offsite_next(ui):
    post(ui, "/logout")
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        token = csrf(ui, "/login")
        resp = ui.post("/login", data={"csrf_token": token, **ADMIN, "next": target})
        assert resp.headers["Location"] == "/", target
        post(ui, "/logout")


@pytest.mark.pg
def test_session_expires_and_deleted_user_is_logged_out(app, ui):
    assert ui.get("/sources").status_code == 200
    with ui.session_transaction() as sess:
        sess["iat"] = int(time.time()) - app.config["SESSION_EXPIRE_HOURS"] * 3600 - 5
    assert "/login" in ui.get("/sources").headers["Location"]
    setup_free = ui.post("/login", data={"csrf_token": csrf(ui), **ADMIN})
    assert setup_free.status_code == 302
    with ui.session_transaction() as sess:
        sess["uid"] = 999
    assert "/login" in ui.get("/sources").headers["Location"]


def test_session_cookie_is_httponly_lax_and_secure_over_https(app):
    resp = app.test_client().get("/setup")
    cookie = resp.headers["Set-Cookie"]
    assert cookie.startswith("trawl_session=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie
    secure = app.test_client().get("/setup", base_url="https://localhost")
    assert "Secure" in secure.headers["Set-Cookie"]


def test_login_shares_the_api_rate_limit(client):
    setup_admin(client)
    post(client, "/logout")
    token = csrf(client, "/login")
    codes = [
        client.post(
            "/login", data={"csrf_token": token, "username": "admin", "password": "wrong password"}
        ).status_code
        for _ in range(4)
    ]  # setup already used one of the five attempts
    assert codes == [401, 401, 401, 401]
    blocked = client.post("/login", data={"csrf_token": token, **ADMIN})
    assert blocked.status_code == 429 and "Too many login attempts" in _text(blocked)
    api = client.post("/api/auth/login", json=ADMIN)
    assert api.status_code == 429  # one bucket for the page and the API


# -- CSRF -----------------------------------------------------------------------------------------


def test_state_changing_requests_need_the_csrf_token(ui, make_tree):
    root = make_tree("docs", {"a.txt": "x"})
    attempts = [
        ("/logout", {}),
        ("/sources/new", {"name": "Docs", "root_path": str(root)}),
        ("/sources/test-path", {"root_path": str(root)}),
    ]
    for path, data in attempts:
        for token in (None, "forged-token"):
            body = dict(data, **({"csrf_token": token} if token else {}))
            resp = ui.post(path, data=body)
            assert resp.status_code == 400, (path, token)
            assert "security token" in _text(resp)
    assert ui.get("/sources").status_code == 200  # still logged in
    assert "Docs" not in _text(ui.get("/sources"))
    header = ui.post(
        "/sources/test-path",
        data={"root_path": str(root)},
        headers={**HX, "X-CSRF-Token": csrf(ui, "/sources")},
    )
    assert header.status_code == 200 and "can be indexed" in _text(header)


def test_login_form_needs_csrf_too(client):
    setup_admin(client)
    post(client, "/logout")
    resp = client.post("/login", data=ADMIN)
    assert resp.status_code == 400


def test_body_carries_the_token_for_htmx(ui):
    html = _text(ui.get("/"))
    token = re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)
    assert f'hx-headers=\'{{"X-CSRF-Token": "{token}"}}\'' in html


# -- search ---------------------------------------------------------------------------------------


def test_search_page_renders_results_with_escaping(ui, indexed):
    resp = ui.get("/?q=wonderfull")  # one typo
    html = _text(resp)
    assert resp.status_code == 200
    assert "hello.txt" in html and "xss.md" in html
    assert "<em>wonderful</em>" in html
    assert "<script>alert(1)" not in html
    assert "says alert(1) to the" in html  # a Markdown snippet shows its text, tags left out
    assert re.search(r"<strong>2</strong>\s*results · \d+ ms", html)
    assert 'href="/documents/notes--' in html and "q=wonderfull" in html
    assert 'value="wonderfull"' in html  # the box shows the query of a shared link


def test_search_fragment_for_htmx_only(ui, indexed):
    frag = ui.get("/?q=plan", headers=HX)
    html = _text(frag)
    assert html.lstrip().startswith('<section id="results"')
    assert "<html" not in html and "plan.txt" in html
    assert "HX-Request" in frag.headers["Vary"]
    assert frag.headers["HX-Push-Url"] == "/?q=plan"
    for extra in ({"HX-Boosted": "true"}, {"HX-History-Restore-Request": "true"}):
        full = ui.get("/?q=plan", headers={**HX, **extra})
        assert "<html" in _text(full), extra
    assert "<html" in _text(ui.get("/?q=plan"))


def test_a_scan_button_under_htmx_answers_with_the_status_cell_and_a_message(ui, indexed):
    import json

    resp = post(ui, f"/sources/{indexed}/reindex", page="/sources", headers=HX)
    assert resp.status_code == 200 and f'id="status-{indexed}"' in _text(resp)
    note = json.loads(resp.headers["HX-Trigger"])["trawl:notify"]
    assert note == {"message": "Scan of “Notes” queued", "level": "success"}  # its name, not id
    again = post(ui, f"/sources/{indexed}/reindex", page="/sources", headers=HX)
    assert json.loads(again.headers["HX-Trigger"])["trawl:notify"]["level"] == "error"


def test_search_filters_sort_and_pagination(app, ui, indexed, make_tree, run_jobs):
    root = make_tree("more", {f"note{i:02d}.txt": f"wonderful note number {i}" for i in range(12)})
    post(ui, "/sources/new", {"name": "More", "root_path": str(root)})
    post(ui, "/sources/more/reindex")
    run_jobs()
    first = _text(ui.get("/?q=wonderful&source=more&limit=10&sort=basename:asc"))
    assert "1–10 of <strong>12</strong>" in first
    assert "note00.txt" in first and "note10.txt" not in first and "hello.txt" not in first
    # the chosen source is written into the box: one state, the select shows the box's term
    next_link = "/?q=wonderful+source:more&amp;sort=basename:asc&amp;limit=10&amp;page=2"
    assert f'href="{next_link}"' in first and 'value="wonderful source:more"' in first
    second = _text(ui.get("/?q=wonderful&source=more&limit=10&sort=basename:asc&page=2"))
    assert "11–12 of" in second and "note11.txt" in second and "note00.txt" not in second
    typed = _text(ui.get("/?q=wonderful&type=markdown"))
    assert "xss.md" in typed and "hello.txt" not in typed
    assert '<option value="markdown" selected>' in typed


def test_search_states(ui, indexed):
    home = _text(ui.get("/"))  # nothing asked: the newest files
    assert "Recent files" in home and "1–3 of <strong>3</strong>" in home
    none = ui.get("/?q=zzzqqqxxx")
    assert none.status_code == 200 and "No results for “zzzqqqxxx”" in _text(none)
    for query, message in (
        ("q=a&limit=0", "limit: must be between 1 and 100"),
        ("q=a&sort=size", "sort: must be one of"),
        ("q=a&page=abc", "page: must be a whole number"),
    ):
        bad = ui.get("/?" + query)
        assert bad.status_code == 400 and message in _text(bad), query
        assert "Cannot search" in _text(bad)
        frag = ui.get("/?" + query, headers=HX)
        assert frag.status_code == 400 and message in _text(frag)


def test_search_page_without_sources_points_to_setup_of_one(ui):
    html = _text(ui.get("/"))
    assert "Nothing to search yet" in html and 'href="/sources/new"' in html


# -- documents ------------------------------------------------------------------------------------


def _doc_id(ui, q: str) -> str:
    html = _text(ui.get(f"/?q={q}"))
    return re.search(r'href="/documents/([^"?]+)\?', html).group(1)


def test_document_page_shows_preview_highlights_and_facts(ui, indexed):
    doc_id = _doc_id(ui, "alert")
    resp = ui.get(f"/documents/{doc_id}?q=wonderful")
    html = _text(resp)
    assert resp.status_code == 200
    assert "xss.md" in html and "notes/xss.md" in html and "Notes" in html
    assert '<mark class="match">wonderful</mark>' in html  # Markdown is rendered, then marked
    assert "<script>alert" not in html and "<h1>Danger</h1>" in html
    assert "1 match on this page" in html
    source = _text(ui.get(f"/documents/{doc_id}?q=wonderful&view=text"))
    assert "<em>wonderful</em>" in source and "&lt;script&gt;alert(1)&lt;/script&gt;" in source
    assert 'data-copy="#doc-path"' in html and "Download <bdi>xss.md</bdi>" in html
    assert "Metadata" in html  # markdown title and front matter land in the metadata table


def test_document_unknown_is_a_404_page(ui, indexed):
    resp = ui.get("/documents/notes--000000000000")
    assert resp.status_code == 404 and "<html" in _text(resp)
    assert "not found" in _text(resp)


def test_download_button_redirects_to_a_working_link(ui, indexed):
    doc_id = _doc_id(ui, "quarterly")
    resp = post(ui, f"/documents/{doc_id}/download", page=f"/documents/{doc_id}")
    assert resp.status_code == 303
    url = resp.headers["Location"]
    assert url.startswith(f"/api/documents/{doc_id}/download?token=")
    file = ui.get(url)
    assert file.status_code == 200 and file.data.startswith(b"the quarterly plan")
    assert "attachment" in file.headers["Content-Disposition"]


def test_image_documents_get_an_image_preview(ui, make_tree, run_jobs):
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 40), "red").save(buf, "PNG")
    root = make_tree("pics", {"red.png": buf.getvalue()})
    post(ui, "/sources/new", {"name": "Pics", "root_path": str(root)})
    post(ui, "/sources/pics/reindex")
    run_jobs()
    doc_id = _doc_id(ui, "red")
    html = _text(ui.get(f"/documents/{doc_id}"))
    assert f'<img src="/documents/{doc_id}/image"' in html
    img = ui.get(f"/documents/{doc_id}/image")
    assert img.status_code == 200 and img.mimetype in ("image/png", "image/jpeg")
    assert Image.open(io.BytesIO(img.data)).size == (64, 40)


# -- sources --------------------------------------------------------------------------------------


def test_add_source_form_shows_defaults_and_inline_errors(ui, make_tree):
    form = _text(ui.get("/sources/new"))
    assert "**/.git/**" in form and "**/*" in form and "Manual only" in form
    root = make_tree("docs", {"a.txt": "x"})
    cases = [
        ({"name": "", "root_path": str(root)}, "name", "Name: must be 1 to 200 characters"),
        (
            {"name": "Docs", "root_path": str(root) + "/missing"},
            "root_path",
            "Folder: the path does not exist",
        ),
        ({"name": "Docs", "root_path": "/etc"}, "root_path", "Folder: the path is outside"),
        (
            {"name": "Docs", "root_path": str(root), "include_patterns": "/abs/**"},
            "include_patterns",
            "Include patterns: &#39;/abs/**&#39;",
        ),
        (
            {"name": "Docs", "root_path": str(root), "schedule_choice": "custom", "cron": "61 * * * *"},
            "cron",
            "Cron expression: minute: 61 is out of range",
        ),
    ]
    for data, field, message in cases:
        resp = post(ui, "/sources/new", data, page="/sources/new")
        html = _text(resp)
        assert resp.status_code == 400, data
        # the field's label speaks, once, beside the field; the internal names never show
        assert f'id="{field}-error"' in html and html.count(message) == 1, (message, html)
        assert f"{field}:" not in html and "scan_schedule:" not in html
        assert "Invalid schedule" not in html  # the cron error is not repeated by the preview
        assert re.search(rf'id="{field}"[^>]*aria-invalid="true"', html, re.S), field
    assert "Docs" not in _text(ui.get("/sources"))


def test_add_edit_and_delete_a_source(ui, make_tree):
    root = make_tree("docs", {"a.txt": "x"})
    resp = post(
        ui,
        "/sources/new",
        {
            "name": "Team Docs",
            "root_path": str(root),
            "include_patterns": "**/*.txt\n\n**/*.md",
            "exclude_patterns": "",
            "schedule_choice": "daily",
        },
        page="/sources/new",
    )
    assert resp.status_code == 302
    page = _text(ui.get("/sources"))
    assert "Team Docs" in page and "Every day at 02:00" in page and "Never scanned" in page
    edit = _text(ui.get("/sources/team-docs/edit"))
    assert "**/*.txt\n**/*.md</textarea>" in edit and "**/node_modules/**" in edit
    assert re.search(r'value="daily"\s+checked', edit)
    resp = post(
        ui,
        "/sources/team-docs/edit",
        {
            "name": "Renamed",
            "root_path": str(root),
            "include_patterns": "**/*",
            "exclude_patterns": "**/tmp/**",
            "schedule_choice": "custom",
            "cron": "30 1 * * 1-5",
        },
        page="/sources/team-docs/edit",
    )
    assert resp.status_code == 302
    page = _text(ui.get("/sources"))
    assert "Renamed" in page and "Monday to Friday at 01:30" in page
    confirm = _text(ui.get("/sources/team-docs/delete"))
    assert "Delete “Renamed”?" in confirm and "not</strong> touched" in confirm
    assert post(ui, "/sources/team-docs/delete", page="/sources").status_code == 302
    assert 'id="source-team-docs"' not in _text(ui.get("/sources"))
    assert root.joinpath("a.txt").exists()


def test_test_path_fragment(ui, make_tree):
    root = make_tree("docs", {"a.txt": "x"})
    token = csrf(ui, "/sources/new")
    ok = ui.post("/sources/test-path", data={"csrf_token": token, "root_path": str(root)}, headers=HX)
    html = _text(ok)
    assert html.startswith('<div id="path-test"') and "The path can be indexed" in html
    bad = _text(ui.post("/sources/test-path", data={"csrf_token": token, "root_path": "/etc"}, headers=HX))
    assert "outside the allowed roots" in bad and "Inside the allowed roots" in bad
    page = ui.post("/sources/test-path", data={"csrf_token": token, "root_path": "/etc"})
    assert "<html" in _text(page)  # without JavaScript: a page


def test_schedule_preview_fragment(ui):
    daily = _text(ui.get("/sources/schedule-preview?schedule_choice=daily", headers=HX))
    assert daily.startswith('<div id="schedule-preview"')
    assert "Every day at 02:00 (UTC)" in daily and daily.count('02:00 UTC" data-local>') == 3
    custom = _text(ui.get("/sources/schedule-preview?schedule_choice=custom&cron=*/15+*+*+*+*", headers=HX))
    assert custom.count("<li>") == 3
    bad = _text(ui.get("/sources/schedule-preview?schedule_choice=custom&cron=99+*+*+*+*", headers=HX))
    assert "Invalid schedule: minute: 99 is out of range 0-59" in bad
    manual = _text(ui.get("/sources/schedule-preview?schedule_choice=manual", headers=HX))
    assert "only when you start them" in manual


def test_reindex_progress_polls_until_done_and_conflict_is_a_message(ui, make_tree, run_jobs):
    import json

    root = make_tree("docs", {"a.txt": "alpha", "b.txt": "beta"})
    post(ui, "/sources/new", {"name": "Docs", "root_path": str(root)})
    token = csrf(ui, "/sources")
    queued = ui.post("/sources/docs/reindex", data={"csrf_token": token}, headers=HX)
    html = _text(queued)
    assert html.startswith('<div id="status-docs"') and 'hx-trigger="every 1s"' in html
    assert json.loads(queued.headers["HX-Trigger"])["trawl:notify"]["message"] == "Scan of “Docs” queued"
    again = ui.post("/sources/docs/reindex", data={"csrf_token": token}, headers=HX)
    note = json.loads(again.headers["HX-Trigger"])["trawl:notify"]
    assert note == {"message": "“Docs” is already queued", "level": "error"}
    run_jobs()
    done = _text(ui.get("/sources/docs/status", headers=HX))
    assert "every 1s" not in done and "Last scan finished" in done
    assert "<strong>2</strong> files" in done
    nojs = post(ui, "/sources/docs/clear-stale", page="/sources")
    assert nojs.status_code == 302
    assert "Removed 0 failed file records." in _text(ui.get("/sources"))


def test_unknown_source_pages_are_404(ui):
    assert ui.get("/sources/nope/edit").status_code == 404
    assert post(ui, "/sources/nope/reindex", page="/sources").status_code == 404


# -- status ---------------------------------------------------------------------------------------


def test_status_page_shows_health_counts_failures_and_links(ui, make_tree, run_jobs):
    root = make_tree("docs", {"good.txt": "fine", "broken.pdf": b"%PDF-1.4 not really a pdf"})
    post(ui, "/sources/new", {"name": "Docs", "root_path": str(root)})
    post(ui, "/sources/docs/reindex")
    run_jobs()
    resp = ui.get("/status")
    html = _text(resp)
    assert resp.status_code == 200
    for text in ("Database", "Redis", "Search engine", "Workers", "Docs"):
        assert text in html, text
    assert '<a class="text-error" href="/sources/docs/failed">1 failed</a>' in html
    for link in ('href="/docs"', 'href="/redoc"', 'href="/admin/rq/0/view/jobs/trawl/queued/8/asc/1"'):
        assert link in html
    failed = _text(ui.get("/sources/docs/failed"))
    assert "broken.pdf" in failed and "1 failed file" in failed


def test_search_page_has_syntax_help_and_shows_a_bad_term_inline(ui, indexed):
    page = _text(ui.get("/"))
    assert "Search syntax" in page and "<code>modified:2024-03</code>" in page
    frag = ui.get("/?q=wonderful+modified:%3Ezz", headers=HX)  # while typing: htmx
    html = _text(frag)
    assert frag.status_code == 400 and html.lstrip().startswith('<section id="results"')
    assert "Check the query:</strong> modified:&gt;zz is not a date (use 2024, 2024-03 or" in html
    assert frag.headers["HX-Push-Url"] == "/?q=wonderful+modified:%3Ezz"
    full = ui.get("/?q=wonderful+size:lots")
    assert full.status_code == 400 and "size:lots is not a size" in _text(full)
    assert 'value="wonderful size:lots"' in _text(full)  # the box keeps what was typed
    unknown = ui.get("/?q=wonderful&type=spreadsheet")
    assert unknown.status_code == 400
    assert "type:spreadsheet: unknown type &#39;spreadsheet&#39;" in _text(unknown)


def test_search_facets_are_links_with_counts_kept_in_the_url(ui, indexed):
    html = _text(ui.get("/?q=wonderful"))
    facets = html[html.index('<aside class="facets') : html.index("</aside>")]
    assert re.search(r'data-value="markdown">Markdown</a>\s*<span class="count">1</span>', facets)
    assert re.search(r'data-value="text">Text</a>\s*<span class="count">1</span>', facets)
    assert re.search(r'data-value="md">md</a>\s*<span class="count">1</span>', facets)
    assert re.search(r'data-value="notes"><bdi>Notes</bdi></a>\s*<span class="count">2</span>', facets)
    assert 'href="/?q=wonderful&amp;ext=md"' in facets
    filtered = _text(ui.get("/?q=wonderful&ext=md"))
    assert "xss.md" in filtered and "hello.txt" not in filtered
    assert '<input type="hidden" name="ext" value="md">' in filtered  # typing keeps the filter
    chosen = filtered[filtered.index('<aside class="facets') : filtered.index("</aside>")]
    assert 'href="/?q=wonderful" aria-current="true"' in chosen  # a second click removes it
    # facets alone (no words) list the matching files, newest first
    listed = _text(ui.get("/?type=text"))
    assert "hello.txt" in listed and "plan.txt" in listed and "xss.md" not in listed
    year = time.gmtime().tm_year
    assert re.search(rf'data-value="{year}">{year}</a>\s*<span class="count">2</span>', listed)


def test_search_date_range_is_kept_in_the_url(ui, indexed):
    today = time.strftime("%Y-%m-%d", time.gmtime())
    inside = ui.get(f"/?q=wonderful&from=2000-01-01&to={today}&sort=modified_at:desc", headers=HX)
    assert inside.status_code == 200 and "hello.txt" in _text(inside)
    assert inside.headers["HX-Push-Url"] == (
        f"/?q=wonderful&from=2000-01-01&to={today}&sort=modified_at:desc"
    )
    before = _text(ui.get("/?q=wonderful&to=2000-12-31"))
    assert "No results for “wonderful”" in before and "remove the filters" in before
    page = _text(ui.get("/?q=wonderful&from=2001-02-03"))
    assert 'name="from" value="2001-02-03"' in page
    bad = ui.get("/?q=wonderful&from=yesterday")
    assert bad.status_code == 400 and "from: is not a date (use 2024-03-15)" in _text(bad)


def test_messages_name_fields_as_the_form_does(ui):
    """A wrong current password reads "Current password is wrong", not the field's name."""
    resp = post(
        ui,
        "/account",
        {
            "current_password": "not it",
            "new_password": "a new one 123",
            "new_password_confirm": "a new one 123",
        },
        page="/account",
    )
    text = _text(resp)
    assert resp.status_code == 400 and "Current password is wrong" in text
    assert "current_password" not in text.replace('name="current_password"', "").replace(
        'id="current_password"', ""
    ).replace('for="current_password"', "")
    bad = post(ui, "/account/tokens", {"name": "", "scope": "read"}, page="/account/tokens")
    assert bad.status_code == 400 and "Name must be" in _text(bad)


def test_a_vanished_file_says_so_in_words(ui, indexed, make_tree):
    """Download of a file deleted since it was indexed: a page that says what happened."""
    doc_id = _doc_id(ui, "quarterly")
    (make_tree("notes", {}) / "deep" / "plan.txt").unlink()
    resp = post(ui, f"/documents/{doc_id}/download", page=f"/documents/{doc_id}")
    text = _text(resp)
    assert resp.status_code == 404 and "<h1>Not found</h1>" in text
    assert "File no longer exists" in text and "moved, renamed or" in text


def test_the_status_badge_names_a_missing_source_folder(ui, indexed, make_tree):
    assert "All systems ok" in _text(ui.get("/status"))
    folder = make_tree("notes", {})
    folder.rename(folder.with_name("notes-moved"))
    text = _text(ui.get("/status"))
    assert "All systems ok" not in text and "1 source folder missing" in text
    assert 'class="alert alert-error folder-problem"' in text and "Notes" in text


def test_a_path_test_shows_the_checks_it_did_not_run(ui):
    text = _text(post(ui, "/sources/test-path", {"root_path": "/etc"}, page="/sources/new", headers=HX))
    assert 'class="bad" data-check="inside_allowed_roots"' in text
    assert text.count("not checked") == 4 and "Exists: not checked" in text


def test_a_watched_source_says_starting_and_its_card_follows_live_updates(app, ui, indexed):
    """Until the watcher has set up a source it says "starting" (not an error); a watched
    source's card asks for its counts now and then, as live updates change them."""
    from webapp import keys
    from webapp.runtime import get_redis

    conn = get_redis(app)
    conn.set(keys.watcher_alive(), "1", ex=60)
    try:
        card = _text(ui.get("/sources/notes/status", headers=HX))
        assert 'data-watch-state="starting"' in card and "starting…" in card
        assert "error" not in card.split('class="live-line')[1]
        assert 'hx-trigger="every 5s"' in card
        conn.hset(keys.watch_states(), "notes", "watching")
        assert 'hx-trigger="every 5s"' in _text(ui.get("/sources/notes/status", headers=HX))
    finally:
        conn.delete(keys.watcher_alive(), keys.watch_states())
    with app.app_context():  # meaning's progress would poll too while documents wait for it
        from webapp.extensions import db
        from webapp.models import Source

        db.session.get(Source, "notes").semantic = False
        db.session.commit()
    assert "hx-trigger" not in _text(ui.get("/sources/notes/status", headers=HX))


def test_titles_people_can_read():
    """A placeholder or over-long metadata title gives way to the file name."""
    from webapp.ui.filters import doc_title, type_label

    for title in (
        "Slide 1",
        "  untitled ",
        "Microsoft Word - draft.doc",
        "PowerPoint Presentation",
        "x" * 170,
        "",
        None,
        "---",
    ):
        assert doc_title({"title": title, "basename": "deck.pptx"}) == "deck.pptx", title
    assert doc_title({"title": "Harbour plan 2024", "basename": "p.pdf"}) == "Harbour plan 2024"
    assert type_label("raw_image") == "RAW photo" and type_label("pdf") == "PDF"


def test_office_previews_show_tables_as_tables(ui, make_tree, run_jobs):
    """A spreadsheet's and a Word table's rows are table rows on the page, matches marked."""
    import io

    import docx
    import openpyxl

    book = openpyxl.Workbook()
    sheet = book.active
    for row in (("Item", "Cost"), ("lighthouse lamp", 120), ("rope", 15)):
        sheet.append(row)
    xlsx = io.BytesIO()
    book.save(xlsx)
    word = docx.Document()
    word.add_paragraph("The supply list")
    table = word.add_table(rows=2, cols=2)
    for r, cells in enumerate((("Boat", "Monday"), ("Lamp oil", "Friday"))):
        for c, text in enumerate(cells):
            table.cell(r, c).text = text
    doc_bytes = io.BytesIO()
    word.save(doc_bytes)
    root = make_tree("office", {"costs.xlsx": xlsx.getvalue(), "supply.docx": doc_bytes.getvalue()})
    post(ui, "/sources/new", {"name": "Office", "root_path": str(root)})
    post(ui, "/sources/office/reindex")
    run_jobs()
    sheet_page = _text(ui.get(f"/documents/{_doc_id(ui, 'lighthouse')}?q=lighthouse"))
    assert '<table class="text-table">' in sheet_page
    assert re.search(r"<tr><td><em>lighthouse</em> lamp</td><td>120</td></tr>", sheet_page)
    word_page = _text(ui.get(f"/documents/{_doc_id(ui, 'monday')}"))
    assert "<tr><td>Boat</td><td>Monday</td></tr>" in word_page and "The supply list" in word_page


# -- progress of the phases ------------------------------------------------------------------------


def _phase(html: str, name: str) -> str:
    """The markup of one phase's bar and words in a page or fragment."""
    match = re.search(rf'<div class="phase [^"]*" data-phase="{name}".*?</div>', html, re.S)
    assert match, f"no {name} phase"
    return match.group(0)


def test_status_shows_bars_per_phase_and_polls_only_while_work_runs(app, ui, make_tree, run_jobs):
    """Scan, OCR and meaning each get a <progress> on Status and on the source; the Status
    fragment polls while a scan waits and stops once all is idle."""
    root = make_tree("docs", {"a.txt": "alpha", "b.txt": "beta"})
    post(ui, "/sources/new", {"name": "Docs", "root_path": str(root), "semantic": ["0"]})
    post(ui, "/sources/docs/reindex")  # queued, no worker yet
    page = _text(ui.get("/status"))
    progress = page.split('id="status-progress"')[1].split(">")[0]
    assert 'hx-trigger="every 2s"' in progress and 'hx-get="/status/progress"' in progress
    assert "1 waiting · 0 running · 0 failed jobs" in page
    assert 'data-state="queued"' in _phase(page, "scan") and "<progress" in _phase(page, "scan")
    run_jobs()
    fragment = _text(ui.get("/status/progress", headers=HX))
    assert fragment.startswith('<div id="status-progress"') and "hx-trigger" not in fragment.split(">")[0]
    scan = _phase(fragment, "scan")
    assert 'max="2" value="2"' in scan and "2 of 2 done" in scan
    assert "off" in _phase(fragment, "semantic") and "<progress" in _phase(fragment, "ocr")
    card = _text(ui.get("/sources"))
    assert "<progress" in _phase(card, "semantic") and "<progress" in _phase(card, "ocr")
    assert ui.get("/status/progress").status_code == 200  # without htmx: the whole page


def test_status_counts_every_queue_and_started_jobs_as_the_dashboard_does(app, ui):
    """A job running on the background queue (OCR, meaning) is counted as running."""
    import subprocess
    import sys
    import time

    from webapp.runtime import get_ocr_queue

    queue = get_ocr_queue(app)
    queue.enqueue(time.sleep, 4)
    assert "1 waiting · 0 running" in _text(ui.get("/status"))
    script = (
        "import sys, redis, rq; rq.SimpleWorker([sys.argv[2]], connection=redis.Redis.from_url(sys.argv[1]))"
        ".work(burst=True, logging_level='WARNING')"
    )
    worker = subprocess.Popen([sys.executable, "-c", script, app.config["REDIS_URL"], queue.name])
    try:
        deadline = time.monotonic() + 10
        while "0 waiting · 1 running" not in (html := _text(ui.get("/status/progress", headers=HX))):
            assert time.monotonic() < deadline, html
            time.sleep(0.1)
        assert 'hx-trigger="every 2s"' in html.split(">")[0]  # it polls while the job runs
    finally:
        worker.wait(timeout=30)


def test_a_phase_that_stopped_says_why():
    """An error in a phase's status is shown as the reason it stopped; a failed scan too."""
    from webapp.ui import progress

    info = {
        "state": "idle",
        "last_run": {"state": "failed", "message": "root folder not found"},
        "semantic": {"state": "error", "done": 3, "pending": 5, "eta_seconds": None, "error": "disk full"},
        "ocr": {"state": "reading", "done": 10, "pending": 30, "eta_seconds": 90, "error": None},
    }
    scan, ocr, meaning = progress.phases(info)
    assert scan["state"] == "error" and scan["error"] == "root folder not found"
    assert meaning["state"] == "error" and meaning["error"] == "disk full" and not meaning["active"]
    assert ocr["active"] and ocr["total"] == 40 and ocr["eta_seconds"] == 90
    assert progress.busy([info])


def test_a_running_scan_has_an_eta_from_its_rate():
    from datetime import UTC, datetime, timedelta

    from webapp.ui import progress

    now = datetime(2026, 1, 1, tzinfo=UTC)
    run = {"started_at": (now - timedelta(seconds=30)).isoformat(), "progress": {"done": 30, "total": 90}}
    scan = progress.scan_phase({"state": "indexing", "last_run": run}, now)
    assert (scan["done"], scan["pending"], scan["eta_seconds"]) == (30, 60, 60)


# -- results that read right -----------------------------------------------------------------------


def test_the_box_and_the_selects_are_one_state(ui, indexed):
    """`type:` typed in the box shows in the Type select; a type chosen in the select (or a
    facet) is written into the box; the address carries it once, in `q`."""
    typed = _text(ui.get("/?q=wonderful+type:markdown"))
    assert '<option value="markdown" selected>' in typed and "xss.md" in typed and "hello.txt" not in typed
    chosen = ui.get("/", query_string={"q": "wonderful", "type": "markdown", "source": "notes"}, headers=HX)
    assert chosen.headers["HX-Push-Url"] == "/?q=wonderful+type:markdown+source:notes"
    page = _text(ui.get("/", query_string={"q": "wonderful", "source": "notes"}))
    assert 'value="wonderful source:notes"' in page and '<option value="notes" selected>' in page
    facets = page[page.index('<aside class="facets') : page.index("</aside>")]
    assert 'href="/?q=wonderful" aria-current="true"' in facets  # the source facet removes the term
    several = _text(ui.get("/?q=wonderful+type:markdown+type:text"))  # no one value to show
    assert (
        '<option value="">All types</option>' in several
        and "selected>" not in several.split('name="type"')[1].split("</select>")[0]
    )


def test_enter_on_the_search_shown_adds_no_history_step(ui, indexed):
    shown = {"HX-Current-URL": "http://localhost/?q=wonderful", **HX}
    again = ui.get("/?q=wonderful", headers=shown)
    assert again.headers.get("HX-Replace-Url") == "/?q=wonderful" and "HX-Push-Url" not in again.headers
    other = ui.get("/?q=plan", headers=shown)
    assert other.headers.get("HX-Push-Url") == "/?q=plan"


def test_the_highlight_box_holds_the_querys_words_only(ui, indexed):
    hits = _text(ui.get("/?q=wonderful+-danger+ext:txt"))
    doc_id = re.search(r'href="/documents/([^"?]+)\?q=', hits).group(1)
    page = _text(
        ui.get(f"/documents/{doc_id}", query_string={"q": 'wonderful -danger ext:txt "hello" OR world'})
    )
    assert 'id="find" name="q" type="search" value="wonderful hello world"' in page
    only_filters = _text(ui.get(f"/documents/{doc_id}", query_string={"q": "ext:txt"}))
    assert (
        'id="find" name="q" type="search" value=""' in only_filters and 'id="match-nav"' not in only_filters
    )


def test_every_page_has_a_first_level_heading(ui, indexed):
    doc_id = re.search(r'href="/documents/([^"?]+)', _text(ui.get("/?q=wonderful"))).group(1)
    for path in (
        "/",
        "/?q=wonderful",
        "/sources",
        "/status",
        f"/documents/{doc_id}",
        "/account",
        "/users",
        "/sources/new",
    ):
        assert len(re.findall(r"<h1[ >]", _text(ui.get(path)))) == 1, path
