"""Source endpoints: ids, defaults, validation, allowed roots, partial update, delete, test-path."""

from __future__ import annotations

import os

import pytest

from webapp.indexing.globs import DEFAULT_EXCLUDE

# the database dialect matters here: these run in the PostgreSQL pass too (tests/conftest.py)
pytestmark = pytest.mark.pg


def test_create_with_defaults_and_slug_id(client, auth, make_tree):
    root = make_tree("photos", {"a.txt": "x"})
    resp = client.post("/api/sources", headers=auth, json={"name": "Café Photos!", "root_path": str(root)})
    assert resp.status_code == 201
    body = resp.get_json()
    assert body["id"] == "cafe-photos"
    assert body["include_patterns"] == ["**/*"]
    assert body["exclude_patterns"] == DEFAULT_EXCLUDE and "**/.git/**" in DEFAULT_EXCLUDE
    assert body["scan_schedule"] is None and body["next_scan_at"] is None
    assert body["state"] == "idle" and body["document_count"] == 0 and body["failed_count"] == 0
    assert body["root_path"] == os.path.realpath(root)
    assert "T" in body["created_at"] and not body["created_at"].endswith("Z")
    again = client.post(
        "/api/sources",
        headers=auth,
        json={"name": "Cafe photos", "root_path": str(root), "allow_overlap": True},
    )
    assert again.get_json()["id"] == "cafe-photos-2"


def test_given_id_must_be_valid_and_unused(client, auth, make_tree):
    root = make_tree("docs", {})
    ok = client.post(
        "/api/sources", headers=auth, json={"id": "team-docs", "name": "Docs", "root_path": str(root)}
    )
    assert ok.status_code == 201 and ok.get_json()["id"] == "team-docs"
    dup = client.post(
        "/api/sources", headers=auth, json={"id": "team-docs", "name": "Docs", "root_path": str(root)}
    )
    assert dup.status_code == 409 and dup.get_json() == {"detail": "Source 'team-docs' already exists"}
    for bad in ("Team", "-x", "a" * 64, "docs\n", "a b"):
        resp = client.post(
            "/api/sources", headers=auth, json={"id": bad, "name": "Docs", "root_path": str(root)}
        )
        assert resp.status_code == 400 and resp.get_json()["detail"].startswith("id:"), bad


def test_invalid_input_is_400_naming_the_field(client, auth, make_tree):
    root = str(make_tree("docs", {}))
    cases = [
        ({"root_path": root}, "name: is required"),
        ({"name": "x"}, "root_path: is required"),
        ({"name": "", "root_path": root}, "name:"),
        ({"name": "x", "root_path": root, "colour": "red"}, "colour: unknown field"),
        ({"name": "x", "root_path": root, "include_patterns": ["/etc/**"]}, "include_patterns:"),
        ({"name": "x", "root_path": root, "exclude_patterns": ["../**"]}, "exclude_patterns:"),
        ({"name": "x", "root_path": root, "include_patterns": [""]}, "include_patterns:"),
        ({"name": "x", "root_path": root, "include_patterns": ["{a,b"]}, "include_patterns:"),
        ({"name": "x", "root_path": root, "scan_schedule": "61 * * * *"}, "scan_schedule:"),
        ({"name": "x", "root_path": root, "scan_schedule": "@sometimes"}, "scan_schedule:"),
        ({"name": "x", "root_path": root + "/missing"}, "root_path: the path does not exist"),
        ({"name": "x", "root_path": "relative/path"}, "root_path:"),
        ({"name": 5, "root_path": root}, "name:"),
    ]
    for body, detail in cases:
        resp = client.post("/api/sources", headers=auth, json=body)
        assert resp.status_code == 400, body
        assert set(resp.get_json()) == {"detail"}
        assert resp.get_json()["detail"].startswith(detail), (body, resp.get_json())
    assert client.get("/api/sources", headers=auth).get_json() == []


def test_root_must_be_inside_allowed_roots_after_resolving_symlinks(client, auth, make_tree, scratch):
    outside = scratch / "secret"
    outside.mkdir()
    inside = make_tree("docs", {})
    link = inside.parent / "sneaky"
    link.symlink_to(outside)
    for path in (outside, link, "/etc"):
        resp = client.post("/api/sources", headers=auth, json={"name": "x", "root_path": str(path)})
        assert resp.status_code == 400
        assert resp.get_json()["detail"] == "root_path: the path is outside the allowed roots"


def test_a_file_is_not_a_root(client, auth, make_tree):
    root = make_tree("docs", {"a.txt": "x"})
    resp = client.post("/api/sources", headers=auth, json={"name": "x", "root_path": str(root / "a.txt")})
    assert resp.get_json() == {"detail": "root_path: the path is not a directory"}


def test_get_update_and_delete(client, auth, make_tree, make_source):
    root = make_tree("docs", {})
    other = make_tree("other", {})
    src = make_source(root, name="Docs", scan_schedule="@daily")
    assert src["next_scan_at"].endswith("02:00:00")
    path = f"/api/sources/{src['id']}"
    assert client.get(path, headers=auth).get_json() == src
    upd = client.put(
        path,
        headers=auth,
        json={"name": "Team docs", "root_path": str(other), "include_patterns": ["**/*.md"]},
    )
    assert upd.status_code == 200
    body = upd.get_json()
    assert body["name"] == "Team docs" and body["include_patterns"] == ["**/*.md"]
    assert body["scan_schedule"] == "@daily" and body["id"] == src["id"]
    assert body["updated_at"] >= src["updated_at"]
    reset = client.put(path, headers=auth, json={"include_patterns": None, "scan_schedule": None})
    assert reset.get_json()["include_patterns"] == ["**/*"]
    assert reset.get_json()["scan_schedule"] is None and reset.get_json()["next_scan_at"] is None
    bad = client.put(path, headers=auth, json={"id": "new-id"})
    assert bad.status_code == 400
    assert client.delete(path, headers=auth).status_code == 204
    assert client.get(path, headers=auth).status_code == 404
    assert client.get(path, headers=auth).get_json() == {"detail": f"Source '{src['id']}' not found"}
    assert client.delete(path, headers=auth).status_code == 404
    assert os.path.isdir(root)


def test_unknown_source_is_404_everywhere(client, auth):
    for method, url in (
        ("get", "/api/sources/nope"),
        ("put", "/api/sources/nope"),
        ("delete", "/api/sources/nope"),
        ("post", "/api/sources/nope/reindex"),
        ("post", "/api/sources/nope/clear-stale"),
        ("get", "/api/status/nope"),
    ):
        kwargs = {"json": {"name": "x"}} if method == "put" else {}
        resp = getattr(client, method)(url, headers=auth, **kwargs)
        assert resp.status_code == 404, url
        assert set(resp.get_json()) == {"detail"}


def test_sources_need_a_token(client):
    for method, url in (
        ("get", "/api/sources"),
        ("post", "/api/sources"),
        ("get", "/api/sources/x"),
        ("post", "/api/sources/test-path"),
        ("post", "/api/sources/x/reindex"),
        ("delete", "/api/sources/x"),
    ):
        assert getattr(client, method)(url).status_code == 401


def test_test_path_reports_without_disclosing_outside(client, auth, make_tree, scratch):
    root = make_tree("docs", {"a.txt": "x"})
    ok = client.post("/api/sources/test-path", headers=auth, json={"root_path": str(root)})
    body = ok.get_json()
    assert ok.status_code == 200 and body["ok"] is True
    assert body["inside_allowed_roots"] and body["exists"] and body["is_directory"]
    assert body["readable"] and body["visible"]
    assert set(body) == {
        "path",
        "ok",
        "visible",
        "inside_allowed_roots",
        "exists",
        "is_directory",
        "readable",
        "allowed_roots",
        "message",
        "hint",
    }
    missing = client.post(
        "/api/sources/test-path", headers=auth, json={"root_path": str(root / "nope")}
    ).get_json()
    assert missing["inside_allowed_roots"] and not missing["exists"] and not missing["ok"]
    outside = client.post("/api/sources/test-path", headers=auth, json={"root_path": str(scratch)}).get_json()
    assert outside["inside_allowed_roots"] is False
    assert outside["exists"] is outside["is_directory"] is outside["readable"] is False
    assert outside["path"] == str(scratch)
    etc = client.post("/api/sources/test-path", headers=auth, json={"root_path": "/etc/passwd"}).get_json()
    assert etc["exists"] is False and etc["message"] == "The path is outside the allowed roots"
    assert client.get("/api/sources", headers=auth).get_json() == []


def test_source_fields_get_the_same_answer_from_the_api_the_form_and_the_cli(app, client, auth, make_tree):
    from tests.ui_helpers import post

    root = str(make_tree("docs", {}))
    ui = app.test_client()
    assert (
        post(
            ui, "/login", {"username": "admin", "password": "correct horse battery"}, page="/login"
        ).status_code
        == 302
    )
    cases = {
        "   ": "name: must be 1 to 200 characters",
        "a" * 201: "name: must be 1 to 200 characters",
        "bad\x00name": "name: must not contain control characters",
        "two\nlines": "name: must not contain control characters",
    }
    for name, detail in cases.items():
        api = client.post("/api/sources", headers=auth, json={"name": name, "root_path": root})
        assert api.status_code == 400 and api.get_json() == {"detail": detail}, name
        form = post(
            ui,
            "/sources/new",
            {"name": name, "root_path": root, "schedule_choice": "manual"},
            page="/sources/new",
        )
        in_label = "Name" + detail[len("name") :]  # the form speaks in the field's label
        assert form.status_code == 400 and in_label in form.get_data(as_text=True), name
        cli = app.test_cli_runner().invoke(args=["trawl", "add-source", name, root])
        assert cli.exit_code == 1 and f"Error: {detail}" in cli.output, (name, cli.output)
    assert client.get("/api/sources", headers=auth).get_json() == []
    ok = app.test_cli_runner().invoke(args=["trawl", "add-source", "  Spaced  ", root])
    assert ok.exit_code == 0 and '"name": "Spaced"' in ok.output
    renamed = client.put("/api/sources/spaced", headers=auth, json={"name": "\x00"})
    assert renamed.get_json() == {"detail": "name: must not contain control characters"}
    assert client.put("/api/sources/spaced", headers=auth, json={"name": "x" * 200}).status_code == 200


def test_one_folder_one_source(app, client, auth, make_tree, make_source):
    """The same folder, one inside it or one around it is refused naming the source that has it
    (API 409, the form beside the Folder field, the CLI); allow_overlap accepts it explicitly."""
    from tests.ui_helpers import post

    top = make_tree("team", {"reports/a.txt": "x", "other/b.txt": "y"})
    make_source(top / "reports", name="Reports")
    real = os.path.realpath(top / "reports")
    for path, relation in (
        (top / "reports", "is the folder of"),
        (top / "reports" / ".", "is the folder of"),
        (top, "holds the folder of"),
    ):
        resp = client.post("/api/sources", headers=auth, json={"name": "X", "root_path": str(path)})
        assert resp.status_code == 409, resp.get_json()
        detail = resp.get_json()["detail"]
        assert detail.startswith("root_path: ") and relation in detail, detail
        assert "the source “Reports”" in detail and real in detail
    (top / "reports" / "q2").mkdir()
    inside = client.post(
        "/api/sources", headers=auth, json={"name": "Q2", "root_path": str(top / "reports" / "q2")}
    )
    assert inside.status_code == 409 and "is inside the folder of" in inside.get_json()["detail"]
    assert [s["name"] for s in client.get("/api/sources", headers=auth).get_json()] == ["Reports"]
    sibling = make_source(top / "other", name="Other")  # a folder beside it is fine
    moved = client.put(
        f"/api/sources/{sibling['id']}", headers=auth, json={"root_path": str(top / "reports")}
    )
    assert moved.status_code == 409 and "the source “Reports”" in moved.get_json()["detail"]
    renamed = client.put(
        f"/api/sources/{sibling['id']}",
        headers=auth,
        json={"name": "Others", "root_path": str(top / "other")},
    )
    assert renamed.status_code == 200  # its own folder, kept: no overlap with itself

    ui = app.test_client()
    assert (
        post(
            ui, "/login", {"username": "admin", "password": "correct horse battery"}, page="/login"
        ).status_code
        == 302
    )
    form = post(
        ui,
        "/sources/new",
        {"name": "Team", "root_path": str(top), "schedule_choice": "manual"},
        page="/sources/new",
    )
    html = form.get_data(as_text=True)
    assert form.status_code == 400 and 'id="root_path-error"' in html
    assert "Folder: " in html and "holds the folder of the source “Others”" in html  # first by name
    assert 'name="allow_overlap"' in html  # the explicit override is offered there
    cli = app.test_cli_runner().invoke(args=["trawl", "add-source", "Team", str(top)])
    assert cli.exit_code == 1 and "holds the folder of the source “Others”" in cli.output, cli.output

    allowed = post(
        ui,
        "/sources/new",
        {"name": "Team", "root_path": str(top), "allow_overlap": "1", "schedule_choice": "manual"},
        page="/sources/new",
    )
    assert allowed.status_code == 302
    bad = client.post(
        "/api/sources", headers=auth, json={"name": "Y", "root_path": str(top), "allow_overlap": "perhaps"}
    )
    assert bad.status_code == 400 and bad.get_json()["detail"].startswith("allow_overlap")


def test_overlapping_sources_show_a_file_once(client, auth, make_tree, make_source, run_jobs):
    """A file indexed by two overlapping sources (allowed) is one hit in search."""
    top = make_tree("shared", {"notes/plan.txt": "the zeppelin plan", "memo.txt": "zeppelin memo"})
    outer = make_source(top, name="Everything")
    inner = make_source(top / "notes", name="Notes", allow_overlap=True)
    for sid in (outer["id"], inner["id"]):
        assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_jobs()
    per_source = [
        client.post("/api/search", headers=auth, json={"q": "zeppelin", "source_id": sid}).get_json()["total"]
        for sid in (outer["id"], inner["id"])
    ]
    assert per_source == [2, 1]  # each source holds its copy
    hits = client.post("/api/search", headers=auth, json={"q": "zeppelin"}).get_json()["results"]
    paths = [h["path"] for h in hits]
    assert sorted(paths) == sorted(
        {os.path.realpath(top / "notes/plan.txt"), os.path.realpath(top / "memo.txt")}
    ), paths
