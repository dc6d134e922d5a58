"""Users, per-source access and API tokens: every endpoint of /openapi.json for every kind of
caller, leaks across sources, token scopes and revocation."""

from __future__ import annotations

from datetime import timedelta

import pytest

OPEN = {"alpha.txt": "kestrel open alpha notes", "beta.md": "# Beta\nkestrel open beta plan"}
SECRET = {
    "payroll.txt": "kestrel payroll salaries zeppelin",
    "board.csv": "name,note\nkestrel,zeppelin minutes",
}
PASSWORD = "user password 1"
MISSING_DOC = "0" * 64


@pytest.fixture
def world(client, auth, make_tree, make_source, run_jobs):
    """Sources `open` and `secret` scanned; alice granted `open`, bob granted nothing; alice's
    read and full API tokens. Returns ids and the headers of each kind of caller."""
    make_source(make_tree("open", OPEN), name="Open", id="open")
    make_source(make_tree("secret", SECRET), name="Secret", id="secret")
    for sid in ("open", "secret"):
        assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_jobs()
    alice = create_user(client, auth, "alice", source_ids=["open"])
    bob = create_user(client, auth, "bob")
    headers = {
        "anonymous": {},
        "admin": auth,
        "nogrant": bearer(login(client, "bob")),
        "granted": bearer(login(client, "alice")),
    }
    for scope in ("read", "full"):
        resp = client.post(
            "/api/tokens", headers=headers["granted"], json={"name": f"{scope} key", "scope": scope}
        )
        assert resp.status_code == 201, resp.get_json()
        headers[scope] = bearer(resp.get_json()["token"])
    docs = doc_ids(client, auth)
    assert len(docs) == 4
    return {"h": headers, "docs": docs, "alice": alice, "bob": bob}


def create_user(client, auth, username: str, **fields) -> dict:
    resp = client.post(
        "/api/users", headers=auth, json={"username": username, "password": PASSWORD, **fields}
    )
    assert resp.status_code == 201, resp.get_json()
    return resp.get_json()


def login(client, username: str, password: str = PASSWORD) -> str:
    resp = client.post("/api/auth/login", json={"username": username, "password": password})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()["access_token"]


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def doc_ids(client, headers) -> dict[str, str]:
    body = client.post("/api/search", headers=headers, json={"q": "kestrel", "limit": 100})
    return {r["basename"]: r["id"] for r in body.get_json()["results"]}


# -- the matrix ------------------------------------------------------------------------------------
# Each operation of /openapi.json: what it is for access, the path values and body it is called
# with, and the status an allowed caller gets. READ: any account (GET, and search); OWN: an
# account's own writes (403 for a read-scope token); ADMIN: admins only (403 for users and
# every token of theirs). Admin operations are called on ids that do not exist or with a body
# that is refused after the checks, so the matrix changes nothing.
READ, OWN, ADMIN, PUBLIC = "read", "own", "admin", "public"
OPERATIONS = {
    "GET /api/auth/status": (PUBLIC, {}, None, 200),
    "POST /api/auth/setup": (PUBLIC, {}, None, None),
    "POST /api/auth/login": (PUBLIC, {}, None, None),
    "GET /api/health": (PUBLIC, {}, None, 200),
    "GET /api/documents/{doc_id}/download": (PUBLIC, {}, None, None),  # link token: see below
    "GET /api/auth/me": (READ, {}, None, 200),
    "PUT /api/auth/password": (
        OWN,
        {},
        {"current_password": "wrong password", "new_password": "whatever 123"},
        400,
    ),
    "POST /api/auth/logout": (OWN, {}, None, None),  # ends the caller: test_logout_...
    "GET /api/tokens": (READ, {}, None, 200),
    "POST /api/tokens": (OWN, {}, {"name": "matrix", "scope": "read"}, 201),
    "DELETE /api/tokens/{token_id}": (OWN, {"token_id": "999"}, None, 404),
    "GET /api/users": (ADMIN, {}, None, 200),
    "POST /api/users": (ADMIN, {}, {"username": "x"}, 400),
    "GET /api/users/{user_id}": (ADMIN, {"user_id": "999"}, None, 404),
    "PUT /api/users/{user_id}": (ADMIN, {"user_id": "999"}, {"active": True}, 404),
    "DELETE /api/users/{user_id}": (ADMIN, {"user_id": "999"}, None, 404),
    "GET /api/sources": (READ, {}, None, 200),
    "POST /api/sources": (ADMIN, {}, {"name": "x", "root_path": "/"}, 400),
    "POST /api/sources/test-path": (ADMIN, {}, {"root_path": "/"}, 200),
    "GET /api/sources/{source_id}": (READ, {"source_id": "open"}, None, 200),
    "PUT /api/sources/{source_id}": (ADMIN, {"source_id": "nope"}, {"name": "x"}, 404),
    "DELETE /api/sources/{source_id}": (ADMIN, {"source_id": "nope"}, None, 404),
    "POST /api/sources/{source_id}/reindex": (ADMIN, {"source_id": "nope"}, None, 404),
    "POST /api/sources/{source_id}/clear-stale": (ADMIN, {"source_id": "nope"}, None, 404),
    "POST /api/search": (READ, {}, {"q": "kestrel"}, 200),
    "GET /api/documents/{doc_id}": (READ, {"doc_id": "alpha.txt"}, None, 200),
    "GET /api/documents/{doc_id}/preview": (READ, {"doc_id": "alpha.txt"}, None, 200),
    "GET /api/documents/{doc_id}/thumbnail": (READ, {"doc_id": "alpha.txt"}, None, 404),
    # not embedded in this test (the phase's queue is not run): an empty list, for the granted
    "GET /api/documents/{doc_id}/similar": (READ, {"doc_id": "alpha.txt"}, None, 200),
    "POST /api/documents/{doc_id}/download-link": (OWN, {"doc_id": "alpha.txt"}, None, 200),
    "GET /api/status": (READ, {}, None, 200),
    "GET /api/status/{source_id}": (READ, {"source_id": "open"}, None, 200),
    "GET /api/status/{source_id}/failed": (READ, {"source_id": "open"}, None, 200),
    "GET /api/saved-searches": (READ, {}, None, 200),
    "POST /api/saved-searches": (OWN, {}, {"name": "", "q": "x"}, 400),
    "DELETE /api/saved-searches/{saved_id}": (OWN, {"saved_id": "999"}, None, 404),
    "GET /metrics": (ADMIN, {}, None, 200),
}
USERS = ("nogrant", "granted", "read", "full")


def operations(client) -> list[str]:
    """Every operation the API documents; the table above must name each one."""
    spec = client.get("/openapi.json").get_json()
    found = [
        f"{method.upper()} {path}"
        for path, item in spec["paths"].items()
        for method in item
        if method != "parameters"
    ]
    assert sorted(found) == sorted(OPERATIONS), "an endpoint is missing from OPERATIONS"
    return found


def call(client, op: str, values: dict, body, headers: dict, docs: dict):
    method, path = op.split(" ", 1)
    for name, value in values.items():
        path = path.replace("{" + name + "}", docs.get(value, value))
    return client.open(path, method=method, headers=headers, json=body)


def expected(kind: str, caller: str, allowed: int, hidden: bool) -> int:
    """The status `caller` must get; `hidden`: the path names what only the admin may see."""
    if caller == "anonymous":
        return 401
    if kind == ADMIN and caller != "admin":
        return 403
    if kind == OWN and caller == "read":
        return 403
    return 404 if hidden else allowed


def test_every_operation_for_every_caller(client, world):
    docs, h = world["docs"], world["h"]
    for op in operations(client):
        kind, values, body, allowed = OPERATIONS[op]
        if kind == PUBLIC or allowed is None:
            continue
        for caller, headers in h.items():
            # bob was granted nothing: `open` and its documents do not exist for him
            hidden = caller == "nogrant" and bool({"alpha.txt", "open"} & set(values.values()))
            resp = call(client, op, values, body, headers, docs)
            want = expected(kind, caller, allowed, hidden)
            assert resp.status_code == want, (op, caller, resp.status_code, resp.get_data()[:200])
            if resp.status_code >= 400:
                assert set(resp.get_json()) == {"detail"}, (op, caller)


def test_what_is_not_granted_is_404_exactly_like_what_is_missing(client, world):
    docs, h = world["docs"], world["h"]
    secret_doc = docs["payroll.txt"]
    for caller in USERS:
        for op, values in (
            ("GET /api/documents/{doc_id}", {"doc_id": secret_doc}),
            ("GET /api/documents/{doc_id}/preview", {"doc_id": secret_doc}),
            ("GET /api/sources/{source_id}", {"source_id": "secret"}),
            ("GET /api/status/{source_id}", {"source_id": "secret"}),
            ("GET /api/status/{source_id}/failed", {"source_id": "secret"}),
        ):
            hidden = call(client, op, values, None, h[caller], docs)
            missing_values = {k: MISSING_DOC if k == "doc_id" else "nothere" for k in values}
            missing = call(client, op, missing_values, None, h[caller], docs)
            assert hidden.status_code == missing.status_code == 404, (op, caller)
            assert hidden.get_json()["detail"].replace(
                next(iter(values.values())), "ID"
            ) == missing.get_json()["detail"].replace(next(iter(missing_values.values())), "ID"), (op, caller)
        link = client.post(f"/api/documents/{secret_doc}/download-link", headers=h[caller])
        assert link.status_code == (403 if caller == "read" else 404), caller
    # the admin sees all of it
    assert client.get(f"/api/documents/{secret_doc}", headers=h["admin"]).status_code == 200
    assert client.get("/api/status/secret", headers=h["admin"]).status_code == 200


def _search(client, headers, **body):
    body = {"q": "kestrel", "facets": ["source_id", "type", "extension", "year"], **body}
    resp = client.post("/api/search", headers=headers, json=body)
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def test_search_sources_status_and_links_show_only_granted_sources(client, auth, world):
    h = world["h"]
    everything = _search(client, h["admin"])
    assert everything["total"] == 4
    assert everything["facet_distribution"]["source_id"] == {"open": 2, "secret": 2}
    for caller in ("granted", "read", "full"):
        page = _search(client, h[caller])
        assert page["total"] == 2 and {r["basename"] for r in page["results"]} == set(OPEN)
        assert page["facet_distribution"]["source_id"] == {"open": 2}
        assert page["facet_distribution"]["extension"] == {"txt": 1, "md": 1}
        assert sum(page["facet_distribution"]["type"].values()) == 2
        assert "zeppelin" not in str(page) and "payroll" not in str(page)
        words = _search(client, h[caller], q="zeppelin payroll")
        assert words["total"] == 0 and words["results"] == []
        assert words["facet_distribution"]["source_id"] == {}
        sorted_page = _search(client, h[caller], q="type:text", sort="basename:asc")
        assert {r["source_name"] for r in sorted_page["results"]} == {"Open"}
    nothing = _search(client, h["nogrant"])
    assert nothing["total"] == 0 and nothing["facet_distribution"]["source_id"] == {}
    # -- naming a source not granted in a search: an unknown source
    for body in ({"source_id": "secret"}, {"q": "kestrel source:secret"}):
        hidden = client.post("/api/search", headers=h["granted"], json={"q": "kestrel", **body})
        body_missing = {k: v.replace("secret", "nothere") for k, v in body.items()}
        missing = client.post("/api/search", headers=h["granted"], json={"q": "kestrel", **body_missing})
        assert hidden.status_code == missing.status_code == 400
        assert hidden.get_json()["detail"].replace("secret", "X") == missing.get_json()["detail"].replace(
            "nothere", "X"
        )
    assert _search(client, h["granted"], source_id="open")["total"] == 2
    # -- sources and status list only what is granted
    h = world["h"]
    assert [s["id"] for s in client.get("/api/sources", headers=h["admin"]).get_json()] == ["open", "secret"]
    for caller in ("granted", "read", "full"):
        assert [s["id"] for s in client.get("/api/sources", headers=h[caller]).get_json()] == ["open"]
        status = client.get("/api/status", headers=h[caller]).get_json()
        assert [s["source_id"] for s in status["sources"]] == ["open"]
        assert status["documents"] == 2
        assert {r["source_id"] for r in status["recent_runs"]} == {"open"}  # the Jobs list
    assert client.get("/api/sources", headers=h["nogrant"]).get_json() == []
    status = client.get("/api/status", headers=h["nogrant"]).get_json()
    assert status["sources"] == [] and status["documents"] == 0
    assert client.get("/api/status", headers=h["admin"]).get_json()["documents"] == 4
    # -- download links follow the grants of their maker
    h, docs = world["h"], world["docs"]
    url = client.post(f"/api/documents/{docs['alpha.txt']}/download-link", headers=h["full"]).get_json()[
        "url"
    ]
    assert client.get(url).status_code == 200
    admin_url = client.post(f"/api/documents/{docs['payroll.txt']}/download-link", headers=auth).get_json()[
        "url"
    ]
    assert client.get(admin_url).get_data(as_text=True) == SECRET["payroll.txt"]
    # the grant is taken away: alice's link stops working, as if the document were gone
    resp = client.put(f"/api/users/{world['alice']['id']}", headers=auth, json={"source_ids": []})
    assert resp.status_code == 200 and resp.get_json()["source_ids"] == []
    assert client.get(url).status_code == 404
    assert _search(client, h["granted"])["total"] == 0


# -- tokens ----------------------------------------------------------------------------------------


@pytest.mark.pg
def test_tokens_are_shown_once_stored_hashed_and_listed_per_user(app, client, auth, world):
    h = world["h"]
    resp = client.post(
        "/api/tokens", headers=h["granted"], json={"name": "backup", "scope": "full", "expires_in_days": 30}
    )
    body = resp.get_json()
    assert resp.status_code == 201 and body["token"].startswith("trawl_")
    assert set(body) >= {"id", "name", "scope", "token", "created_at", "expires_at", "last_used_at"}
    assert body["expires_at"] and body["last_used_at"] is None
    mine = client.get("/api/tokens", headers=h["granted"]).get_json()
    assert {t["name"] for t in mine} == {"read key", "full key", "backup"}
    assert all("token" not in t for t in mine)
    assert client.get("/api/tokens", headers=h["nogrant"]).get_json() == []
    assert len(client.get("/api/tokens", headers=auth).get_json()) == 3  # admins see all
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import ApiToken

        stored = [t.token_hash for t in db.session.query(ApiToken)]
    assert body["token"] not in stored and all(len(t) == 64 for t in stored)
    # bob cannot revoke alice's token: it does not exist for him
    assert client.delete(f"/api/tokens/{body['id']}", headers=h["nogrant"]).status_code == 404
    for bad, detail in (
        ({"name": ""}, "name:"),
        ({"name": "x", "scope": "admin"}, "scope:"),
        ({"name": "x", "expires_in_days": 0}, "expires_in_days:"),
    ):
        resp = client.post("/api/tokens", headers=h["granted"], json=bad)
        assert resp.status_code == 400 and resp.get_json()["detail"].startswith(detail)


@pytest.mark.pg
def test_read_scope_and_deleted_and_expired_tokens(app, client, world):
    h, docs = world["h"], world["docs"]
    read = h["read"]
    assert client.get("/api/auth/me", headers=read).get_json()["username"] == "alice"
    assert client.post("/api/search", headers=read, json={"q": "kestrel"}).status_code == 200
    assert client.get(f"/api/documents/{docs['alpha.txt']}", headers=read).status_code == 200
    for method, path in (
        ("POST", "/api/tokens"),
        ("POST", "/api/auth/logout"),
        ("POST", f"/api/documents/{docs['alpha.txt']}/download-link"),
        ("PUT", "/api/auth/password"),
    ):
        resp = client.open(path, method=method, headers=read, json={})
        assert resp.status_code == 403 and "read scope" in resp.get_json()["detail"], path
    # -- deleted and expired tokens are refused at once
    h = world["h"]
    tokens = client.get("/api/tokens", headers=h["granted"]).get_json()
    by_name = {t["name"]: t["id"] for t in tokens}
    assert client.delete(f"/api/tokens/{by_name['read key']}", headers=h["full"]).status_code == 204
    resp = client.get("/api/auth/me", headers=h["read"])
    assert resp.status_code == 401 and resp.get_json() == {"detail": "Invalid API token"}
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import ApiToken, utcnow

        db.session.get(ApiToken, by_name["full key"]).expires_at = utcnow() - timedelta(seconds=1)
        db.session.commit()
    resp = client.get("/api/auth/me", headers=h["full"])
    assert resp.status_code == 401 and "expired" in resp.get_json()["detail"]
    forged = bearer("trawl_" + "A" * 43)
    assert client.get("/api/sources", headers=forged).status_code == 401


@pytest.mark.pg
def test_last_use_is_batched_through_redis_and_logout_ends_a_token(app, client, world):
    h = world["h"]
    from webapp import keys
    from webapp.runtime import get_redis

    conn = get_redis(app)
    assert client.get("/api/sources", headers=h["read"]).status_code == 200
    assert client.get("/api/sources", headers=h["full"]).status_code == 200
    # within the flush interval the uses wait in Redis, not in the database
    assert conn.exists(keys.TOKENS_FLUSH) and conn.hlen(keys.TOKENS_USED) >= 1
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import ApiToken

        saved = {t.name: t.last_used_at for t in db.session.query(ApiToken)}
    assert list(saved.values()).count(None) >= 1
    listed = client.get("/api/tokens", headers=h["granted"]).get_json()
    assert all(t["last_used_at"] for t in listed)
    assert conn.hlen(keys.TOKENS_USED) == 0
    # -- logout with an API token deletes it
    h = world["h"]
    assert client.post("/api/auth/logout", headers=h["full"]).status_code == 200
    assert client.get("/api/auth/me", headers=h["full"]).status_code == 401
    assert client.get("/api/auth/me", headers=h["granted"]).status_code == 200


# -- users -----------------------------------------------------------------------------------------


def test_me_and_the_rules_of_an_account(client, auth, world):
    me = client.get("/api/auth/me", headers=world["h"]["granted"]).get_json()
    assert (me["role"], me["is_admin"], me["source_ids"], me["active"]) == ("user", False, ["open"], True)
    assert me["last_login_at"]
    admin = client.get("/api/auth/me", headers=world["h"]["admin"]).get_json()
    assert (admin["role"], admin["is_admin"]) == ("admin", True)
    # -- the rules of an account
    cases = [
        ({"username": "carol", "password": "short"}, 400, "password: must be at least 8"),
        ({"username": "carol", "password": PASSWORD, "role": "root"}, 400, "role:"),
        (
            {"username": "carol", "password": PASSWORD, "source_ids": ["nope"]},
            400,
            "source_ids: unknown source 'nope'",
        ),
        ({"username": "a", "password": PASSWORD}, 400, "username:"),
        ({"username": "alice", "password": PASSWORD}, 409, "User 'alice' already exists"),
    ]
    for body, status, detail in cases:
        resp = client.post("/api/users", headers=auth, json=body)
        assert resp.status_code == status and resp.get_json()["detail"].startswith(detail), body
    listed = client.get("/api/users", headers=auth).get_json()
    assert [u["username"] for u in listed] == ["admin", "alice", "bob"]


def test_the_last_active_admin_stays(client, auth, world):
    admin_id = client.get("/api/auth/me", headers=auth).get_json()["id"]
    for body, word in (({"role": "user"}, "demoted"), ({"active": False}, "disabled")):
        resp = client.put(f"/api/users/{admin_id}", headers=auth, json=body)
        assert resp.status_code == 409 and word in resp.get_json()["detail"]
    resp = client.delete(f"/api/users/{admin_id}", headers=auth)
    assert resp.status_code == 409 and "deleted" in resp.get_json()["detail"]
    # with a second admin, the first may go
    other = create_user(client, auth, "second", role="admin")
    assert other["role"] == "admin" and other["source_ids"] == []
    second = bearer(login(client, "second"))
    assert client.put(f"/api/users/{admin_id}", headers=second, json={"role": "user"}).status_code == 200
    assert client.get("/api/users", headers=auth).status_code == 403  # demoted at once
    assert client.put(f"/api/users/{other['id']}", headers=second, json={"active": False}).status_code == 409


@pytest.mark.pg
def test_disable_and_delete_end_every_credential_at_once(client, auth, world):
    h, docs, alice = world["h"], world["docs"], world["alice"]
    url = client.post(f"/api/documents/{docs['alpha.txt']}/download-link", headers=h["granted"]).get_json()[
        "url"
    ]
    resp = client.put(f"/api/users/{alice['id']}", headers=auth, json={"active": False})
    assert resp.status_code == 200 and resp.get_json()["active"] is False
    for caller in ("granted", "read", "full"):
        assert client.get("/api/auth/me", headers=h[caller]).status_code == 401, caller
    assert client.get(url).status_code == 401
    resp = client.post("/api/auth/login", json={"username": "alice", "password": PASSWORD})
    assert resp.status_code == 401 and "disabled" in resp.get_json()["detail"]
    # enabled again: she logs in anew; what she had before stays ended
    assert client.put(f"/api/users/{alice['id']}", headers=auth, json={"active": True}).status_code == 200
    fresh = bearer(login(client, "alice"))
    assert client.get("/api/auth/me", headers=fresh).status_code == 200
    for caller in ("granted", "read", "full"):
        assert client.get("/api/auth/me", headers=h[caller]).status_code == 401, caller
    assert client.delete(f"/api/users/{alice['id']}", headers=auth).status_code == 204
    assert client.get("/api/auth/me", headers=fresh).status_code == 401
    assert client.get(f"/api/users/{alice['id']}", headers=auth).status_code == 404


def test_changing_ones_password_ends_the_other_credentials(client, world):
    h = world["h"]
    other_session = bearer(login(client, "alice"))
    resp = client.put(
        "/api/auth/password",
        headers=h["granted"],
        json={"current_password": "not it", "new_password": "a new one 123"},
    )
    assert resp.status_code == 400 and resp.get_json()["detail"].startswith("current_password")
    resp = client.put(
        "/api/auth/password",
        headers=h["granted"],
        json={"current_password": PASSWORD, "new_password": "a new one 123"},
    )
    assert resp.status_code == 200
    new = bearer(resp.get_json()["access_token"])
    assert client.get("/api/auth/me", headers=new).status_code == 200
    for headers in (h["granted"], other_session, h["read"], h["full"]):
        assert client.get("/api/auth/me", headers=headers).status_code == 401
    assert (
        client.post("/api/auth/login", json={"username": "alice", "password": "a new one 123"}).status_code
        == 200
    )


def test_cli_creates_a_token_and_admins_reset_passwords(app, client, auth, world):
    result = app.test_cli_runner().invoke(
        args=["trawl", "create-token", "bob", "--name", "cron", "--scope", "read", "--expires-days", "7"]
    )
    assert result.exit_code == 0, result.output
    token = result.output.strip().splitlines()[-1]
    assert token.startswith("trawl_")
    assert client.get("/api/auth/me", headers=bearer(token)).get_json()["username"] == "bob"
    bad = app.test_cli_runner().invoke(args=["trawl", "create-token", "nobody", "--name", "x"])
    assert bad.exit_code == 1 and "no user 'nobody'" in bad.output
    # -- an admin resets a password
    alice = world["alice"]
    resp = client.put(f"/api/users/{alice['id']}", headers=auth, json={"password": "reset by admin 1"})
    assert resp.status_code == 200
    assert client.get("/api/auth/me", headers=world["h"]["granted"]).status_code == 401
    assert client.get("/api/auth/me", headers=world["h"]["full"]).status_code == 401
    login(client, "alice", "reset by admin 1")


# -- web pages -------------------------------------------------------------------------------------


def _session(app, username: str, password: str = PASSWORD):
    """A browser-like client logged in through the login form."""
    from tests.ui_helpers import login as form_login

    browser = app.test_client()
    assert form_login(browser, username, password).status_code == 302
    return browser


def test_pages_show_a_user_only_what_is_granted_and_hide_admin_actions(app, world):
    docs = world["docs"]
    alice = _session(app, "alice")
    page = alice.get("/?q=kestrel").get_data(as_text=True)
    assert "alpha.txt" in page and "payroll" not in page and "Secret" not in page
    assert 'href="/users"' not in page
    listing = alice.get("/sources").get_data(as_text=True)
    assert "Open" in listing and "Secret" not in listing
    assert "Add a source" not in listing and "Scan now" not in listing and "Edit" not in listing
    status = alice.get("/status").get_data(as_text=True)
    assert "Open" in status and "Secret" not in status and "/admin/rq" not in status
    assert alice.get(f"/documents/{docs['payroll.txt']}").status_code == 404
    assert alice.get(f"/documents/{docs['alpha.txt']}").status_code == 200
    assert alice.get("/sources/secret/status").status_code == 404
    for path in ("/sources/new", "/users", "/sources/open/edit", "/admin/rq/"):
        assert alice.get(path).status_code == 403, path
    from tests.ui_helpers import post

    assert post(alice, "/sources/open/reindex").status_code == 403
    assert post(alice, f"/users/{world['bob']['id']}/delete").status_code == 403
    admin = _session(app, "admin", "correct horse battery")
    assert "Add a source" in admin.get("/sources").get_data(as_text=True)
    assert 'href="/users"' in admin.get("/").get_data(as_text=True)


def test_users_page_creates_edits_and_disables_accounts(app, client, world):
    from tests.ui_helpers import post

    admin = _session(app, "admin", "correct horse battery")
    page = admin.get("/users").get_data(as_text=True)
    assert "alice" in page and "bob" in page
    resp = post(
        admin,
        "/users",
        {"username": "carol", "password": "short", "role": "user", "active": "1"},
        page="/users",
    )
    assert resp.status_code == 400 and "at least 8 characters" in resp.get_data(as_text=True)
    resp = post(
        admin,
        "/users",
        {"username": "carol", "password": PASSWORD, "role": "user", "active": "1", "source_ids": "secret"},
        page="/users",
    )
    assert resp.status_code == 302
    carol = _session(app, "carol")
    assert "payroll" in carol.get("/?q=zeppelin").get_data(as_text=True)
    carol_id = next(
        u["id"]
        for u in client.get("/api/users", headers=world["h"]["admin"]).get_json()
        if u["username"] == "carol"
    )
    resp = post(
        admin,
        f"/users/{carol_id}",
        {"username": "carol", "role": "user", "source_ids": "secret"},
        page="/users",
    )
    assert resp.status_code == 302  # `active` unchecked: disabled
    assert carol.get("/").status_code == 302  # her session ended: back to the login page
    admin_id = client.get("/api/auth/me", headers=world["h"]["admin"]).get_json()["id"]
    resp = post(
        admin, f"/users/{admin_id}", {"username": "admin", "role": "user", "active": "1"}, page="/users"
    )
    assert resp.status_code == 409 and "last active admin" in resp.get_data(as_text=True)


def test_account_pages_change_the_password_and_manage_tokens(app, client, world):
    from tests.ui_helpers import post

    alice = _session(app, "alice")
    other = _session(app, "alice")
    resp = post(
        alice,
        "/account/tokens",
        {"name": "laptop", "scope": "read", "expires_in_days": "5"},
        page="/account/tokens",
    )
    page = resp.get_data(as_text=True)
    secret = page.split('class="token-secret">')[1].split("<")[0]
    assert resp.status_code == 200 and secret.startswith("trawl_")
    assert client.get("/api/auth/me", headers=bearer(secret)).status_code == 200
    assert secret not in alice.get("/account/tokens").get_data(as_text=True)  # shown once
    token_id = next(
        t["id"] for t in client.get("/api/tokens", headers=bearer(secret)).get_json() if t["name"] == "laptop"
    )
    assert post(alice, f"/account/tokens/{token_id}/delete", page="/account/tokens").status_code == 302
    assert client.get("/api/auth/me", headers=bearer(secret)).status_code == 401
    resp = post(
        alice,
        "/account",
        {
            "current_password": PASSWORD,
            "new_password": "new pass 123",
            "new_password_confirm": "new pass 123",
        },
        page="/account",
    )
    assert resp.status_code == 302
    assert alice.get("/account").status_code == 200  # this session goes on
    assert other.get("/account").status_code == 302  # the other one has ended
    assert client.get("/api/auth/me", headers=world["h"]["granted"]).status_code == 401


@pytest.mark.pg
def test_ids_beyond_the_integer_range_are_missing(client, auth):
    """An id no integer column can hold is a 404 like any missing one (PostgreSQL refused it
    and the request was a 500)."""
    huge = 6_677_404_319_914_808
    for method, path in (
        ("GET", f"/api/users/{huge}"),
        ("PUT", f"/api/users/{huge}"),
        ("DELETE", f"/api/users/{huge}"),
        ("DELETE", f"/api/tokens/{huge}"),
        ("DELETE", f"/api/saved-searches/{huge}"),
    ):
        body = {"active": True} if method == "PUT" else None
        resp = client.open(path, method=method, headers=auth, json=body)
        assert resp.status_code == 404, (method, path, resp.get_data())


def test_a_hidden_document_is_refused_before_it_is_read(app, client, world, monkeypatch):
    """Access is decided from the id before the index is asked: a hidden document's id and a
    missing one of the same source take the same path (same status, same body, nothing read),
    on the document, its similar documents, the document page and its raw file."""
    from webapp.runtime import get_search

    docs, h = world["docs"], world["h"]
    backend = get_search(app)
    reads: list[str] = []
    original = backend.get
    monkeypatch.setattr(backend, "get", lambda doc_id: reads.append(doc_id) or original(doc_id))
    hidden, missing = docs["payroll.txt"], "secret--" + "0" * 12
    alice = _session(app, "alice")
    for path in ("/api/documents/{}", "/api/documents/{}/similar"):
        a = client.get(path.format(hidden), headers=h["granted"])
        b = client.get(path.format(missing), headers=h["granted"])
        assert a.status_code == b.status_code == 404, path
        assert a.get_json()["detail"].replace(hidden, "ID") == b.get_json()["detail"].replace(missing, "ID")
    for path in ("/documents/{}", "/documents/{}/file"):
        a, b = alice.get(path.format(hidden)), alice.get(path.format(missing))
        assert a.status_code == b.status_code == 404, path
        shown = a.get_data(as_text=True).replace(hidden, "ID")
        assert shown == b.get_data(as_text=True).replace(missing, "ID")
    assert reads == []
    assert client.get(f"/api/documents/{docs['alpha.txt']}", headers=h["granted"]).status_code == 200
    assert reads == [docs["alpha.txt"]]
