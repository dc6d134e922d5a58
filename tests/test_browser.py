"""A newcomer's first session in a real browser (Playwright driving Debian's chromium).

The app is served by werkzeug in a thread; scans run in a real `python worker.py` process over
the same data folder, Redis database and SQLite file. Screenshots land in test-output/screenshots/.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from tests.conftest import CHEAP_HASHES, flush_redis, initialised_app
from tests.ui_helpers import ADMIN
from tests.workers import stop_workers

CHROMIUM = "/usr/bin/chromium"
if not os.path.exists(CHROMIUM):
    pytest.skip(
        f"browser tests need Debian's chromium at {CHROMIUM} (apt-get install chromium)",
        allow_module_level=True,
    )
try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:
    pytest.skip("browser tests need the playwright package (pip install playwright)", allow_module_level=True)

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parent.parent
SHOTS = REPO / "test-output" / "screenshots"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WAIT_MS = 20_000
expect.set_options(timeout=WAIT_MS)  # assertions wait as long as actions (5 s by default)
STORY = (
    "The lighthouse keeper wrote in his log every night.\n" * 3
    + "A storm came; the lighthouse keeper kept the lamp burning.\n"
    + "Later pages talk about gulls, tides and the supply boat.\n" * 40
)


@pytest.fixture(scope="module")
def site(tmp_path_factory, redis_url):
    """The app on a free port, a worker process, and the folder a newcomer will add."""
    from werkzeug.serving import make_server

    tmp = tmp_path_factory.mktemp("browser")
    data, roots = tmp / "data", tmp / "roots"
    folder = roots / "logbooks"
    (folder / "archive").mkdir(parents=True)
    (folder / "keeper.txt").write_text(STORY, encoding="utf-8")
    (folder / "danger.md").write_text("# Note\n\n<script>alert('x')</script> near the lighthouse\n")
    for i in range(150):
        (folder / "archive" / f"entry{i:03d}.txt").write_text(f"entry {i}: calm sea, light wind")
    flush_redis(redis_url)
    env = {
        "DATA_DIR": str(data),
        "REDIS_URL": redis_url,
        "ALLOWED_ROOTS": str(roots),
        "DATABASE_URL": f"sqlite:///{data / 'trawl.db'}",
        "SEARCH_BACKEND": "tantivy",
        "SEARCH_INDEX_DIR": "",
        "SECRET_KEY": "",
        "LOG_LEVEL": "WARNING",
        "WORKERS": "1",
    }
    app = initialised_app(
        {
            **env,
            "AUTH_RATE_LIMIT": "100/minute",
            "LOGIN_USER_RATE_LIMIT": "100/minute",
            "TRUSTED_PROXIES": "",
            **CHEAP_HASHES,
        }
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    SHOTS.mkdir(parents=True, exist_ok=True)
    log = open(SHOTS.parent / "browser-worker.log", "w")  # noqa: SIM115  (closed below)
    worker = subprocess.Popen(
        [sys.executable, str(REPO / "worker.py")],
        cwd=str(REPO),
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    yield {"url": f"http://127.0.0.1:{server.server_port}", "folder": folder, "app": app}
    stop_workers([worker], redis_url, app.config["QUEUE_NAME"], grace=10)
    log.close()
    server.shutdown()


@pytest.fixture(scope="module")
def browser():
    """One headless chromium for the module."""
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, site):
    """A fresh browser tab (own cookies) with a base URL; console errors fail the test."""
    context = browser.new_context(
        base_url=site["url"], accept_downloads=True, viewport={"width": 1200, "height": 900}
    )
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.set_default_timeout(WAIT_MS)
    yield tab
    context.close()
    unexpected = [e for e in errors if "status of 4" not in e]  # 4xx: tested states
    assert not unexpected, unexpected


def shot(page, name: str, full_page: bool = True) -> None:
    """Save a screenshot for people to look at."""
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=full_page)


def _ensure_ready(page, site) -> None:
    """Admin, source and a finished scan exist (when the first-session test did not run first)."""
    api = page.request
    api.post("/api/auth/setup", data=ADMIN)
    token = api.post("/api/auth/login", data=ADMIN).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    if not api.get("/api/sources/logbooks", headers=headers).ok:
        api.post("/api/sources", headers=headers, data={"name": "Logbooks", "root_path": str(site["folder"])})
        api.post("/api/sources/logbooks/reindex?wait=30", headers=headers)


def _add_scanned_source(page, name: str, folder: Path) -> None:
    """Add a source over `folder` through the API and scan it to the end."""
    api = page.request
    token = api.post("/api/auth/login", data=ADMIN).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    api.post("/api/sources", headers=headers, data={"name": name, "root_path": str(folder)})
    api.post(f"/api/sources/{name.lower()}/reindex?wait=30", headers=headers)


def login(page) -> None:
    """Log in through the form."""
    page.goto("/login")
    page.get_by_label("Username").fill(ADMIN["username"])
    page.get_by_label("Password").fill(ADMIN["password"])
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("button", name="Log out")).to_be_visible()


def test_first_session(page, site):
    """Setup, login, add a source, scan with live progress, typo search, preview, download."""
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/setup$"))
    page.get_by_label("Username").fill(ADMIN["username"])
    page.get_by_label("Password", exact=True).fill(ADMIN["password"])
    page.get_by_label("Repeat the password").fill(ADMIN["password"])
    shot(page, "01-setup")
    page.get_by_role("button", name="Create account").click()
    expect(page).to_have_url(re.compile(r"/sources/new$"))

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/login$"))
    page.get_by_label("Username").fill(ADMIN["username"])
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator(".alert-error")).to_have_text("Invalid username or password")
    shot(page, "02-login-error")
    login(page)

    _add_source(page, site)
    _scan_until_done(page)
    _search_open_download(page)


def _add_source(page, site) -> None:
    page.goto("/sources/new")
    page.get_by_label("Name").fill("Logbooks")
    page.get_by_label("Folder").fill(str(site["folder"]) + "/missing")
    page.get_by_role("button", name="Test path").click()
    expect(page.locator("#path-test")).to_contain_text("The path does not exist")
    page.get_by_label("Folder").fill(str(site["folder"]))
    page.get_by_role("button", name="Test path").click()
    expect(page.locator("#path-test")).to_contain_text("The path can be indexed")
    page.get_by_label("Custom (cron)").check()
    page.get_by_label("Cron expression").fill("30 1 * * 1-5")
    expect(page.locator("#schedule-preview")).to_contain_text("Monday to Friday at 01:30")
    expect(page.locator("#schedule-preview li")).to_have_count(3)
    shot(page, "03-add-source")
    page.get_by_label("Manual only").check()
    expect(page.locator("#schedule-preview")).to_contain_text("only when you start them")
    first_scan = page.get_by_label("Start the first scan at once")
    expect(first_scan).to_be_checked()  # on by default; off here to watch "Scan now" below
    first_scan.uncheck()
    page.get_by_role("button", name="Add source").click()
    expect(page).to_have_url(re.compile(r"/sources#source-logbooks$"))
    expect(page.locator("#source-logbooks")).to_contain_text("Never scanned")


def _scan_until_done(page) -> None:
    page.evaluate("""() => {
      window.__seen = [];
      document.body.addEventListener('htmx:afterSettle', () => {
        const el = document.getElementById('status-logbooks');
        const bar = el && el.querySelector('progress');
        window.__seen.push([el && el.dataset.state, bar ? bar.value : null, bar ? bar.max : null]);
      });
    }""")
    card = page.locator("#source-logbooks")
    card.get_by_role("button", name="Scan now").click()
    expect(page.locator(".toast")).to_contain_text("Scan of “Logbooks” queued")
    expect(card.locator("progress.scan-progress")).to_be_visible()
    shot(page, "04-scan-progress")
    status = page.locator("#status-logbooks")
    expect(status).to_have_attribute("data-state", "idle", timeout=45_000)
    expect(status).to_contain_text("Last scan finished")
    expect(status).to_contain_text("152 files")
    seen = page.evaluate("window.__seen")
    assert seen[0][0] in ("queued", "indexing") and seen[-1][0] == "idle", seen
    shot(page, "05-scan-done")


def _search_open_download(page) -> None:
    page.get_by_role("link", name="Search").click()
    box = page.get_by_label("Search your files")
    box.press_sequentially("lighthose keper", delay=40)  # two typos, no Enter
    results = page.locator("#results .result")
    expect(results.first).to_contain_text("keeper.txt")
    expect(page).to_have_url(re.compile(r"/\?q=lighthose\+keper$"))
    first_mark = page.locator("#results .snippet em").first
    expect(first_mark).to_have_text(re.compile("lighthouse", re.IGNORECASE))
    shot(page, "06-search-typo")

    results.first.locator(".result-link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("keeper.txt")
    current = page.locator("#preview-text em.current")
    expect(current).to_have_text(re.compile("lighthouse", re.IGNORECASE))
    expect(current).to_be_in_viewport()
    expect(page.locator("#match-count")).to_have_text(re.compile(r"Match 1 of \d+ on this page"))
    page.get_by_role("button", name="↓ Next").click()
    expect(page.locator("#match-count")).to_contain_text("Match 2 of")
    shot(page, "07-document")

    with page.expect_download() as info:
        page.get_by_role("button", name="Download keeper.txt").click()
    download = info.value
    assert download.suggested_filename == "keeper.txt"
    assert Path(download.path()).read_text(encoding="utf-8") == STORY


def test_keyboard_and_history(page, site):
    """`/` and Ctrl-K focus the box, arrows move through results, Enter opens, Back restores."""
    _ensure_ready(page, site)
    login(page)
    page.goto("/")
    page.locator("h2").first.click()  # focus away from the box
    page.keyboard.press("/")
    expect(page.get_by_label("Search your files")).to_be_focused()
    page.keyboard.type("calm sea")
    links = page.locator("#results .result-link")
    # the answer to the whole question, settled: an answer to `calm` drawn first and replaced
    # later would take the focus away from the result the keys are on
    expect(page).to_have_url(re.compile(r"q=calm\+sea"))
    _no_request_in_flight(page)
    expect(links.first).to_be_visible()
    page.keyboard.press("ArrowDown")
    expect(links.nth(0)).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(links.nth(1)).to_be_focused()
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowUp")
    expect(page.get_by_label("Search your files")).to_be_focused()
    page.locator("body").click(position={"x": 5, "y": 300})
    page.keyboard.press("Control+k")
    expect(page.get_by_label("Search your files")).to_be_focused()
    page.keyboard.press("ArrowDown")
    expect(links.nth(0)).to_be_focused()
    name = links.nth(0).inner_text()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(name)
    page.go_back()
    expect(page.get_by_label("Search your files")).to_have_value("calm sea")
    expect(page.locator("#results .result").first).to_be_visible()
    page.get_by_label("Per page").select_option("10")
    expect(page).to_have_url(re.compile(r"limit=10"))
    expect(page.locator("#results .result")).to_have_count(10)
    page.get_by_role("link", name="Next →").click()
    expect(page).to_have_url(re.compile(r"page=2"))
    expect(page.locator(".result-meta")).to_contain_text("11–20 of")
    shot(page, "08-search-page-2")


def test_typing_does_not_fill_the_history(page, site):
    """A burst of typing adds one history step and replaces it key by key; Enter on the search
    shown adds none; a changed filter and a page change each add one; Back walks them in order."""
    _ensure_ready(page, site)
    login(page)
    page.goto("/")
    steps = lambda: page.evaluate("history.length")  # noqa: E731
    start = steps()
    box = page.get_by_label("Search your files")
    box.press_sequentially("calm sea", delay=120)  # slower than the debounce: one answer a key
    expect(page).to_have_url(re.compile(r"/\?q=calm\+sea$"))
    expect(page.locator(".result-meta")).to_contain_text("150")
    assert steps() == start + 1, f"{steps() - start} history steps for one burst of typing"
    box.press("End")
    box.press_sequentially(" wind", delay=120)
    expect(page).to_have_url(re.compile(r"/\?q=calm\+sea\+wind$"))
    assert steps() == start + 1
    _no_request_in_flight(page)
    box.press("Enter")  # the search already shown: answered again, no second step
    expect(page.locator("#results .result").first).to_be_visible()
    _no_request_in_flight(page)
    assert steps() == start + 1, "Enter on the search shown added a history step"
    page.get_by_label("Sort").select_option("basename:asc")
    expect(page).to_have_url(re.compile(r"sort=basename"))
    page.wait_for_function("n => history.length === n", arg=start + 2)
    page.get_by_role("link", name="Next →").click()
    expect(page).to_have_url(re.compile(r"page=2"))
    page.wait_for_function("n => history.length === n", arg=start + 3)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/\?q=calm\+sea\+wind&sort=basename:asc$"))
    expect(page.locator("#results .result").first).to_be_visible()  # restored, not loading
    page.go_back()
    expect(page).to_have_url(re.compile(r"/\?q=calm\+sea\+wind$"))
    expect(page.locator("#results .result").first).to_be_visible()
    page.go_back()
    expect(page).to_have_url(re.compile(r"/$"))


def test_query_language_and_facets(page, site):
    """A bad term shows inline while typing; facet links filter, stay in the URL, Back undoes."""
    _ensure_ready(page, site)
    login(page)
    page.goto("/")
    box = page.get_by_label("Search your files")
    box.press_sequentially("lighthouse modified:>zz", delay=20)
    alert = page.locator("#results .alert-error")
    expect(alert).to_contain_text("modified:>zz is not a date (use 2024, 2024-03 or 2024-03-15)")
    expect(page.locator(".toast")).to_have_count(0)  # in place, not a pop-up
    alert.get_by_role("link", name="Search syntax").click()
    expect(page.locator("#syntax-help table")).to_be_visible()
    expect(page.locator("#syntax-help table")).to_contain_text("modified:2024-03")
    shot(page, "12-query-error-inline")
    box.fill("lighthouse")
    results = page.locator("#results .result")
    expect(results).to_have_count(2)
    type_facet = page.locator('.facet[data-facet="type"]')
    expect(type_facet).to_contain_text("Markdown")
    expect(type_facet.locator('a[data-value="markdown"] + .count')).to_have_text("1")
    shot(page, "13-facets")
    type_facet.locator('a[data-value="markdown"]').click()
    # one state: the facet's choice is written into the box, and the Type select shows it
    expect(page).to_have_url(re.compile(r"/\?q=lighthouse\+type:markdown$"))
    expect(box).to_have_value("lighthouse type:markdown")
    expect(page.get_by_label("Type")).to_have_value("markdown")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("danger.md")
    box.focus()
    box.press("End")
    box.press_sequentially(" -storm", delay=20)  # typing keeps the facet filter
    expect(page).to_have_url(re.compile(r"q=lighthouse\+type:markdown\+-storm$"))
    expect(results).to_have_count(1)
    page.go_back()
    expect(page).to_have_url(re.compile(r"/\?q=lighthouse\+type:markdown$"))
    expect(box).to_have_value("lighthouse type:markdown")
    page.go_back()
    expect(page).to_have_url(re.compile(r"/\?q=lighthouse$"))
    expect(results).to_have_count(2)
    page.get_by_label("Modified to").fill("2001-01-01")
    expect(page.locator("#results")).to_contain_text("No results for “lighthouse”")
    expect(page).to_have_url(re.compile(r"to=2001-01-01"))
    box.fill("type:text -wind")  # filters only: every matching file, newest first
    expect(page.locator("#results")).to_contain_text("No results")
    page.get_by_label("Modified to").fill("")
    expect(results).to_have_count(1)
    expect(results.first).to_contain_text("keeper.txt")


def test_the_selects_and_the_box_are_one_state(page, site):
    """`type:` typed in the box shows in the Type select as it is typed; a type chosen in the
    select is written into the box (replacing the typed one); "All types" takes it out."""
    _ensure_ready(page, site)
    login(page)
    page.goto("/")
    box, select = page.get_by_label("Search your files"), page.get_by_label("Type")
    box.press_sequentially("lighthouse type:markdown", delay=20)
    expect(select).to_have_value("markdown")
    expect(page.locator("#results .result")).to_have_count(1)
    select.select_option("text")
    expect(box).to_have_value("lighthouse type:text")
    expect(page).to_have_url(re.compile(r"/\?q=lighthouse\+type:text$"))
    expect(page.locator("#results .result").first).to_contain_text("keeper.txt")
    select.select_option("")
    expect(box).to_have_value("lighthouse")
    expect(page.locator("#results .result")).to_have_count(2)
    page.get_by_role("heading", level=1, name="Search your files").wait_for(state="attached")


def test_error_states(page, site):
    """No results, invalid parameters, an invalid form, an unknown document."""
    _ensure_ready(page, site)
    login(page)
    page.goto("/")
    page.get_by_label("Search your files").fill("qqqzzzxxx")
    expect(page.locator("#results")).to_contain_text("No results for “qqqzzzxxx”")
    shot(page, "09-no-results")
    page.goto("/?q=sea&limit=0")
    expect(page.locator("#results .alert-error")).to_contain_text("limit: must be between 1 and 100")
    page.goto("/sources/new")
    page.get_by_label("Name").fill("Outside")
    page.get_by_label("Folder").fill("/etc")
    page.get_by_role("button", name="Add source").click()
    expect(page.locator("#root_path-error")).to_contain_text("outside the allowed roots")
    expect(page.get_by_label("Folder")).to_have_attribute("aria-invalid", "true")
    shot(page, "10-form-error")
    page.goto("/documents/logbooks--000000000000")
    expect(page.locator(".error-page")).to_contain_text("not found")
    page.goto("/status")
    expect(page.locator(".health")).to_contain_text("Workers")
    shot(page, "11-status")


def test_rq_dashboard_loads_its_queues(page, site):
    """/admin/rq runs its own scripts (inline and eval) under its path's policy: not "Loading..."."""
    _ensure_ready(page, site)
    login(page)
    page.goto("/admin/rq/")
    table = page.locator("#queues")
    expect(table).not_to_contain_text("Loading...")
    expect(table).to_contain_text("trawl")
    shot(page, "09-rq-dashboard")
    page.goto("/status")  # the Status page opens it on Trawl's queue, and it leads back
    page.get_by_role("link", name="Job queue dashboard").click()
    expect(page).to_have_url(re.compile(r"/admin/rq/0/view/jobs/trawl/queued/8/asc/1$"))
    expect(page.locator("#jobs")).not_to_contain_text("Loading...")
    page.get_by_role("link", name="← Back to Trawl").click()
    expect(page).to_have_url(re.compile(r"/status$"))


def test_an_image_without_preview_shows_a_note(page, site):
    """A damaged image's document page says there is no preview instead of a broken image."""
    _ensure_ready(page, site)
    pictures = site["folder"].parent / "pictures"
    pictures.mkdir(exist_ok=True)
    (pictures / "damaged.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00garbage" * 300)
    api = page.request
    token = api.post("/api/auth/login", data=ADMIN).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    api.post("/api/sources", headers=headers, data={"name": "Pictures", "root_path": str(pictures)})
    api.post("/api/sources/pictures/reindex?wait=30", headers=headers)
    doc = api.post("/api/search", headers=headers, data={"q": "damaged"}).json()["results"][0]
    login(page)
    page.goto(f"/documents/{doc['id']}")
    expect(page.locator(".no-preview")).to_be_visible()
    expect(page.locator("img[data-image-preview]")).to_be_hidden()
    shot(page, "10-no-preview")


def test_results_show_thumbnails_and_pdf_pages_are_drawn(page, site):
    """A picture's result carries its thumbnail; a PDF's page is drawn with the match marked."""
    from tests import samples

    _ensure_ready(page, site)
    papers = site["folder"].parent / "papers"
    papers.mkdir(exist_ok=True)
    (papers / "harbour photo.jpg").write_bytes(samples.picture((640, 480), samples.BLUE))
    (papers / "harbour plan.pdf").write_bytes(samples.pdf(["The harbour plan", "Page two"]))
    _add_scanned_source(page, "Papers", papers)
    login(page)
    page.goto("/?q=harbour")
    photo = page.locator(".result", has_text="harbour photo.jpg").locator("img[data-thumbnail]")
    expect(photo).to_be_visible()
    page.wait_for_function("img => img.complete && img.naturalWidth === 320", arg=photo.element_handle())
    shot(page, "11-thumbnails")
    page.locator(".result-link", has_text="harbour plan.pdf").click()
    drawn = page.locator(".pdf-slot[data-page='1'][data-drawn]")  # drawn by pdf.js
    expect(drawn).to_be_visible()
    expect(drawn.locator("mark.pdf-hit")).to_have_count(1)  # "harbour", where it stands
    expect(page.locator("[data-page-status]")).to_have_text("Page 1 of 2")
    shot(page, "12-pdf-page")

    page.goto("/?q=lighthouse+note")
    page.locator(".result-link", has_text="danger.md").click()
    expect(page.locator(".markdown-body h1")).to_have_text("Note")  # rendered, not raw
    expect(page.locator(".markdown-body script")).to_have_count(0)
    expect(page.locator("mark.match.current")).to_be_visible()
    shot(page, "13-markdown")


PAGES = (
    "/",
    "/?q=lighthouse",
    "/sources",
    "/sources/new",
    "/sources/logbooks/edit",
    "/status",
    "/account",
    "/account/tokens",
    "/users",
    "/sources/logbooks/failed",
)


def _no_request_in_flight(tab) -> None:
    """Wait until htmx has no request in flight (it marks the requesting element)."""
    tab.wait_for_function("() => !document.querySelector('.htmx-request')")


def _no_sideways_scroll(tab, width: int, label: str) -> None:
    """Every page of PAGES (and the document page) is no wider than the screen, once drawn:
    loaded (its stylesheets, scripts, images and fonts) with no htmx request in flight (the
    pages fetch nothing else; waiting for the network to be idle added 0.5 s a page)."""
    doc = tab.request.get("/?q=keeper").text()
    doc_url = re.search(r'href="(/documents/[^"?]+)', doc).group(1)
    for path in (*PAGES, doc_url):
        tab.goto(path, wait_until="load")
        _no_request_in_flight(tab)
        scroll = tab.evaluate("document.documentElement.scrollWidth")
        assert scroll <= width, f"{path} is {scroll}px wide on a {width}px screen ({label})"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_search_fits_and_filters_fold(browser, site, scheme):
    """At 390 px the first result is on the first screen, the filters, hints, saved searches and
    facets fold behind "Filters", the account is reachable, and no page scrolls sideways (the
    Jobs table scrolls inside its box)."""
    context = browser.new_context(
        base_url=site["url"],
        viewport={"width": 390, "height": 844},
        color_scheme=scheme,
        device_scale_factor=2,
    )
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    _ensure_ready(tab, site)
    login(tab)
    tab.goto("/?q=lighthouse")
    first = tab.locator("#results .result").first
    expect(first).to_be_visible()
    box = first.bounding_box()
    assert box["y"] + box["height"] <= 844, f"the first result ends at {box['y'] + box['height']}px"
    for hidden in ("#search-help", ".filters", ".saved-searches", ".facets"):
        expect(tab.locator(hidden)).to_be_hidden()
    # a file's <script> never becomes an element
    danger = tab.locator("#results .snippet", has_text="alert(")
    expect(danger).to_contain_text("alert('x') near the lighthouse")  # Markdown: its words
    expect(tab.locator("#results script")).to_have_count(0)
    shot(tab, f"18-phone-{scheme}-search", full_page=False)
    toggle = tab.get_by_role("link", name="Filters")
    expect(toggle).to_have_attribute("aria-expanded", "false")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    for shown in (".filters", ".saved-searches", ".facets"):
        expect(tab.locator(shown)).to_be_visible()
    tab.locator('.facet[data-facet="type"] a[data-value="markdown"]').click()
    expect(tab).to_have_url(re.compile(r"type[=:]markdown"))
    expect(tab.get_by_role("link", name="Filters")).to_contain_text("(1)")
    shot(tab, f"19-phone-{scheme}-filters-open")
    tab.get_by_role("link", name=ADMIN["username"]).click()
    expect(tab).to_have_url(re.compile(r"/account$"))
    tab.get_by_role("link", name="API tokens").click()
    expect(tab.get_by_role("heading", level=1)).to_have_text("API tokens")
    tab.goto("/status")
    jobs = tab.locator("#jobs .table-scroll")
    expect(jobs).to_be_visible()
    assert jobs.evaluate("el => el.scrollWidth > el.clientWidth"), "the Jobs table fits: no test"
    shot(tab, f"20-phone-{scheme}-status")
    _no_sideways_scroll(tab, 390, scheme)
    tab.goto("/sources")
    shot(tab, f"21-phone-{scheme}-sources")
    context.close()


def test_desktop_shows_filters_and_fits(browser, site):
    """At 1366 px the filters and facets are open beside the results (no "Filters" control)."""
    context = browser.new_context(base_url=site["url"], viewport={"width": 1366, "height": 800})
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    _ensure_ready(tab, site)
    login(tab)
    tab.goto("/?q=lighthouse")
    expect(tab.locator(".facets")).to_be_visible()
    expect(tab.locator(".filters")).to_be_visible()
    expect(tab.get_by_role("link", name="Filters")).to_be_hidden()
    expect(tab.get_by_role("link", name=ADMIN["username"])).to_be_visible()
    shot(tab, "22-desktop-search", full_page=False)
    _no_sideways_scroll(tab, 1366, "desktop")
    context.close()


def test_jobs_local_times_and_favicon(browser, site):
    """The status page's Jobs list the ended scans; times show in the browser's zone (UTC in the
    title); the favicon is there for every page."""
    context = browser.new_context(base_url=site["url"], timezone_id="Asia/Tokyo", locale="en-US")
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    _ensure_ready(tab, site)
    login(tab)
    tab.goto("/status")
    jobs = tab.locator("#jobs")
    expect(jobs.locator("tr[data-run-state=finished]").first).to_be_visible()
    expect(jobs).to_contain_text("Logbooks")
    when = jobs.locator("time").first
    expect(when).not_to_have_attribute("data-local", "")  # rewritten by our script
    utc = datetime.strptime(when.get_attribute("title"), "%Y-%m-%d %H:%M UTC")
    tokyo = utc + timedelta(hours=9)
    assert tokyo.strftime("%H:%M") in when.inner_text() and "GMT+9" in when.inner_text()
    shot(tab, "14-status-jobs-tokyo")
    icon = tab.request.get("/favicon.ico")
    assert icon.status == 200 and icon.headers["content-type"] == "image/vnd.microsoft.icon"
    loaded = tab.evaluate("""async () => {
      const link = document.querySelector('link[rel=icon]');
      const img = new Image(); img.src = link.href; await img.decode();
      return img.naturalWidth > 0;
    }""")
    assert loaded
    context.close()


def test_saved_search_keeps_what_was_typed(page, site):
    """Typing (htmx) then saving saves the search in the box now, and the list links to it."""
    _ensure_ready(page, site)
    login(page)
    page.goto("/")
    page.get_by_label("Search your files").press_sequentially("calm sea", delay=20)
    expect(page.locator("#results .result").first).to_be_visible()
    page.get_by_label("Sort").select_option("basename:asc")
    expect(page).to_have_url(re.compile(r"sort=basename"))
    page.get_by_label("Save this search as").fill("Calm days")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".alert-success")).to_contain_text("Search saved as “Calm days”.")
    link = page.locator(".saved-list a", has_text="Calm days")
    expect(link).to_have_attribute("href", "/?q=calm+sea&sort=basename:asc")
    shot(page, "15-saved-searches")
    page.get_by_role("button", name="Delete saved search Calm days").click()
    expect(page.locator(".saved-list")).to_have_count(0)


def test_api_pages_link_back_and_follow_dark(browser, site):
    """/docs and /redoc have a way back to Trawl and turn dark with the system."""
    context = browser.new_context(base_url=site["url"], color_scheme="dark")
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    tab.goto("/docs")
    expect(tab.locator("html")).to_have_class(re.compile(r"\bdark-mode\b"))
    expect(tab.locator(".swagger-ui .info")).to_be_visible()
    background = tab.evaluate("getComputedStyle(document.querySelector('.swagger-ui')).backgroundColor")
    assert background == "rgb(28, 32, 34)", background
    shot(tab, "16-swagger-dark")
    tab.goto("/redoc")
    expect(tab.locator("html")).to_have_attribute("data-theme", "dark")
    expect(tab.locator(".api-content")).to_be_visible()
    shot(tab, "17-redoc-dark", full_page=False)
    tab.get_by_role("link", name="Back to Trawl").click()
    expect(tab).to_have_url(re.compile(r"/(login|setup)?$|/login"))
    context.close()


def test_newcomer_edges(browser, site):
    """Markdown links go to the sibling document; a new token has a copy button; "Clear failed"
    shows only with failed files, asks first and goes away once done; type labels are words."""
    context = browser.new_context(base_url=site["url"], viewport={"width": 1200, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    _ensure_ready(tab, site)
    guide = site["folder"].parent / "guide"
    (guide / "docs").mkdir(parents=True, exist_ok=True)
    (guide / "README.md").write_text(
        "# Guide\n\nRead [the setup](docs/setup.md#install) first, then [the missing page](docs/gone.md).\n"
    )
    (guide / "docs" / "setup.md").write_text("# Setup\n\n## Install\n\nRun the installer.\n")
    (guide / "broken.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    _add_scanned_source(tab, "Guide", guide)
    login(tab)
    tab.goto("/?q=guide+read+setup")
    tab.locator(".result-link", has_text="README.md").click()
    expect(tab.locator(".markdown-body a[data-missing-link]")).to_have_text("the missing page")
    tab.locator(".markdown-body a", has_text="the setup").click()
    expect(tab.locator("#doc-path")).to_have_text(re.compile(r"/guide/docs/setup\.md$"))
    expect(tab).to_have_url(re.compile(r"/documents/guide--[0-9a-f]{12}(\?.*)?#install$"))
    expect(tab.locator(".badge").first).to_have_text("Markdown")

    tab.goto("/sources")
    expect(tab.locator("#source-logbooks .clear-failed")).to_have_count(0)  # nothing failed
    clear = tab.locator("#source-guide .clear-failed")
    expect(clear).to_have_text("Clear failed (1)")
    asked = []
    tab.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    clear.click()
    expect(tab.locator("#status-guide")).to_contain_text("1 failed")  # declined: kept
    assert asked and "1 failed file of “Guide”" in asked[0], asked
    tab.once("dialog", lambda d: d.accept())
    clear.click()
    expect(tab.locator(".toast")).to_contain_text("Removed 1 failed file record.")
    expect(clear).to_be_hidden()
    shot(tab, "23-sources-after-clear-failed")

    tab.goto("/account/tokens")
    tab.get_by_label("Name (what it is for)").fill("backup script")
    tab.get_by_role("button", name="Create token").click()
    secret = tab.locator("#new-token-secret").inner_text()
    tab.get_by_role("button", name="Copy token").click()
    expect(tab.locator(".toast")).to_contain_text("Token copied to the clipboard")
    assert tab.evaluate("navigator.clipboard.readText()") == secret
    expect(tab.locator("#tokens time").first).to_have_attribute("data-zoned", "")
    shot(tab, "24-new-token")
    context.close()


def test_a_session_that_ends_while_typing_comes_back_to_the_search(browser, site):
    """The session ends (cookie gone) while typing: the page goes to the login form, and logging
    in brings back the search as typed."""
    context = browser.new_context(base_url=site["url"])
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    _ensure_ready(tab, site)
    login(tab)
    tab.goto("/")
    # every answer refreshes the session cookie (permanent sessions): one still in flight (the
    # favicon, a thumbnail) would bring it back after it is cleared
    tab.wait_for_load_state("networkidle")
    context.clear_cookies()
    # key by key: the first key's request finds the session gone while the rest are typed
    tab.get_by_label("Search your files").press_sequentially("calm sea", delay=60)
    expect(tab).to_have_url(re.compile(r"/login\?next="))
    tab.get_by_label("Username").fill(ADMIN["username"])
    tab.get_by_label("Password").fill(ADMIN["password"])
    tab.get_by_role("button", name="Log in").click()
    expect(tab).to_have_url(re.compile(r"/\?q=calm\+sea(&|$)"))
    expect(tab.locator("#results .result").first).to_be_visible()
    context.close()


def test_document_page_lists_similar_documents(page, site):
    """Once the background phase has read them, a document's page lists the documents closest
    in meaning, and links to them."""
    import time

    _ensure_ready(page, site)
    pets = site["folder"].parent / "pets"
    pets.mkdir(exist_ok=True)
    (pets / "kitten.txt").write_text("The small cat slept on the warm windowsill all afternoon.")
    (pets / "tomcat.txt").write_text("Our old tomcat dozes by the fireplace every evening.")
    (pets / "tax.txt").write_text("Quarterly VAT return: figures, deadlines and penalties.")
    api = page.request
    token = api.post("/api/auth/login", data=ADMIN).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    api.post("/api/sources", headers=headers, data={"name": "Pets", "root_path": str(pets)})
    api.post("/api/sources/pets/reindex?wait=30", headers=headers)
    deadline = time.monotonic() + 120  # the embedding job runs after the scan, at low priority
    while api.get("/api/status/pets", headers=headers).json()["semantic"]["pending"]:
        assert time.monotonic() < deadline, "the embedding phase did not finish"
        time.sleep(1)
    doc = api.post(
        "/api/search", headers=headers, data={"q": "windowsill", "hybrid": {"semantic_ratio": 0}}
    ).json()["results"][0]
    login(page)
    page.goto(f"/documents/{doc['id']}")
    similar = page.locator("[data-similar] a")
    expect(similar.first).to_have_text("tomcat.txt")
    expect(page.locator("[data-similar]")).not_to_contain_text("kitten.txt")
    shot(page, "14-similar-documents")
    similar.first.click()
    expect(page.get_by_role("heading", name="tomcat.txt")).to_be_visible()


def test_a_german_browser_gets_german_pages_and_dates(browser, site):
    """Accept-Language de: the pages are German, and the browser draws dates in German (the
    page's <html lang>) and its own time zone."""
    context = browser.new_context(base_url=site["url"], timezone_id="Europe/Berlin", locale="de-DE")
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    _ensure_ready(tab, site)
    tab.goto("/login")
    expect(tab.locator("html")).to_have_attribute("lang", "de")
    tab.get_by_label("Benutzername").fill(ADMIN["username"])
    tab.get_by_label("Passwort").fill(ADMIN["password"])
    tab.get_by_role("button", name="Anmelden").click()
    expect(tab.get_by_role("button", name="Abmelden")).to_be_visible()
    tab.goto("/status")
    expect(tab.get_by_role("heading", name="Aufträge")).to_be_visible()
    when = tab.locator("#jobs time").first
    expect(when).not_to_have_attribute("data-local", "")
    text = when.inner_text()
    assert re.search(r"\d{1,2}\. \w+\.? \d{4}", text) and re.search(r"MEZ|MESZ", text), text
    shot(tab, "15-status-german")
    context.close()


def test_pictures_show_as_a_grid_with_a_lightbox(browser, site):
    """A search of pictures shows a grid of thumbnails; a tile opens the picture in a lightbox
    (arrow keys step, Escape closes); the folder tree narrows; it fits a 390 px phone."""
    from tests import samples

    album = site["folder"].parent / "album"
    (album / "summer").mkdir(parents=True, exist_ok=True)
    for name, color in (("sea", samples.BLUE), ("sun", samples.RED), ("grass", samples.GREEN)):
        (album / "summer" / f"{name}.jpg").write_bytes(samples.picture((900, 600), color))
    (album / "winter.png").write_bytes(samples.picture((600, 900), samples.MAGENTA, "PNG"))
    errors: list[str] = []
    for width in (1200, 390):
        context = browser.new_context(base_url=site["url"], viewport={"width": width, "height": 844})
        tab = context.new_page()
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.set_default_timeout(WAIT_MS)
        _ensure_ready(tab, site)
        if width == 1200:
            _add_scanned_source(tab, "Album", album)
        login(tab)
        tab.goto("/?type=image&source=album&sort=basename:asc")
        tiles = tab.locator(".result-grid .tile-link")
        expect(tiles).to_have_count(4)
        expect(tab.locator('.view-switch a[data-view="grid"]')).to_have_attribute("aria-current", "true")
        first = tiles.first.locator("img[data-thumbnail]")
        tab.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=first.element_handle())
        if width == 390:  # two a row, nothing wider than the screen
            boxes = [tiles.nth(i).bounding_box() for i in range(2)]
            assert boxes[0]["y"] == boxes[1]["y"] and boxes[1]["x"] + boxes[1]["width"] <= 390
            assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        else:  # the window's width, not the 62rem column; pictures keep their shape
            assert tab.locator("main").bounding_box()["width"] > 1150  # was 62rem (992 px)
            assert tab.locator(".result-grid").bounding_box()["width"] > 900
            loaded = "() => [...document.querySelectorAll('.result-grid img')].every(i => i.complete)"
            tab.wait_for_function(loaded)
            portrait = tab.locator(".tile-link[data-title='winter.png'] img").bounding_box()
            landscape = tab.locator(".tile-link[data-title='sea.jpg'] img").bounding_box()
            assert portrait["height"] > portrait["width"] and landscape["width"] > landscape["height"]
        shot(tab, f"30-grid-{width}", full_page=False)
        tiles.first.click()
        box = tab.locator("dialog.lightbox")
        expect(box).to_be_visible()
        picture = box.locator("img[data-lightbox-media]")
        tab.wait_for_function("img => img.complete && img.naturalWidth > 320", arg=picture.element_handle())
        expect(box.locator("[data-lightbox-title]")).to_have_text("grass.jpg")
        fits = picture.bounding_box()
        assert fits["x"] >= 0 and fits["x"] + fits["width"] <= width
        shot(tab, f"31-lightbox-{width}", full_page=False)
        tab.keyboard.press("ArrowRight")
        expect(box.locator("[data-lightbox-title]")).to_have_text("sea.jpg")
        tab.keyboard.press("ArrowLeft")
        tab.keyboard.press("ArrowLeft")
        expect(box.locator("[data-lightbox-title]")).to_have_text("winter.png")  # wraps around
        tab.keyboard.press("Escape")
        expect(box).to_be_hidden()
        expect(tab).to_have_url(re.compile(r"type[=:]image"))  # still the grid, not a document
        if width == 1200:
            tab.locator('.facet[data-facet="folder"] a', has_text="summer/").click()
            expect(tiles).to_have_count(3)
            expect(tab.locator(".folder-crumbs")).to_contain_text("All folders / summer")
            tab.locator('.view-switch a[data-view="list"]').click()
            expect(tab.locator("#results .result")).to_have_count(3)
        if width == 1200:  # endless scroll: two a page, the next page's tiles follow
            first_page = tab.goto("/?type=image&source=album&sort=basename:asc&limit=2").text()
            assert first_page.count('class="tile"') == 2 and "data-grid-more" in first_page
            tab.mouse.wheel(0, 2000)  # (here the end of the grid is in view at once)
            expect(tiles).to_have_count(4)
            expect(tab.locator("[data-grid-more]")).to_have_count(0)
        assert not errors, errors
        context.close()


LOGBOOK_PAGES = [
    f"Logbook page {n}: "
    + ("the radio was silent all night" if n in (4, 10) else "calm sea and separation of duties")
    for n in range(1, 13)
]


def _open_logbook(page, site) -> None:
    """A 12-page PDF whose pages 4 and 10 say "radio" (the others say "separation"), opened
    from a search for radio."""
    from tests import samples

    _ensure_ready(page, site)
    books = site["folder"].parent / "books"
    books.mkdir(exist_ok=True)
    (books / "radio log.pdf").write_bytes(samples.pdf(LOGBOOK_PAGES))
    _add_scanned_source(page, "Books", books)
    login(page)
    page.goto("/?q=radio")
    page.locator(".result-link", has_text="radio log.pdf").click()


def test_pdf_viewer_scrolls_draws_lazily_and_jumps_between_hits(page, site):
    """pdf.js draws the pages near the view only; "next page with a hit" lands on the next page
    the server found the word on; only the matched word is marked (not `ratio` in `separation`);
    thumbnails and zoom work."""
    _open_logbook(page, site)
    status = page.locator("[data-page-status]")
    expect(status).to_have_text("Page 4 of 12")  # opens on the first page with a hit
    slots = page.locator(".pdf-slot")
    expect(slots).to_have_count(12)
    expect(page.locator(".pdf-slot[data-page='4'][data-drawn]")).to_be_visible()
    expect(page.locator("[data-hit-status]")).to_have_text("Hits on 2 pages")
    assert page.locator(".pdf-slot[data-page='12'][data-drawn]").count() == 0  # not drawn yet
    assert page.locator(".pdf-slot[data-drawn]").count() < 12
    expect(page.locator(".pdf-slot[data-page='4'] mark.pdf-hit")).to_have_count(1)
    shot(page, "40-pdf-viewer", full_page=False)

    page.get_by_role("button", name="Next page with a hit").click()
    expect(status).to_have_text("Page 10 of 12")
    ten = page.locator(".pdf-slot[data-page='10']")
    expect(ten).to_have_attribute("data-drawn", "1")
    expect(ten.locator("mark.pdf-hit")).to_have_count(1)
    _hit_in_view(page, ten)
    expect(page.get_by_role("button", name="Next page with a hit")).to_be_disabled()

    page.locator("[data-pages]").evaluate("el => { el.scrollTop = 0; }")  # scroll to the start
    expect(status).to_have_text("Page 1 of 12")
    expect(page.locator(".pdf-slot[data-page='1']")).to_have_attribute("data-drawn", "1")
    expect(page.locator(".pdf-slot[data-page='1'] mark.pdf-hit")).to_have_count(0)  # separation
    assert page.locator(".pdf-slot[data-page='7'][data-drawn]").count() == 0  # never near the view

    width = page.locator(".pdf-slot[data-page='1']").bounding_box()["width"]
    page.get_by_role("button", name="Zoom in").click()
    expect(page.locator(".pdf-slot[data-page='1']")).to_have_attribute("data-drawn", "1")
    assert page.locator(".pdf-slot[data-page='1']").bounding_box()["width"] > width * 1.2
    page.get_by_role("button", name="Fit").click()

    thumbs = page.locator(".pdf-thumb")
    expect(thumbs).to_have_count(12)
    expect(page.locator(".pdf-thumb.has-hits")).to_have_count(2)
    expect(page.locator(".pdf-thumb[data-page='1'] canvas")).to_be_visible()  # drawn too
    page.get_by_role("button", name="Go to page 7").click()
    expect(status).to_have_text("Page 7 of 12")
    page.get_by_role("button", name="Previous page with a hit").click()
    expect(status).to_have_text("Page 4 of 12")
    page.keyboard.press("n")  # the keys of the text preview's matches
    expect(status).to_have_text("Page 10 of 12")
    page.keyboard.press("Shift+N")
    expect(status).to_have_text("Page 4 of 12")


def _hit_in_view(tab, slot) -> None:
    """The page's first hit is in the upper part of the pages' view, and inside the window."""
    mark = slot.locator("mark.pdf-hit").first.bounding_box()
    view = tab.locator("[data-pages]").bounding_box()
    window = tab.evaluate("window.innerHeight")
    assert view["y"] <= mark["y"] <= view["y"] + view["height"] * 0.6, (mark, view)
    assert 0 <= mark["y"] and mark["y"] + mark["height"] <= window * 0.8, (mark, window)


def test_pdf_viewer_shows_a_hit_at_the_foot_of_a_page_in_the_window(browser, site):
    """A hit near the foot of its page opens inside the window, desktop and phone (the viewer
    once put the page's top at the view's top, the hit at the window's bottom edge or below)."""
    import pymupdf

    folder = site["folder"].parent / "footnotes"
    folder.mkdir(exist_ok=True)
    doc = pymupdf.open()
    for n in range(3):
        page = doc.new_page()
        page.insert_text((72, 100), f"Chapter {n + 1} of the harbour book", fontsize=14)
        if n == 1:
            page.insert_text((72, 790), "the lighthouse keeper wrote this", fontsize=12)
    (folder / "harbour.pdf").write_bytes(doc.tobytes())
    for width, height in ((1366, 768), (390, 844)):
        context = browser.new_context(base_url=site["url"], viewport={"width": width, "height": height})
        tab = context.new_page()
        tab.set_default_timeout(WAIT_MS)
        try:
            _ensure_ready(tab, site)
            if width == 1366:
                _add_scanned_source(tab, "Footnotes", folder)
            login(tab)
            tab.goto("/?q=lighthouse")
            tab.locator(".result-link", has_text="harbour.pdf").click()
            expect(tab.locator("[data-page-status]")).to_have_text("Page 2 of 3")
            slot = tab.locator(".pdf-slot[data-page='2']")
            expect(slot.locator("mark.pdf-hit")).to_have_count(1)
            _hit_in_view(tab, slot)
            shot(tab, f"42-pdf-hit-at-foot-{width}", full_page=False)
        finally:
            context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_pdf_viewer_fits_a_phone(browser, site, scheme):
    """At 390 px, light and dark, the viewer fits the screen: the page is drawn at the screen's
    width, the thumbnails are a strip above it, and nothing scrolls sideways."""
    context = browser.new_context(
        base_url=site["url"], viewport={"width": 390, "height": 844}, color_scheme=scheme, is_mobile=True
    )
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    try:
        _open_logbook(tab, site)
        drawn = tab.locator(".pdf-slot[data-page='4'][data-drawn]")
        expect(drawn).to_be_visible()
        assert drawn.bounding_box()["width"] <= 390
        # the document before the facts: the viewer starts on the first screen (was ~1,000 px down)
        on_page = "el => el.getBoundingClientRect().top + window.scrollY"
        top = tab.locator("[data-pdf-viewer]").evaluate(on_page)
        assert top < 600, top
        facts = tab.locator(".facts").evaluate(on_page)
        assert facts > top
        assert tab.evaluate("document.documentElement.scrollWidth") <= 390
        expect(tab.get_by_role("button", name="Next page with a hit")).to_be_visible()
        tab.get_by_role("button", name="Next page with a hit").click()
        expect(tab.locator("[data-page-status]")).to_have_text("Page 10 of 12")
        shot(tab, f"41-pdf-viewer-phone-{scheme}", full_page=False)
    finally:
        context.close()


CORPUS_PDFS = (
    "sist2-pdf1.pdf",  # 16 pages
    "pymupdf-chinese-tables.pdf",  # CJK text: CMaps
    "pymupdf-2201.00069.pdf",
    "tika-testAnnotations.pdf",
    "tika-testPDF_acroform3.pdf",  # a form: drawn, never run
)


def test_pdf_viewer_draws_real_pdfs_without_errors(page, site):
    """PDFs of the real corpus (fonts, CMaps, annotations, a form) open in the viewer with no
    console error (no CSP violation, no missing asset); the last page of a long one is drawn
    once scrolled to."""
    import shutil

    from tests.conftest import require_corpus

    folder = require_corpus() / "real" / "pdf"
    _ensure_ready(page, site)
    shelf = site["folder"].parent / "shelf"
    shelf.mkdir(exist_ok=True)
    for name in CORPUS_PDFS:
        shutil.copy(folder / name, shelf / name)
    _add_scanned_source(page, "Shelf", shelf)
    login(page)
    token = page.request.post("/api/auth/login", data=ADMIN).json()["access_token"]
    found = page.request.post(
        "/api/search", headers={"Authorization": f"Bearer {token}"}, data={"q": "source:shelf", "limit": 20}
    ).json()["results"]
    ids = {r["basename"]: r["id"] for r in found}
    for name in CORPUS_PDFS:
        page.goto(f"/documents/{ids[name]}")
        expect(page.locator(".pdf-slot[data-page='1'][data-drawn]")).to_be_visible(timeout=WAIT_MS)
        expect(page.locator(".pdf-thumb[data-page='1'] canvas")).to_be_visible()
    page.goto(f"/documents/{ids['sist2-pdf1.pdf']}")
    expect(page.locator(".pdf-slot[data-page='1'][data-drawn]")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("[data-page-status]")).to_have_text("Page 1 of 16")
    page.locator("[data-pages]").evaluate("el => { el.scrollTop = el.scrollHeight; }")
    expect(page.locator(".pdf-slot[data-page='16']")).to_have_attribute("data-drawn", "1")
    expect(page.locator("[data-page-status]")).to_have_text("Page 16 of 16")
    shot(page, "42-pdf-viewer-corpus", full_page=False)


def test_a_message_reads_as_mail_and_an_archive_as_a_tree(browser, site):
    """A message's page: its header block with the sent time in the reader's zone (Tokyo), the
    body with the hit marked, its attachments as links; an archive's page: its members as a
    folder tree of links."""
    import io
    import time
    import zipfile
    from email.message import EmailMessage

    post = site["folder"].parent / "post"
    post.mkdir(exist_ok=True)
    msg = EmailMessage()
    msg["Subject"], msg["From"] = "Lamp oil order", "Harbour Master <master@example.org>"
    msg["To"], msg["Cc"] = "keeper@example.org", "boatman@example.org"
    msg["Date"] = "Tue, 03 Oct 2023 10:00:00 +0000"
    msg.set_content("Please send two barrels of lamp oil before the storm season.")
    msg.add_attachment("barrels: 2\nwicks: 40", subtype="plain", filename="order.txt")
    (post / "order.eml").write_bytes(bytes(msg))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("charts/north/reef.txt", "reef chart notes")
        archive.writestr("charts/south.txt", "south chart notes")
        archive.writestr("readme.txt", "chart bundle")
    (post / "charts.zip").write_bytes(buf.getvalue())

    context = browser.new_context(base_url=site["url"], timezone_id="Asia/Tokyo", locale="en-US")
    tab = context.new_page()
    tab.set_default_timeout(WAIT_MS)
    api = tab.request
    api.post("/api/auth/setup", data=ADMIN)  # when the first-session test did not run first
    token = api.post("/api/auth/login", data=ADMIN).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    api.post("/api/sources", headers=headers, data={"name": "Post", "root_path": str(post)})
    api.post("/api/sources/post/reindex", headers=headers)
    deadline = time.monotonic() + 120  # the worker process may still be starting
    while True:
        state = api.get("/api/status/post", headers=headers).json()
        if state.get("state") == "idle" and state.get("last_indexed_at"):
            break
        assert time.monotonic() < deadline, state
        time.sleep(0.5)
    login(tab)
    tab.goto("/?q=barrels")
    tab.locator(".result-link", has_text="Lamp oil order").first.click()  # a message by its subject
    headers = tab.locator("[data-mail-headers]")
    expect(headers).to_contain_text("Harbour Master <master@example.org>")
    expect(headers).to_contain_text("boatman@example.org")
    expect(headers.locator("time")).to_have_text(re.compile(r"Oct 3, 2023, 19:00 GMT\+9"))
    expect(tab.locator("#preview-text em").first).to_have_text("barrels")
    shot(tab, "33-mail-as-mail")
    tab.locator("[data-attachments]").get_by_role("link", name="order.txt").click()
    expect(tab.get_by_role("heading", name="order.txt")).to_be_visible()
    expect(tab.locator("#doc-container")).to_contain_text("order.eml")

    tab.goto("/?q=charts")
    tab.locator(".result-link", has_text="charts.zip").first.click()
    tree = tab.locator("[data-member-tree]")
    expect(tree.locator("summary").first).to_have_text("charts/")
    expect(tree.locator("details details summary")).to_have_text("north/")
    shot(tab, "34-archive-tree")
    tree.get_by_role("link", name="reef.txt").click()
    expect(tab.locator("#preview-text")).to_contain_text("reef chart notes")
    context.close()


def test_a_scan_photo_slides_and_comic_read_as_such(page, site):
    """A scan with the searched word boxed where it is written (once OCR has read it), a
    photo's details in one table, a deck one slide at a time with its picture, a comic a page
    at a time."""
    import io

    from pptx import Presentation

    from tests import samples
    from tests.ocr_samples import image_bytes, page_image

    folder = site["folder"].parent / "media"
    folder.mkdir(exist_ok=True)
    lines = [["Minutes", "of", "the", "harbour", "board"], ["the", "cormorant", "nests", "were", "counted"]]
    (folder / "minutes.png").write_bytes(image_bytes(page_image(lines), "PNG"))
    corpus = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "real" / "image"
    if (corpus / "tika-testJPEG_GEO.jpg").exists():
        (folder / "birds.jpg").write_bytes((corpus / "tika-testJPEG_GEO.jpg").read_bytes())
    deck = Presentation()
    for title, body in (("Opening", "Welcome aboard"), ("Budget", "The forecast for 2027")):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text, slide.placeholders[1].text = title, body
        slide.shapes.add_picture(io.BytesIO(samples.picture((320, 200), samples.BLUE, "PNG")), 0, 0)
    buf = io.BytesIO()
    deck.save(buf)
    (folder / "talk.pptx").write_bytes(buf.getvalue())
    (folder / "story.cbz").write_bytes(samples.cbz([samples.picture((300, 450), samples.RED, "PNG")] * 3))
    _ensure_ready(page, site)
    api = page.request
    token = api.post("/api/auth/login", data=ADMIN).json()["access_token"]
    headers = {"Authorization": f"Bearer {token}"}
    api.post("/api/sources", headers=headers, data={"name": "Media", "root_path": str(folder)})
    api.post("/api/sources/media/reindex", headers=headers)  # the worker may be busy: polled below
    login(page)
    names = ["minutes.png", "talk.pptx", "story.cbz"] + (
        ["birds.jpg"] if (folder / "birds.jpg").exists() else []
    )
    ids: dict[str, str] = {}
    deadline = datetime.now() + timedelta(seconds=180)
    while len(ids) < len(names):
        assert datetime.now() < deadline, f"not indexed: {set(names) - set(ids)}"
        page.wait_for_timeout(500)
        for name in set(names) - set(ids):
            hits = api.get(f"/?q={name.split('.')[0]}&source=media").text()
            found = re.search(r'href="/documents/([^"?]+)[^"]*"[^>]*>' + re.escape(name), hits)
            if found:
                ids[name] = found.group(1)
    deadline = datetime.now() + timedelta(seconds=180)  # the worker's OCR queue reads the scan
    while "data-scan-hit" not in api.get(f"/documents/{ids['minutes.png']}?q=cormorant").text():
        assert datetime.now() < deadline, "the scan was not read by OCR"
        page.wait_for_timeout(1000)
    page.goto(f"/documents/{ids['minutes.png']}?q=cormorant")
    picture = page.locator(".scan-frame img")
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=picture.element_handle())
    mark, frame = page.locator("[data-scan-hit]").first.bounding_box(), picture.bounding_box()
    assert frame["x"] <= mark["x"] and mark["x"] + mark["width"] <= frame["x"] + frame["width"]
    assert frame["y"] + frame["height"] * 0.4 < mark["y"] < frame["y"] + frame["height"] * 0.8  # line 2 of 2
    shot(page, "50-scan-with-hits", full_page=False)
    if "birds.jpg" in ids:
        page.goto(f"/documents/{ids['birds.jpg']}")
        expect(page.locator("[data-photo-facts] tr[data-fact='camera']")).to_contain_text("Canon EOS 40D")
        expect(page.locator("[data-photo-facts] tr[data-fact='taken']")).to_contain_text("2009")
        shot(page, "51-photo-table")
    page.goto(f"/documents/{ids['talk.pptx']}?q=forecast")
    expect(page.locator("[data-slide]")).to_have_attribute("data-slide", "2")
    page.wait_for_function("() => document.querySelector('[data-slide-picture]').naturalWidth > 0")
    shot(page, "52-slide")
    page.goto(f"/documents/{ids['story.cbz']}")
    page.locator(".comic-page a[rel='next']").click()
    expect(page.locator("[data-comic-page]")).to_have_attribute("data-comic-page", "2")
    page.wait_for_load_state("load")  # app.js listens for the keys
    page.keyboard.press("ArrowRight")  # the arrow keys turn the pages
    expect(page.locator("[data-comic-page]")).to_have_attribute("data-comic-page", "3")
    page.wait_for_load_state("load")
    page.keyboard.press("ArrowLeft")
    expect(page.locator("[data-comic-page]")).to_have_attribute("data-comic-page", "2")
    page.wait_for_function("() => document.querySelector('[data-comic-page]').naturalWidth > 0")
    shot(page, "53-comic-page")
