"""Every input answers 4xx with {"detail"}: nested JSON, control characters in `next`, request
lines too long for the web server."""

from __future__ import annotations

import socket

import pytest
import requests

from tests.test_crash import Gunicorn
from tests.ui_helpers import login

NESTED = "[" * 100_000


def _json_operations(client) -> list[tuple[str, str, bool]]:
    """(method, path, secured) of every operation of /openapi.json that takes a JSON body."""
    spec = client.get("/openapi.json").get_json()
    ops = []
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method != "parameters" and "application/json" in op.get("requestBody", {}).get("content", {}):
                ops.append((method, path, bool(op.get("security"))))
    return ops


@pytest.mark.parametrize("logged_in", [False, True])
def test_deeply_nested_json_is_a_400_on_every_json_endpoint(client, token, logged_in):
    headers = {"Authorization": f"Bearer {token}"}
    ops = _json_operations(client)
    assert {("post", "/api/auth/login"), ("post", "/api/auth/setup"), ("post", "/api/search")} <= {
        (m, p) for m, p, _ in ops
    }
    for method, path, secured in ops:
        if secured and not logged_in:
            continue
        url = (
            path.replace("{source_id}", "docs")
            .replace("{doc_id}", "docs--000000000000")
            .replace("{user_id}", "1")
        )
        for body in (NESTED, '{"q": ' + NESTED):
            resp = client.open(
                url,
                method=method.upper(),
                data=body,
                content_type="application/json",
                headers=headers if logged_in else {},
            )
            assert resp.status_code == 400, (method, url, resp.status_code)
            assert resp.get_json() == {"detail": "Invalid JSON body: nested too deeply"}


def test_next_with_control_characters_is_ignored(app, client, token):
    for target in ("/%0d%0a", "/%0d%0aSet-Cookie:%20x=1", "/search%0a"):
        anonymous = client.get(f"/login?next={target}")
        assert anonymous.status_code == 200 and "\r\n" not in anonymous.text
    ui = app.test_client()
    assert login(ui).status_code == 302
    resp = ui.get("/login?next=/%0d%0a")
    assert resp.status_code == 302 and resp.headers["Location"] == "/"
    after = ui.post(
        "/login",
        data={
            "csrf_token": _session_csrf(ui),
            "username": "admin",
            "password": "correct horse battery",
            "next": "/\r\nX: y",
        },
    )
    assert after.status_code == 302 and after.headers["Location"] == "/"


def _session_csrf(client) -> str:
    """The CSRF token of a logged-in session (its login page redirects, so no form to read)."""
    with client.session_transaction() as sess:
        return sess["csrf"]


def _raw_get(url: str, target: str) -> tuple[int, dict, bytes]:
    """One GET sent byte by byte as written (requests would refuse or re-encode the target)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode("latin-1"))
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def test_over_long_request_lines_answer_json(app):
    import json

    web = Gunicorn(app)
    web.env["WEB_CONCURRENCY"] = "1"
    web.start()
    try:
        fine, _, _ = _raw_get(web.url, "/api/health?pad=" + "a" * 6000)
        assert fine in (200, 503)  # longer than gunicorn's default 4094 still reaches Flask
        status, headers, body = _raw_get(web.url, "/api/health?pad=" + "a" * 9000)
        assert status == 414 and headers["Content-Type"] == "application/json"
        assert set(json.loads(body)) == {"detail"} and b"<html" not in body
        bad, headers, body = _raw_get(web.url, "/api/health\x01x")
        assert bad == 400 and set(json.loads(body)) == {"detail"}
        assert requests.get(web.url + "/api/health", timeout=10).status_code in (200, 503)
    finally:
        web.stop()


INVISIBLE_NAMES = [
    "\u200b",
    "\u200b\u200c\u200d",
    "\ufeff\u2060",
    "\u202e\u202d",
    "\u3000",
    "\u00ad\u00ad",
    "\u3164\u3164",
    "\u2800",
    " \u200b\u00a0 \u180e",
]


def test_a_source_name_of_only_invisible_characters_is_refused(client, auth, make_tree, make_source):
    """Zero-width, format and space characters only would make a source (or a saved search)
    that shows as a blank line in every list: refused on create and rename, naming why."""
    root = make_tree("names", {"a.txt": "alpha"})
    for name in INVISIBLE_NAMES:
        made = client.post("/api/sources", headers=auth, json={"name": name, "root_path": str(root)})
        assert made.status_code == 400, repr(name)
        assert made.get_json()["detail"] in (  # spaces alone are stripped to nothing
            "name: must be 1 to 200 characters",
            "name: must contain a visible character (not only spaces, zero-width or format characters)",
        )
    source = make_source(root, name="Visible\u200b name")  # invisible ones beside text are fine
    renamed = client.put(f"/api/sources/{source['id']}", headers=auth, json={"name": "\u200b\u2060"})
    assert renamed.status_code == 400
    assert client.get(f"/api/sources/{source['id']}", headers=auth).get_json()["name"] == "Visible\u200b name"
    saved = client.post("/api/saved-searches", headers=auth, json={"name": "\u200b", "q": "x"})
    assert saved.status_code == 400
