"""Sessions that end when they should: logout and password change end UI sessions, tokens and
download links (server-side, in real Redis); tokens without `exp` are refused; login limits use
a moving window per address and per username."""

from __future__ import annotations

import os
import time

import jwt as pyjwt
import pytest

from tests.conftest import ADMIN
from tests.ui_helpers import csrf, login

NEW_PASSWORD = "a different long password"


@pytest.fixture
def doc_id(client, auth, make_tree, make_source, run_jobs) -> str:
    """One indexed text file."""
    root = make_tree("notes", {"secret plan.txt": "the quokka secret plan"})
    src = make_source(root)
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    return client.post("/api/search", headers=auth, json={"q": "quokka"}).get_json()["results"][0]["id"]


def _ui_session(app):
    """A test client logged in through the login form."""
    ui = app.test_client()
    assert login(ui).status_code == 302
    return ui


def _copy_cookie(app, source):
    """Another client (another machine) holding a copy of `source`'s session cookie."""
    thief = app.test_client()
    cookie = source.get_cookie("trawl_session")
    thief.set_cookie("trawl_session", cookie.value)
    return thief


def _logged_in(client) -> bool:
    resp = client.get("/")
    return resp.status_code == 200 and "/login" not in resp.headers.get("Location", "")


def _ui_download_url(ui, doc_id: str) -> str:
    resp = ui.post(f"/documents/{doc_id}/download", data={"csrf_token": csrf(ui, f"/documents/{doc_id}")})
    assert resp.status_code == 303
    return resp.headers["Location"]


def test_ui_logout_ends_a_copied_session_cookie(app, token):
    ui = _ui_session(app)
    thief = _copy_cookie(app, ui)
    assert _logged_in(thief)
    resp = ui.post("/logout", data={"csrf_token": csrf(ui, "/")})
    assert resp.status_code == 302
    assert not _logged_in(ui)
    stolen = thief.get("/")
    assert stolen.status_code == 302 and "/login" in stolen.headers["Location"]
    assert _logged_in(_ui_session(app))  # a new login still works


def test_api_logout_ends_the_download_links_of_that_token(client, token, auth, doc_id):
    url = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()["url"]
    other = client.post("/api/auth/login", json=ADMIN).get_json()["access_token"]
    other_url = client.post(
        f"/api/documents/{doc_id}/download-link", headers={"Authorization": f"Bearer {other}"}
    ).get_json()["url"]
    assert client.get(url).status_code == 200
    assert client.post("/api/auth/logout", headers=auth).status_code == 200
    ended = client.get(url)
    assert ended.status_code == 401 and "ended" in ended.get_json()["detail"]
    assert b"quokka" not in ended.data
    assert client.get(other_url).status_code == 200  # another session's link lives on


def test_ui_logout_ends_the_download_links_of_that_session(app, token, doc_id):
    ui = _ui_session(app)
    url = _ui_download_url(ui, doc_id)
    assert app.test_client().get(url).status_code == 200  # the link works from anywhere
    ui.post("/logout", data={"csrf_token": csrf(ui, "/")})
    assert app.test_client().get(url).status_code == 401


def test_password_change_ends_tokens_sessions_and_links(app, client, token, auth, doc_id):
    ui = _ui_session(app)
    ui_link = _ui_download_url(ui, doc_id)
    api_link = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()["url"]
    result = app.test_cli_runner().invoke(args=["set-password", "admin", "--password", NEW_PASSWORD])
    assert result.exit_code == 0, result.output
    assert client.get("/api/auth/me", headers=auth).status_code == 401
    assert not _logged_in(ui)
    assert client.get(ui_link).status_code == 401 and client.get(api_link).status_code == 401
    assert client.post("/api/auth/login", json=ADMIN).status_code == 401
    fresh = client.post("/api/auth/login", json={"username": "admin", "password": NEW_PASSWORD})
    assert fresh.status_code == 200
    me = client.get("/api/auth/me", headers={"Authorization": f"Bearer {fresh.get_json()['access_token']}"})
    assert me.status_code == 200


def test_a_token_without_exp_is_refused(app, client, token):
    claims = pyjwt.decode(token, app.config["SECRET_KEY"], algorithms=["HS256"])
    assert (
        client.get(
            "/api/auth/me",
            headers={"Authorization": f"Bearer {pyjwt.encode(claims, app.config['SECRET_KEY'])}"},
        ).status_code
        == 200
    )
    del claims["exp"]
    claims["jti"] = os.urandom(8).hex()
    forever = pyjwt.encode(claims, app.config["SECRET_KEY"], algorithm="HS256")
    resp = client.get("/api/auth/me", headers={"Authorization": f"Bearer {forever}"})
    assert resp.status_code == 401 and set(resp.get_json()) == {"detail"}


def test_the_address_limit_is_a_moving_window(app, client, token):
    """A fixed window let a burst through at its edge; a moving window counts the last N seconds."""
    app.config["AUTH_RATE_LIMIT"] = "5 per 3 seconds"
    attempt = lambda: client.post("/api/auth/setup", json=ADMIN).status_code  # noqa: E731 (409)
    started = time.monotonic()
    assert attempt() == 409
    time.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
    assert [attempt() for _ in range(4)] == [409] * 4  # five in the window: the budget
    time.sleep(max(0.0, 3.2 - (time.monotonic() - started)))  # a fixed window has reset here
    burst = [attempt() for _ in range(5)]
    assert burst.count(429) >= 3, burst  # only the first attempt's slot has freed up


def test_login_is_limited_per_username_across_addresses(app, client, token):
    app.config["LOGIN_USER_RATE_LIMIT"] = "3/minute"
    wrong = {"username": "Admin ", "password": "guess guess"}  # same account, other spelling
    codes = [
        client.post("/api/auth/login", json=wrong, environ_base={"REMOTE_ADDR": f"10.9.0.{n}"}).status_code
        for n in range(1, 6)
    ]
    assert codes[:3] == [401] * 3 and codes[3:] == [429, 429]
    ui = app.test_client()
    blocked = ui.post(
        "/login", data={"csrf_token": csrf(ui, "/login"), **ADMIN}, environ_base={"REMOTE_ADDR": "10.9.0.99"}
    )
    assert blocked.status_code == 429  # the UI's login shares the username budget
    other = client.post(
        "/api/auth/login",
        json={"username": "someone", "password": "x" * 8},
        environ_base={"REMOTE_ADDR": "10.9.0.1"},
    )
    assert other.status_code == 401  # another name from a used address is not blocked
