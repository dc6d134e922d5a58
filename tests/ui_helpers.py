"""Helpers of the UI tests: CSRF tokens from pages, first-run setup and login through the forms."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

ADMIN = {"username": "admin", "password": "correct horse battery"}
_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def csrf(client: FlaskClient, path: str = "/login") -> str:
    """The CSRF token a page of this session carries in its forms."""
    html = client.get(path).get_data(as_text=True)
    match = _TOKEN.search(html)
    assert match, f"no CSRF token on {path}"
    return match.group(1)


def setup_admin(client: FlaskClient) -> None:
    """Create the admin through the setup page (the session is then logged in)."""
    token = csrf(client, "/setup")
    resp = client.post(
        "/setup",
        data={
            "csrf_token": token,
            "username": ADMIN["username"],
            "password": ADMIN["password"],
            "password_confirm": ADMIN["password"],
        },
    )
    assert resp.status_code == 302, resp.get_data(as_text=True)


def post(client: FlaskClient, path: str, data: dict | None = None, page: str = "/", **kwargs):
    """POST a form with this session's CSRF token (taken from `page`)."""
    return client.post(path, data={"csrf_token": csrf(client, page), **(data or {})}, **kwargs)


def login(client: FlaskClient, username: str = ADMIN["username"], password: str = ADMIN["password"]):
    """Log this client's session in through the login form; returns the response."""
    token = csrf(client, "/login")
    return client.post("/login", data={"csrf_token": token, "username": username, "password": password})
