"""Attacks a client can make: bad tokens on every endpoint, download links, swapped symlinks,
probing outside the allowed roots, spoofed X-Forwarded-For, markup in files, headers and CSRF."""

from __future__ import annotations

import base64
import json
import os
import re
import time
from datetime import timedelta
from html.parser import HTMLParser

import jwt as pyjwt
import pytest

from tests.ui_helpers import csrf, setup_admin

PAYLOADS = {
    "script.txt": "<script>alert('pwned')</script> zanzibar script payload",
    "img.txt": 'zanzibar <img src=x onerror="alert(1)"> image payload',
    "em.txt": 'zanzibar <em onmouseover="alert(1)">hover</em> and </em><b>closing</b> payload',
    "entity.txt": "zanzibar &lt;script&gt; already escaped &amp; payload",
    "<svg onload=alert(1)>.txt": "zanzibar named after markup",
    "front.md": "---\ntitle: <iframe src=//evil.example></iframe>\n---\nzanzibar front matter",
}


def _doc_ids(client, auth, q: str = "zanzibar") -> dict[str, str]:
    body = client.post("/api/search", headers=auth, json={"q": q, "limit": 100}).get_json()
    return {r["basename"]: r["id"] for r in body["results"]}


@pytest.fixture
def indexed(client, auth, make_tree, make_source, run_jobs):
    """A scanned source `docs` over PAYLOADS plus a small PNG; returns (root, {basename: id})."""
    from PIL import Image

    root = make_tree("docs", PAYLOADS)
    Image.new("RGB", (40, 20), (0, 90, 200)).save(root / "zanzibar-photo.png")
    make_source(root, id="docs")
    assert client.post("/api/sources/docs/reindex", headers=auth).status_code == 200
    run_jobs()
    ids = _doc_ids(client, auth)
    assert len(ids) == len(PAYLOADS) + 1, ids
    return root, ids


# -- tokens on every non-public endpoint ----------------------------------------------------------

PUBLIC = {
    "GET /api/auth/status",
    "POST /api/auth/setup",
    "POST /api/auth/login",
    "GET /api/health",
    "GET /api/documents/{doc_id}/download",
}


def _secured_operations(client) -> list[tuple[str, str]]:
    """(method, path) of every secured operation; the public ones must be exactly PUBLIC."""
    spec = client.get("/openapi.json").get_json()
    ops, public = [], set()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            label = f"{method.upper()} {path}"
            (ops.append((method, path)) if op.get("security") else public.add(label))
    assert public == PUBLIC, "the set of public endpoints changed"
    assert len(ops) >= 16
    return ops


def _forge(claims: dict, key: str, alg: str = "HS256") -> str:
    return pyjwt.encode(claims, key, algorithm=alg)


def _claims(app, **changes) -> dict:
    now = int(time.time())
    claims = {
        "sub": "1",
        "jti": os.urandom(8).hex(),
        "iat": now,
        "nbf": now,
        "exp": now + 3600,
        "type": "access",
        "fresh": False,
    }
    claims.update(changes)
    return claims


def _bad_token(kind: str, app, client, token: str, doc_id: str) -> str:
    """A token of the given kind of wrongness."""
    secret = app.config["SECRET_KEY"]
    if kind == "expired":
        return _forge(
            _claims(app, iat=int(time.time()) - 7200, nbf=int(time.time()) - 7200, exp=int(time.time()) - 60),
            secret,
        )
    if kind == "revoked":
        assert (
            client.post("/api/auth/logout", headers={"Authorization": f"Bearer {token}"}).status_code == 200
        )
        return token
    if kind == "tampered":
        head, body, sig = token.split(".")
        claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        claims["sub"] = "2"
        forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
        return f"{head}.{forged}.{sig}"
    if kind == "wrong-key":
        return _forge(_claims(app), "not-the-secret-" * 4)
    if kind == "alg-none":
        return _forge(_claims(app), "", alg="none")
    if kind == "refresh-type":
        return _forge(_claims(app, type="refresh"), secret)
    if kind == "download-token":
        return (
            client.post(
                f"/api/documents/{doc_id}/download-link", headers={"Authorization": f"Bearer {token}"}
            )
            .get_json()["url"]
            .split("token=")[1]
        )
    if kind == "unknown-user":
        return _forge(_claims(app, sub="999"), secret)
    if kind == "garbage":
        return "not.a.jwt"
    raise AssertionError(kind)


TOKEN_KINDS = [
    "missing",
    "expired",
    "revoked",
    "tampered",
    "wrong-key",
    "alg-none",
    "refresh-type",
    "download-token",
    "unknown-user",
    "garbage",
]


@pytest.mark.parametrize("kind", TOKEN_KINDS)
def test_every_secured_endpoint_refuses_bad_tokens(app, client, token, auth, indexed, kind):
    _, ids = indexed
    doc_id = ids["script.txt"]
    bad = None if kind == "missing" else _bad_token(kind, app, client, token, doc_id)
    headers = {"Authorization": f"Bearer {bad}"} if bad else {}
    for method, path in _secured_operations(client):
        url = (
            path.replace("{source_id}", "docs")
            .replace("{doc_id}", doc_id)
            .replace("{user_id}", "1")
            .replace("{token_id}", "1")
            .replace("{saved_id}", "1")
        )
        resp = client.open(
            url, method=method.upper(), headers=headers, json={"q": "zanzibar", "name": "x", "root_path": "/"}
        )
        assert resp.status_code == 401, (kind, method, url, resp.get_json())
        assert set(resp.get_json()) == {"detail"}
    # nothing was done on the attacker's behalf
    good = {"Authorization": f"Bearer {token}"} if kind != "revoked" else None
    if good:
        assert client.get("/api/sources/docs", headers=good).status_code == 200


def test_a_valid_token_is_accepted_on_the_same_endpoints(client, auth, indexed):
    """The refusals above are about the token: the same calls with a good one get through."""
    _, ids = indexed
    for method, path in _secured_operations(client):
        if method != "get":
            continue
        url = (
            path.replace("{source_id}", "docs")
            .replace("{doc_id}", ids["script.txt"])
            .replace("{user_id}", "1")
        )
        resp = client.get(url, headers=auth)
        if url.endswith("/thumbnail"):  # past the token: a text file has no thumbnail
            assert resp.status_code == 404 and "no thumbnail" in resp.get_json()["detail"]
            continue
        assert resp.status_code == 200, url


# -- download links ------------------------------------------------------------------------------


def _link(client, auth, doc_id: str) -> str:
    resp = client.post(f"/api/documents/{doc_id}/download-link", headers=auth)
    assert resp.status_code == 200
    return resp.get_json()["url"]


def test_download_tokens_expire_and_are_bound_to_one_document(app, client, auth, indexed):
    root, ids = indexed
    url = _link(client, auth, ids["script.txt"])
    token = url.split("token=")[1]
    assert client.get(url).status_code == 200
    other = client.get(f"/api/documents/{ids['img.txt']}/download?token={token}")
    assert other.status_code == 403 and b"image payload" not in other.data
    app.config["DOWNLOAD_LINK_SECONDS"] = 1
    short = _link(client, auth, ids["script.txt"])
    time.sleep(2.1)
    late = client.get(short)
    assert late.status_code == 401 and b"zanzibar" not in late.data
    assert "expired" in late.get_json()["detail"]  # (was also test_documents.py's, merged here)
    app.config["SECRET_KEY"] = "rotated-" * 8  # a link signed with an old key is void
    assert client.get(url).status_code == 401


@pytest.mark.pg
def test_download_link_dies_with_its_user(app, client, auth, indexed):
    _, ids = indexed
    url = _link(client, auth, ids["script.txt"])
    from webapp.extensions import db
    from webapp.models import User

    with app.app_context():
        db.session.query(User).delete()
        db.session.commit()
    resp = client.get(url)
    assert resp.status_code == 401 and b"zanzibar" not in resp.data


# -- symlinks swapped in after indexing ----------------------------------------------------------


def test_file_swapped_for_a_symlink_outside_is_refused(client, auth, indexed, scratch):
    root, ids = indexed
    secret = scratch / "secret.txt"
    secret.write_text("TOP-SECRET outside bytes")
    (root / "script.txt").unlink()
    (root / "script.txt").symlink_to(secret)
    resp = client.get(_link(client, auth, ids["script.txt"]))
    assert resp.status_code == 403 and b"TOP-SECRET" not in resp.data
    preview = client.get(f"/api/documents/{ids['script.txt']}/preview", headers=auth)
    assert b"TOP-SECRET" not in preview.data  # the text preview shows only what was indexed

    from PIL import Image

    Image.new("RGB", (30, 30), (255, 0, 0)).save(scratch / "outside.png")
    (root / "zanzibar-photo.png").unlink()
    (root / "zanzibar-photo.png").symlink_to(scratch / "outside.png")
    img = client.get(f"/api/documents/{ids['zanzibar-photo.png']}/preview", headers=auth)
    assert img.status_code == 403 and not img.data.startswith(b"\x89PNG")


def _scanned_report(client, auth, make_tree, make_source, run_jobs, name, relpath, word):
    """A source `name` holding `relpath` ("<word> inside"), scanned; its root, the report's
    document id and a download link to it."""
    root = make_tree(name, {relpath: f"{word} inside"})
    make_source(root, id=name)
    client.post(f"/api/sources/{name}/reindex", headers=auth)
    run_jobs()
    doc_id = _doc_ids(client, auth, word)["report.txt"]
    return root, doc_id, _link(client, auth, doc_id)


def test_directory_swapped_for_a_symlink_outside_is_refused(
    client, auth, make_tree, make_source, run_jobs, scratch
):
    root, _, url = _scanned_report(
        client, auth, make_tree, make_source, run_jobs, "nested", "inner/report.txt", "quokka"
    )
    (scratch / "inner").mkdir()
    (scratch / "inner" / "report.txt").write_text("quokka OUTSIDE secret")
    (root / "inner").rename(root / "moved")
    (root / "inner").symlink_to(scratch / "inner")
    resp = client.get(url)
    assert resp.status_code == 403 and b"OUTSIDE" not in resp.data


# -- nothing disclosed outside the allowed roots -------------------------------------------------


def _outside_pairs(roots, scratch) -> list[tuple[str, str]]:
    """(existing, missing) paths outside the allowed roots, reached in several ways."""
    (scratch / "real-dir").mkdir()
    (scratch / "real-file").write_text("x")
    (roots / "link-out").symlink_to(scratch / "real-dir")
    (roots / "link-missing").symlink_to(scratch / "no-such-dir")
    return [
        ("/etc", "/etc-does-not-exist"),
        ("/etc/passwd", "/etc/no-such-file"),
        (str(scratch / "real-dir"), str(scratch / "no-such-dir")),
        (str(scratch / "real-file"), str(scratch / "no-such-file")),
        (f"{roots}/../../{scratch.name}", f"{roots}/../../no-such-{scratch.name}"),
        (str(roots / "link-out"), str(roots / "link-missing")),
    ]


def _masked(body: dict, *paths: str) -> str:
    text = json.dumps(body, sort_keys=True)
    for path in sorted(paths, key=len, reverse=True):
        text = text.replace(json.dumps(path)[1:-1], "<PATH>")
    return text


def test_test_path_and_source_creation_disclose_nothing_outside(client, auth, roots, scratch):
    for existing, missing in _outside_pairs(roots, scratch):
        answers = []
        for path in (existing, missing):
            probe = client.post("/api/sources/test-path", headers=auth, json={"root_path": path})
            assert probe.status_code == 200
            body = probe.get_json()
            assert not (body["exists"] or body["is_directory"] or body["readable"]), body
            created = client.post("/api/sources", headers=auth, json={"name": "probe", "root_path": path})
            assert created.status_code == 400
            answers.append((_masked(body, existing, missing), _masked(created.get_json(), existing, missing)))
        assert answers[0] == answers[1], (existing, missing, answers)
    assert client.get("/api/sources", headers=auth).get_json() == []


def test_test_path_does_report_inside_the_roots(client, auth, roots):
    """The same probe is informative inside the roots (so the check above can fail)."""
    (roots / "here").mkdir()
    inside = client.post(
        "/api/sources/test-path", headers=auth, json={"root_path": str(roots / "here")}
    ).get_json()
    assert inside["ok"] and inside["exists"] and inside["is_directory"]
    missing = client.post(
        "/api/sources/test-path", headers=auth, json={"root_path": str(roots / "nope")}
    ).get_json()
    assert not missing["exists"] and missing["inside_allowed_roots"]


# -- rate limit key ------------------------------------------------------------------------------


def _failed_logins(client, n: int, peer: str, forwarded: list[str]) -> list[int]:
    codes = []
    for i in range(n):
        headers = {"X-Forwarded-For": forwarded[i % len(forwarded)]} if forwarded else {}
        resp = client.post(
            "/api/auth/login",
            json={"username": "admin", "password": "wrong-pw"},
            headers=headers,
            environ_base={"REMOTE_ADDR": peer},
        )
        codes.append(resp.status_code)
    return codes


def test_forwarded_for_from_an_untrusted_peer_is_ignored(client, token):
    spoofed = [f"203.0.113.{i}" for i in range(1, 10)]
    codes = _failed_logins(client, 7, "198.51.100.7", spoofed)
    assert codes[:5] == [401] * 5 and codes[5:] == [429, 429]
    # another real peer has its own budget
    assert _failed_logins(client, 1, "198.51.100.8", []) == [401]


def test_forwarded_for_from_a_trusted_proxy_is_believed(app, client, token):
    app.config["TRUSTED_PROXIES"] = ["10.0.0.0/8"]
    codes = _failed_logins(client, 7, "10.1.2.3", [f"203.0.113.{i}" for i in range(1, 10)])
    assert 429 not in codes  # each forwarded client has its own budget
    again = _failed_logins(client, 7, "10.1.2.3", ["192.0.2.55, 10.9.9.9"])
    assert again[5:] == [429, 429]  # the rightmost untrusted hop is the key


# -- security headers ----------------------------------------------------------------------------


def _csp(resp) -> dict[str, list[str]]:
    policy = resp.headers.get("Content-Security-Policy", "")
    out = {}
    for part in policy.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


def _assert_headers(resp, what: str) -> None:
    csp = _csp(resp)
    assert csp.get("default-src") == ["'self'"], (what, csp)
    assert csp.get("frame-ancestors") == ["'none'"], what
    for directive in ("script-src", "style-src", "img-src", "connect-src", "font-src"):
        for source in csp.get(directive, csp["default-src"]):
            assert source in {"'self'", "'unsafe-inline'", "data:", "blob:"}, (what, directive)
            assert not (directive == "script-src" and source == "'unsafe-inline'"), what
    assert "'unsafe-eval'" not in resp.headers["Content-Security-Policy"]
    assert resp.headers.get("X-Content-Type-Options") == "nosniff", what
    assert resp.headers.get("Referrer-Policy") in {
        "no-referrer",
        "same-origin",
        "strict-origin-when-cross-origin",
        "strict-origin",
    }, what


def test_security_headers_on_api_ui_and_docs(client, auth, indexed):
    _, ids = indexed
    pages = [
        "/api/health",
        "/api/sources",
        "/api/nope",
        "/openapi.json",
        "/docs",
        "/redoc",
        "/login",
        "/",
        "/no-such-page",
        "/static/css/app.css",
    ]
    for path in pages:
        _assert_headers(client.get(path), path)
    for path in (
        "/api/sources",
        f"/api/documents/{ids['script.txt']}/preview",
        f"/api/documents/{ids['zanzibar-photo.png']}/preview",
    ):
        _assert_headers(client.get(path, headers=auth), path)
    _assert_headers(client.get(_link(client, auth, ids["script.txt"])), "download")


def test_docs_pages_load_only_our_own_assets(client):
    for path in ("/docs", "/redoc", "/login"):
        html = client.get(path).get_data(as_text=True)
        for url in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert url.startswith("/") and not url.startswith("//"), (path, url)


# -- markup from file contents -------------------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: set[str] = set()
        self.handlers: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.handlers += [name for name, _ in attrs if name.startswith("on")]


def _tags(html: str) -> _Tags:
    parser = _Tags()
    parser.feed(html)
    return parser


def test_snippets_carry_no_markup_but_em(client, auth, indexed):
    body = client.post("/api/search", headers=auth, json={"q": "zanzibar", "limit": 100}).get_json()
    assert body["total"] == len(PAYLOADS) + 1
    for hit in body["results"]:
        bare = hit["snippet"].replace("<em>", "").replace("</em>", "")
        assert "<" not in bare and ">" not in bare, hit["snippet"]
        assert "<em>" in hit["snippet"] or hit["basename"] == "zanzibar-photo.png"
    names = client.post("/api/search", headers=auth, json={"q": "svg onload"}).get_json()
    assert names["total"] == 1
    assert "<svg" not in names["results"][0]["snippet"]


def test_previews_carry_no_markup_from_files(client, auth, indexed):
    _, ids = indexed
    template_tags = None
    for name in PAYLOADS:
        resp = client.get(f"/api/documents/{ids[name]}/preview?q=zanzibar%20script", headers=auth)
        assert resp.status_code == 200 and resp.mimetype == "text/html"
        parsed = _tags(resp.get_data(as_text=True))
        assert not parsed.handlers, name
        assert not parsed.tags & {"script", "img", "svg", "iframe", "b"}, (name, parsed.tags)
        template_tags = template_tags or parsed.tags
        assert parsed.tags == template_tags, name  # only the page's own elements


def test_ui_document_page_carries_no_markup_from_files(client, auth, indexed):
    _, ids = indexed
    setup_client = client.application.test_client()
    token = csrf(setup_client, "/login")
    resp = setup_client.post(
        "/login", data={"csrf_token": token, "username": "admin", "password": "correct horse battery"}
    )
    assert resp.status_code == 302
    for name in PAYLOADS:
        html = setup_client.get(f"/documents/{ids[name]}?q=zanzibar").get_data(as_text=True)
        parsed = _tags(html)
        assert "iframe" not in parsed.tags and "svg" not in parsed.tags and "img" not in parsed.tags
        assert not parsed.handlers, name
        assert "alert(" not in "".join(re.findall(r"<script[^>]*>(.*?)</script>", html, re.S))


# -- CSRF of the UI forms ------------------------------------------------------------------------


def test_setup_and_login_posts_need_the_csrf_token(client):
    creds = {
        "username": "admin",
        "password": "correct horse battery",
        "password_confirm": "correct horse battery",
    }
    assert client.post("/setup", data=creds).status_code == 400
    assert client.post("/setup", data={**creds, "csrf_token": "forged"}).status_code == 400
    assert client.get("/api/auth/status").get_json() == {"setup_required": True}
    setup_admin(client)  # with the page's token it works
    fresh = client.application.test_client()
    assert fresh.post("/login", data=creds).status_code == 400
    assert fresh.get("/", follow_redirects=False).status_code == 302  # still logged out
    token = csrf(fresh, "/login")
    assert fresh.post("/login", data={**creds, "csrf_token": token}).status_code == 302


def test_every_ui_post_route_refuses_a_missing_csrf_token(app, client, make_tree, run_jobs):
    setup_admin(client)
    root = make_tree("csrf", {"a.txt": "x"})
    ok = client.post(
        "/sources/new",
        data={
            "csrf_token": csrf(client, "/sources/new"),
            "name": "Csrf",
            "id": "csrf",
            "root_path": str(root),
            "schedule_choice": "manual",
        },
    )
    assert ok.status_code in (302, 303), ok.get_data(as_text=True)[:500]
    rules = [
        r for r in app.url_map.iter_rules() if r.endpoint.startswith("ui.") and "POST" in (r.methods or ())
    ]
    assert len(rules) >= 5
    for rule in rules:
        url = (
            rule.rule.replace("<source_id>", "csrf")
            .replace("<doc_id>", "csrf--000000000000")
            .replace("<int:user_id>", "1")
            .replace("<int:token_id>", "1")
            .replace("<int:saved_id>", "1")
        )
        resp = client.post(url, data={"name": "Hacked", "root_path": str(root)})
        assert resp.status_code in (400, 403), (url, resp.status_code)
    assert client.get("/sources/csrf/edit").status_code == 200  # the source is still there
    source = app.test_client().get("/api/sources/csrf")
    assert source.status_code == 401  # the session cookie is no API credential


def test_session_cookie_does_not_authenticate_the_api(client):
    setup_admin(client)
    assert client.get("/").status_code == 200
    assert client.get("/api/sources").status_code == 401
    assert client.post("/api/sources", json={"name": "x", "root_path": "/"}).status_code == 401


# -- odd requests --------------------------------------------------------------------------------


def test_odd_requests_get_clean_errors(client, auth, indexed):
    cases = [
        ("get", "/api/documents/..%2F..%2Fetc%2Fpasswd", 404),
        ("get", "/api/documents/docs--%00/preview", 404),
        ("post", "/api/search", 413),
    ]
    for method, url, status in cases:
        kwargs = (
            {"data": "x" * (2 * 1024 * 1024), "content_type": "application/json"} if status == 413 else {}
        )
        resp = getattr(client, method)(url, headers=auth, **kwargs)
        assert resp.status_code == status and set(resp.get_json()) == {"detail"}, url
    evil_id = client.get("/api/health", headers={"X-Request-ID": "a\x1b[31m\x07"})
    assert evil_id.headers["X-Request-ID"].isprintable()  # terminal escapes never reach logs


def test_token_lifetime_follows_the_setting(app, client, token):
    from flask_jwt_extended import decode_token

    with app.app_context():
        claims = decode_token(token)
    assert claims["exp"] - claims["iat"] == int(timedelta(hours=24).total_seconds())
    assert claims["type"] == "access" and claims["jti"]


def _swap_root(client, auth, make_tree, make_source, run_jobs, scratch):
    """A scanned source whose root folder is then replaced by a symlink to a folder outside."""
    root, doc_id, url = _scanned_report(
        client, auth, make_tree, make_source, run_jobs, "shared", "report.txt", "wombat"
    )
    (scratch / "report.txt").write_text("wombat OUTSIDE secret")
    (scratch / "passwords.txt").write_text("wombat OUTSIDE passwords")
    root.rename(root.parent / "shared-old")
    root.symlink_to(scratch)
    return doc_id, url


def test_source_root_swapped_for_a_symlink_outside_is_refused(
    app, client, auth, make_tree, make_source, run_jobs, scratch
):
    doc_id, url = _swap_root(client, auth, make_tree, make_source, run_jobs, scratch)
    resp = client.get(url)
    assert resp.status_code == 403 and b"OUTSIDE" not in resp.data
    from webapp.indexing.verify import verify_source

    with app.app_context():
        report = verify_source("shared", repair=True)
    assert report["problems"] == 1 and "outside the allowed roots" in report["root"]
    assert not report["repaired"]


def test_scan_of_a_root_swapped_for_a_symlink_outside_indexes_nothing_outside(
    client, auth, make_tree, make_source, run_jobs, scratch
):
    _swap_root(client, auth, make_tree, make_source, run_jobs, scratch)
    client.post("/api/sources/shared/reindex", headers=auth)
    run_jobs()
    hits = client.post(
        "/api/search", headers=auth, json={"q": "wombat outside", "matching_strategy": "all"}
    ).get_json()
    assert hits["total"] == 0


def _queue_of(client, headers) -> dict:
    return client.get("/api/status", headers=headers).get_json()["queue"]


def _until(check, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)
    return value


def test_status_queue_is_the_users_part_and_counts_live_workers(app, client, auth, make_tree, make_source):
    """A user sees the queued jobs of their own sources only (another source's reindex does
    not show); the worker count drops at once when a real worker is killed with SIGKILL
    (RQ kept counting it until its key expired, minutes later)."""
    from tests.test_access import bearer, create_user, login
    from tests.workers import Worker

    mine = make_source(make_tree("mine", {"a.txt": "alpha"}), name="Mine")["id"]
    theirs = make_source(make_tree("theirs", {"b.txt": "bravo"}), name="Theirs")["id"]
    create_user(client, auth, "quinn", source_ids=[mine])
    user = bearer(login(client, "quinn"))
    assert client.post(f"/api/sources/{theirs}/reindex", headers=auth).status_code == 200
    assert _queue_of(client, auth)["queued"] == 1
    assert _queue_of(client, user)["queued"] == 0  # not their source's job
    assert client.post(f"/api/sources/{mine}/reindex", headers=auth).status_code == 200
    assert (_queue_of(client, auth)["queued"], _queue_of(client, user)["queued"]) == (2, 1)
    with Worker(app) as worker:
        _until(lambda: _queue_of(client, user)["workers"] == 1)
        worker.kill()
        started = time.monotonic()
        _until(lambda: _queue_of(client, user)["workers"] == 0, timeout=10)
        assert time.monotonic() - started < 10


def test_what_a_user_finds_does_not_depend_on_words_in_sources_they_cannot_see(
    client, auth, make_tree, make_source, run_jobs
):
    """A word of a longer query that the files hold is searched without typo forms. Counted
    over every source, hidden documents holding `quillwortzyx` made the user's search for it
    miss their own `quillwortzyv` (1 typo), which `quillwortzyq` (in no file) still found: the
    word's presence in a source they may not see showed in their results."""
    from tests.test_access import bearer, create_user, login

    hidden = make_source(  # 60 texts, not 60 copies of one (a text is listed once)
        make_tree("hidden", {f"h{i}.txt": f"quillwortzyx and more, note {i}" for i in range(60)}),
        name="Hidden",
    )["id"]
    mine = make_source(make_tree("mine", {"v.txt": "quillwortzyv here"}), name="Mine")["id"]
    for sid in (hidden, mine):
        client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()
    create_user(client, auth, "reader", source_ids=[mine])
    user = bearer(login(client, "reader"))

    def total(q: str, headers: dict) -> int:
        return client.post("/api/search", headers=headers, json={"q": q}).get_json()["total"]

    question = "quillwortzyX nowhereword elsewhereword"
    assert total(question.replace("X", "q"), user) == 1  # in no file: the typo finds theirs
    assert total(question.replace("X", "x"), user) == 1  # the same, whatever hidden sources hold
    assert total(question.replace("X", "x"), auth) == 60  # the admin: the 60 as written
