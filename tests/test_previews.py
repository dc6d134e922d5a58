"""Image previews of hostile files: bounded by pixels, memory and time, never a 500, web memory kept."""

from __future__ import annotations

import io
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest
import requests
from PIL import Image

from tests.conftest import ADMIN, app_settings, fresh_app
from tests.test_crash import Gunicorn
from tests.ui_helpers import login


def _png(width: int, height: int, mode: str = "RGB") -> bytes:
    """A solid PNG: a few hundred KB on disk however many pixels it declares."""
    buf = io.BytesIO()
    Image.new(mode, (width, height), (10, 120, 200)[: len(mode)] or 0).save(buf, "PNG")
    return buf.getvalue()


def _jpeg(width: int, height: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), (90, 160, 40)).save(buf, "JPEG", quality=70)
    return buf.getvalue()


def _heic(width: int, height: int) -> bytes:
    """A real HEIC file, encoded by libheif through pillow-heif."""
    import pillow_heif

    pillow_heif.register_heif_opener()
    img = Image.new("RGB", (width, height))
    img.paste((220, 40, 40), (0, 0, width // 2, height))  # left half red, right half black
    buf = io.BytesIO()
    img.save(buf, "HEIF", quality=90)
    return buf.getvalue()


@pytest.fixture(scope="module")
def hostile_images() -> dict[str, bytes]:
    """Every image is named after what it is; made once per module (the big ones take seconds)."""
    jpeg = _jpeg(1600, 1200)
    return {
        "bomb 12000x12000.png": _png(12000, 12000),
        "over the cap 8000x7000.png": _png(8000, 7000),
        "truncated photo.jpg": jpeg[: len(jpeg) // 2],
        "garbage picture.png": b"\x89PNG\r\n\x1a\n" + os.urandom(4000),
        "not an image.gif": b"GIF89a" + b"\x00" * 20,
        "huge camera 9000x6000.jpg": _jpeg(9000, 6000),
        "phone picture.heic": _heic(640, 480),
        "ordinary 3000x2000.png": _png(3000, 2000, "RGBA"),
        "near the cap 7000x7000.png": _png(7000, 7000),
    }


@pytest.fixture(scope="module")
def scanned(tmp_path_factory, redis_url, database_url, sqlite_template, hostile_images):
    """One app over a scanned source of the hostile images, for the whole module: the scan
    draws their thumbnails (seconds of decoding each time) and every test here only reads
    what it made. Yields the app, the admin's token and each file name's document id."""
    from rq import SimpleWorker

    from webapp.runtime import get_queue, get_redis

    top = tmp_path_factory.mktemp("previews")
    data, roots = top / "data", top / "roots"
    data.mkdir()
    (roots / "pics").mkdir(parents=True)
    for name, content in hostile_images.items():
        (roots / "pics" / name).write_bytes(content)
    settings = app_settings(data, roots, redis_url, database_url)
    with fresh_app(settings, redis_url, database_url, sqlite_template) as app:
        client = app.test_client()
        token = client.post("/api/auth/setup", json=ADMIN).get_json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        src = client.post(
            "/api/sources", headers=auth, json={"name": "Pics", "root_path": str(roots / "pics")}
        ).get_json()
        assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
        with app.app_context():  # a real RQ worker, burst (conftest's run_jobs)
            SimpleWorker([get_queue(app)], connection=get_redis(app)).work(
                burst=True, logging_level="WARNING"
            )
        ids = {}
        for name in hostile_images:
            word = name.split()[0]
            hits = client.post("/api/search", headers=auth, json={"q": word}).get_json()["results"]
            ids[name] = next(h["id"] for h in hits if h["basename"] == name)
        yield app, token, ids


@pytest.fixture
def app(scanned):
    return scanned[0]


@pytest.fixture
def token(scanned):
    return scanned[1]


@pytest.fixture
def previews(scanned):
    """Each file name of the scanned source -> its document id."""
    return scanned[2]


def _rss_mb() -> float:
    return psutil.Process().memory_info().rss / 2**20


def test_over_limit_and_broken_images_get_a_clear_422(client, auth, previews):
    expected = {
        "bomb 12000x12000.png": "too large to preview (12000x12000",
        "over the cap 8000x7000.png": "too large to preview (8000x7000",
        "truncated photo.jpg": "cannot be read",
        "garbage picture.png": "cannot be read",
        "not an image.gif": "cannot be read",
    }
    before = _rss_mb()
    for name, words in expected.items():
        resp = client.get(f"/api/documents/{previews[name]}/preview", headers=auth)
        assert resp.status_code == 422, (name, resp.status_code)
        assert set(resp.get_json()) == {"detail"} and words in resp.get_json()["detail"], name
    assert _rss_mb() - before < 30  # nothing was decoded in this process


def test_big_jpeg_is_decoded_reduced_and_heic_is_previewed(app, client, auth, previews):
    resp = client.get(f"/api/documents/{previews['huge camera 9000x6000.jpg']}/preview", headers=auth)
    assert resp.status_code == 200 and resp.mimetype == "image/jpeg"
    assert Image.open(io.BytesIO(resp.data)).size == (2048, 1365)  # 54 Mpx, reduced on decode
    heic = client.get(f"/api/documents/{previews['phone picture.heic']}/preview", headers=auth)
    assert heic.status_code == 200 and heic.mimetype == "image/jpeg"
    img = Image.open(io.BytesIO(heic.data)).convert("RGB")
    assert img.size == (640, 480)
    red, black = img.getpixel((100, 240)), img.getpixel((540, 240))
    assert red[0] > 180 and red[1] < 90 and max(black) < 40  # the real pixels, decoded
    png = client.get(f"/api/documents/{previews['ordinary 3000x2000.png']}/preview", headers=auth)
    assert png.status_code == 200 and png.mimetype == "image/png"
    assert Image.open(io.BytesIO(png.data)).size == (2048, 1365)


def test_the_decoding_child_is_capped_in_memory_and_time(app, client, auth, previews, monkeypatch):
    url = f"/api/documents/{previews['ordinary 3000x2000.png']}/preview"
    monkeypatch.setitem(app.config, "PREVIEW_MEMORY_MB", 8)  # 3000x2000 RGBA needs 24 MB
    resp = client.get(url, headers=auth)
    assert resp.status_code == 422 and "too much memory" in resp.get_json()["detail"]
    app.config["PREVIEW_MEMORY_MB"] = 512
    monkeypatch.setitem(app.config, "PREVIEW_TIMEOUT", 0.001)
    slow = client.get(url, headers=auth)
    assert slow.status_code == 422 and "longer than" in slow.get_json()["detail"]
    app.config["PREVIEW_TIMEOUT"] = 20.0
    assert client.get(url, headers=auth).status_code == 200


def test_ui_shows_a_note_instead_of_a_broken_image(app, previews):
    ui_client = app.test_client()
    assert login(ui_client).status_code == 302
    bomb = previews["bomb 12000x12000.png"]
    page = ui_client.get(f"/documents/{bomb}")
    assert page.status_code == 200 and f'src="/documents/{bomb}/image"' in page.text
    image = ui_client.get(f"/documents/{bomb}/image")
    assert image.status_code == 422 and "too large to preview" in image.text
    heic = ui_client.get(f"/documents/{previews['phone picture.heic']}/image")
    assert heic.status_code == 200 and heic.mimetype == "image/jpeg"


def test_preview_arguments_are_checked_after_authentication(client, auth, previews):
    url = f"/api/documents/{previews['phone picture.heic']}/preview?page=-5"
    anonymous = client.get(url)
    assert anonymous.status_code == 401 and set(anonymous.get_json()) == {"detail"}
    assert client.get(url, headers=auth).status_code == 400


def _hammer(url: str, token: str, n: int = 8) -> tuple[list[int], float]:
    """n requests at once; their status codes and the seconds until the last answered."""
    headers = {"Authorization": f"Bearer {token}"}
    started = time.monotonic()
    with ThreadPoolExecutor(n) as pool:
        codes = list(
            pool.map(lambda _: requests.get(url, headers=headers, timeout=120).status_code, range(n))
        )
    return codes, time.monotonic() - started


class _PeakSampler:
    """Highest RSS of a process, and of it with its children, sampled every 20 ms."""

    def __init__(self, proc: psutil.Process) -> None:
        self.proc, self.worker, self.tree = proc, 0.0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            try:
                own = self.proc.memory_info().rss
                kids = sum(c.memory_info().rss for c in self.proc.children(recursive=True))
            except psutil.Error:  # a child exited between listing and reading
                continue
            self.worker = max(self.worker, own / 2**20)
            self.tree = max(self.tree, (own + kids) / 2**20)

    def __enter__(self) -> _PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


@pytest.mark.slow
def test_hostile_previews_leave_gunicorn_memory_where_it_was(app, token, previews):
    """Eight bombs, then eight 49-megapixel PNGs, at once over real HTTP against gunicorn."""
    web = Gunicorn(app)
    web.env.update(WEB_CONCURRENCY="1", PREVIEW_TIMEOUT="90")  # 2 cores shared: queueing is slow
    web.start()
    try:
        worker = psutil.Process(web.proc.pid).children()[0]
        base = f"{web.url}/api/documents/"
        requests.get(
            base + previews["phone picture.heic"] + "/preview",
            timeout=30,
            headers={"Authorization": f"Bearer {token}"},
        )  # fork server up, as in use
        before = worker.memory_info().rss / 2**20
        with _PeakSampler(worker) as peak:
            bombs, bombs_s = _hammer(base + previews["bomb 12000x12000.png"] + "/preview", token)
            big, big_s = _hammer(base + previews["near the cap 7000x7000.png"] + "/preview", token)
        after = worker.memory_info().rss / 2**20
        print(
            f"\n8 bombs in {bombs_s:.2f} s, 8 x 49 Mpx in {big_s:.2f} s; worker RSS "
            f"{before:.0f} -> peak {peak.worker:.0f} -> {after:.0f} MB; worker and its "
            f"preview children together at most {peak.tree:.0f} MB"
        )
        assert bombs == [422] * 8 and big == [200] * 8
        assert after - before < 40
    finally:
        web.stop()


FAKE_NOTICE = """# Readme

<span class="alert alert-error">Your session expired: log in again at evil.example</span>

<div class="alert alert-success" id="x">Saved</div>
<p class="error-page"><code class="alert language-py">print(1)</code></p>

```python
print("fenced")
```

![a diagram](d.png)
"""


def test_rendered_markdown_cannot_use_the_sites_own_classes():
    """A README with `class="alert alert-error"` would draw a notice that looks like the
    service's own: every class a document names is prefixed, none is one of our CSS's."""
    import re

    from tests.conftest import REPO
    from webapp.previews.markdown import render_markdown

    ours = set()
    for css in (REPO / "static" / "css").glob("*.css"):
        ours |= set(re.findall(r"\.([A-Za-z][\w-]*)", css.read_text()))
    assert {"alert", "alert-error", "alert-success"} <= ours
    html = render_markdown(FAKE_NOTICE)
    used = {name for value in re.findall(r'class="([^"]*)"', html) for name in value.split()}
    assert used and not used & ours, used & ours
    assert "Your session expired" in html  # the text stays, only the styling is gone
    assert 'class="md-language-python"' in html and '<span class="md-image">[a diagram]' in html
