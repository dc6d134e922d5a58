"""Auth endpoints: setup on first run only, login, me, logout with revocation, rate limit."""

from __future__ import annotations

import time

import jwt as pyjwt
import pytest

from tests.conftest import ADMIN

# the database dialect matters here: these run in the PostgreSQL pass too (tests/conftest.py)
pytestmark = pytest.mark.pg


def test_status_says_setup_is_required_until_the_first_account(client):
    assert client.get("/api/auth/status").get_json() == {"setup_required": True}
    client.post("/api/auth/setup", json=ADMIN)
    assert client.get("/api/auth/status").get_json() == {"setup_required": False}


def test_setup_logs_the_admin_in_and_works_only_once(client):
    resp = client.post("/api/auth/setup", json=ADMIN)
    assert resp.status_code == 201
    body = resp.get_json()
    assert body["token_type"] == "bearer" and body["expires_in"] == 86400
    me = client.get("/api/auth/me", headers={"Authorization": f"Bearer {body['access_token']}"})
    assert me.get_json()["username"] == "admin" and me.get_json()["is_admin"] is True
    again = client.post("/api/auth/setup", json={"username": "other", "password": "x" * 10})
    assert again.status_code == 409
    assert again.get_json() == {"detail": "Setup already completed"}


def test_setup_validates_username_and_password(client):
    short = client.post("/api/auth/setup", json={"username": "ab", "password": "longenough"})
    assert short.status_code == 400 and short.get_json()["detail"].startswith("username:")
    weak = client.post("/api/auth/setup", json={"username": "alice", "password": "short"})
    assert weak.status_code == 400 and weak.get_json()["detail"].startswith("password:")
    missing = client.post("/api/auth/setup", json={"username": "alice"})
    assert missing.get_json() == {"detail": "password: is required"}
    assert client.get("/api/auth/status").get_json()["setup_required"] is True


def test_login_gives_a_token_with_the_configured_lifetime(client, token):
    resp = client.post("/api/auth/login", json=ADMIN)
    assert resp.status_code == 200, resp.get_json()
    body = resp.get_json()
    claims = pyjwt.decode(body["access_token"], options={"verify_signature": False})
    assert claims["type"] == "access" and {"sub", "jti", "iat", "exp"} <= set(claims)
    assert claims["exp"] - claims["iat"] == body["expires_in"] == 24 * 3600
    assert pyjwt.get_unverified_header(body["access_token"])["alg"] == "HS256"


def test_wrong_password_and_unknown_user_get_the_same_401(client, token):
    wrong = client.post("/api/auth/login", json={"username": "admin", "password": "nope-nope"})
    unknown = client.post("/api/auth/login", json={"username": "ghost", "password": "nope-nope"})
    assert wrong.status_code == unknown.status_code == 401
    assert wrong.get_json() == unknown.get_json() == {"detail": "Invalid username or password"}


def test_logout_revokes_the_token(client, auth):
    assert client.get("/api/auth/me", headers=auth).status_code == 200
    out = client.post("/api/auth/logout", headers=auth)
    assert out.status_code == 200 and out.get_json() == {"message": "Logged out"}
    after = client.get("/api/auth/me", headers=auth)
    assert after.status_code == 401 and "revoked" in after.get_json()["detail"]


def test_other_tokens_still_work_after_one_logout(client, auth):
    second = client.post("/api/auth/login", json=ADMIN).get_json()["access_token"]
    client.post("/api/auth/logout", headers=auth)
    assert client.get("/api/auth/me", headers={"Authorization": f"Bearer {second}"}).status_code == 200


def test_protected_endpoints_refuse_missing_tampered_and_foreign_tokens(app, client, token):
    assert client.get("/api/auth/me").status_code == 401
    assert client.get("/api/auth/me").get_json()["detail"]
    head, body, sig = token.split(".")
    tampered = f"{head}.{body}.{sig[:-2]}{'AA' if sig[-2:] != 'AA' else 'BB'}"
    for bad in (tampered, "not-a-jwt", token + "x"):
        resp = client.get("/api/auth/me", headers={"Authorization": f"Bearer {bad}"})
        assert resp.status_code == 401 and set(resp.get_json()) == {"detail"}
    now = int(time.time())
    claims = {"sub": "1", "jti": "x", "iat": now, "nbf": now, "exp": now + 60, "type": "access"}
    forged = pyjwt.encode(claims, "some-other-secret-of-enough-length-32", algorithm="HS256")
    assert client.get("/api/auth/me", headers={"Authorization": f"Bearer {forged}"}).status_code == 401
    download = pyjwt.encode({**claims, "type": "download"}, app.config["SECRET_KEY"], algorithm="HS256")
    assert client.get("/api/auth/me", headers={"Authorization": f"Bearer {download}"}).status_code == 401


def test_expired_token_is_refused(app, client, token):
    now = int(time.time())
    claims = {
        "sub": "1",
        "jti": "old",
        "iat": now - 7200,
        "nbf": now - 7200,
        "exp": now - 3600,
        "type": "access",
        "fresh": False,
    }
    expired = pyjwt.encode(claims, app.config["SECRET_KEY"], algorithm="HS256")
    resp = client.get("/api/auth/me", headers={"Authorization": f"Bearer {expired}"})
    assert resp.status_code == 401 and "expired" in resp.get_json()["detail"]


def test_login_is_rate_limited_with_retry_after(client, token):
    # setup was the first of the 5 attempts a minute; 4 more logins pass, the next is refused
    codes = [
        client.post("/api/auth/login", json={"username": "admin", "password": "bad-pass"}).status_code
        for _ in range(5)
    ]
    assert codes == [401] * 4 + [429]
    resp = client.post("/api/auth/login", json=ADMIN)
    assert resp.status_code == 429
    assert int(resp.headers["Retry-After"]) > 0
    assert resp.get_json()["detail"].startswith("Too many login attempts, try again in")


def test_setup_attempts_count_against_the_login_limit(client):
    for _ in range(5):
        client.post("/api/auth/setup", json={"username": "x", "password": "y"})
    assert client.post("/api/auth/login", json=ADMIN).status_code == 429


def test_forwarded_for_from_an_untrusted_peer_does_not_change_the_key(client, token):
    for i in range(4):
        client.post(
            "/api/auth/login",
            json={"username": "admin", "password": "bad-pass"},
            headers={"X-Forwarded-For": f"10.0.0.{i}"},
        )
    resp = client.post("/api/auth/login", json=ADMIN, headers={"X-Forwarded-For": "10.9.9.9"})
    assert resp.status_code == 429


def test_forwarded_for_from_a_trusted_proxy_is_believed(app, app_config):
    from webapp import create_app

    app = create_app({**app_config, "TRUSTED_PROXIES": "127.0.0.1"})
    client = app.test_client()
    assert client.post("/api/auth/setup", json=ADMIN).status_code == 201
    for _ in range(4):
        client.post("/api/auth/login", json=ADMIN, headers={"X-Forwarded-For": "203.0.113.7"})
    # another real client behind the same proxy has its own budget
    resp = client.post("/api/auth/login", json=ADMIN, headers={"X-Forwarded-For": "203.0.113.8"})
    assert resp.status_code == 200, resp.get_json()


def test_create_admin_command(app):
    runner = app.test_cli_runner()
    result = runner.invoke(args=["create-admin", "--username", "ops", "--password", "longpassword"])
    assert result.exit_code == 0, result.output
    client = app.test_client()
    assert (
        client.post("/api/auth/login", json={"username": "ops", "password": "longpassword"}).status_code
        == 200
    )
    assert client.get("/api/auth/status").get_json() == {"setup_required": False}
    dup = runner.invoke(args=["create-admin", "--username", "ops", "--password", "longpassword"])
    assert dup.exit_code == 1 and "already exists" in dup.output


def _stored_hash(app) -> str:
    from webapp.extensions import db
    from webapp.models import User

    with app.app_context():
        return db.session.query(User.password_hash).filter_by(username=ADMIN["username"]).scalar()


def test_passwords_are_hashed_with_argon2id_at_the_configured_cost(app, app_config, client):
    """The suite's cheap cost comes from the PASSWORD_HASH_* settings; without them a password
    gets argon2-cffi's default cost (64 MiB, 3 passes, 4 lanes) and still logs in."""
    from webapp import config, create_app

    assert client.post("/api/auth/setup", json=ADMIN).status_code == 201
    assert _stored_hash(app).startswith("$argon2id$v=19$m=1024,t=1,p=1$")
    real_cost = {key: config.defaults()[key] for key in app_config if key.startswith("PASSWORD_HASH")}
    real = create_app({**app_config, **real_cost})
    assert (
        real.test_client()
        .put(
            "/api/auth/password",
            headers={"Authorization": f"Bearer {_login(client)}"},
            json={"current_password": ADMIN["password"], "new_password": "a new long password"},
        )
        .status_code
        == 200
    )
    assert _stored_hash(real).startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    login = real.test_client().post("/api/auth/login", json={**ADMIN, "password": "a new long password"})
    assert login.status_code == 200


def _login(client) -> str:
    return client.post("/api/auth/login", json=ADMIN).get_json()["access_token"]


def test_usernames_are_one_account_regardless_of_case_and_unicode_form(client, auth):
    """`Admin`, `ADMIN` and fullwidth `ａｄｍｉｎ` are the admin: no second account can take
    them (create, rename, create-admin), and login with any of them is the admin's."""
    for name in ("Admin", "ADMIN"):
        made = client.post(
            "/api/users", headers=auth, json={"username": name, "password": "another long one"}
        )
        assert made.status_code == 409, made.get_json()
        assert made.get_json() == {"detail": f"User '{name}' already exists"}
    bob = client.post(
        "/api/users", headers=auth, json={"username": "bob", "password": "another long one"}
    ).get_json()
    renamed = client.put(f"/api/users/{bob['id']}", headers=auth, json={"username": "aDmIn"})
    assert renamed.status_code == 409
    assert (
        client.put(f"/api/users/{bob['id']}", headers=auth, json={"username": "Bob"}).status_code == 200
    )  # its own name, recased
    trailing = client.post(
        "/api/users", headers=auth, json={"username": "carol\n", "password": "another long one"}
    )
    assert trailing.status_code == 400
    for typed in ("ADMIN", "ａｄｍｉｎ", "admin"):
        login = client.post("/api/auth/login", json={"username": typed, "password": ADMIN["password"]})
        assert login.status_code == 200, (typed, login.get_json())
        me = client.get(
            "/api/auth/me", headers={"Authorization": f"Bearer {login.get_json()['access_token']}"}
        )
        assert me.get_json()["username"] == "admin"


def test_create_admin_refuses_a_name_that_differs_only_in_case(app, token):
    result = app.test_cli_runner().invoke(
        args=["create-admin", "--username", "ADMIN", "--password", "longpassword"]
    )
    assert result.exit_code == 1 and "already exists" in result.output


BLANK_PASSWORDS = [
    " " * 12,
    "\t\n\r\x0b\x0c" * 2,
    "\u200b" * 10,
    "\u3000\u00a0" * 5,
    "\x00\x01\x02\x03\x04\x05\x06\x07",
    " \u200d\u2060\ufeff\u202e    ",
]


def test_passwords_of_only_whitespace_and_control_characters_are_refused(client, auth, token):
    """Setup-time rules everywhere a password is set: setup, a new user, an admin's reset and
    one's own change; 8 spaces are no password."""
    for blank in BLANK_PASSWORDS:
        made = client.post("/api/users", headers=auth, json={"username": "eve", "password": blank})
        assert made.status_code == 400, repr(blank)
        assert made.get_json()["detail"].startswith("password: must contain something")
        own = client.put(
            "/api/auth/password",
            headers=auth,
            json={"current_password": ADMIN["password"], "new_password": blank},
        )
        assert own.status_code == 400 and own.get_json()["detail"].startswith("new_password:")
    eve = client.post("/api/users", headers=auth, json={"username": "eve", "password": "  a visible one  "})
    assert eve.status_code == 201
    reset = client.put(f"/api/users/{eve.get_json()['id']}", headers=auth, json={"password": " " * 20})
    assert reset.status_code == 400
    login = client.post("/api/auth/login", json={"username": "eve", "password": "  a visible one  "})
    assert login.status_code == 200  # the refused reset changed nothing


def test_setup_refuses_a_blank_password(client):
    blank = client.post("/api/auth/setup", json={"username": "alice", "password": " " * 16})
    assert blank.status_code == 400 and blank.get_json()["detail"].startswith("password:")
    assert client.get("/api/auth/status").get_json()["setup_required"] is True
