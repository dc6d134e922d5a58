"""Schemathesis fuzzing of every endpoint of /openapi.json, in process and authenticated.

Each operation gets a bounded number of generated requests (schema-valid ones, then invalid
ones) against the WSGI app with an admin's bearer token and one indexed source; no answer may be
a 5xx, use a status the schema does not document, or carry a body that violates the schema.
"""

from __future__ import annotations

import json

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance, content_type_conformance]
MAX_EXAMPLES = 10


@pytest.fixture
def fuzz_target(app, client, auth, make_tree, make_source, run_jobs):
    """The app with one scanned source, and the headers of an admin."""
    root = make_tree("docs", {"a.txt": "alpha <b>bold</b> report", "b.md": "# Bravo\nnotes"})
    sid = make_source(root, id="docs")["id"]
    client.post(f"/api/sources/{sid}/reindex", headers=auth)
    run_jobs()
    app.config["AUTH_RATE_LIMIT"] = "100000/minute"  # setup and login are fuzzed too
    app.config["LOGIN_USER_RATE_LIMIT"] = "100000/minute"
    return app, auth


def _operations(app):
    schema = schemathesis.openapi.from_wsgi("/openapi.json", app)
    for result in schema.get_all_operations():
        yield result.ok()


def _fresh_token(app) -> dict:
    """Headers with a new token of the admin (logout revokes the token it is called with)."""
    from webapp.models import User
    from webapp.services.auth import issue_token

    with app.app_context():
        from webapp.extensions import db

        token = issue_token(db.session.query(User).first())["access_token"]
    return {"Authorization": f"Bearer {token}"}


def _fuzz(app, operation, mode: GenerationMode, auth: dict) -> str | None:
    """Run the bounded fuzz of one operation; the first failure as text, or None."""
    revokes = operation.label == "POST /api/auth/logout"

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def run(case):
        headers = _fresh_token(app) if revokes else auth
        case.call_and_validate(headers=headers, checks=CHECKS)

    try:
        run()
    except Unsatisfiable:
        return None  # no invalid request exists for an operation without inputs
    except Exception as exc:  # noqa: BLE001 - collect every operation's failure, then report
        return f"{operation.label}: {str(exc)[:1500]}"
    return None


@pytest.mark.slow
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["valid", "invalid"])
def test_no_server_errors_and_responses_match_the_schema(fuzz_target, mode):
    app, auth = fuzz_target
    operations = list(_operations(app))
    assert len(operations) >= 20  # every endpoint of the interface is in the schema
    failures = [f for op in operations if (f := _fuzz(app, op, mode, auth))]
    assert not failures, "\n\n".join(failures)
    me = app.test_client().get("/api/auth/me", headers=auth)
    assert me.status_code == 200  # the run was authenticated to the end


BIG = "1" * 5000  # past Python's 4,300-digit int conversion limit
SURROGATE = '"\\ud800"'  # half a UTF-16 pair: valid JSON syntax, no UTF-8 text can hold it


def _hostile_bodies(body) -> list[tuple[str, str]]:
    """(what, raw JSON text) variants of a valid body: each top-level field in turn a
    5,000-digit integer and a lone surrogate, a lone surrogate as a key, the body a huge
    number. The text is written by hand: json.dumps cannot write such an integer."""
    variants = [("body is a huge integer", BIG), ("body is a lone surrogate", SURROGATE)]
    if isinstance(body, dict):
        variants.append(("a key is a lone surrogate", "{" + SURROGATE + ": 1}"))
        for key in body:
            for what, raw in (("huge integer", BIG), ("lone surrogate", SURROGATE)):
                marker = "@@HOSTILE@@"
                text = json.dumps({**body, key: marker}).replace(f'"{marker}"', raw)
                variants.append((f"{key}: {what}", text))
    return variants


@pytest.fixture
def hostile_target(fuzz_target, client):
    """The fuzz target, and real ids for path parameters (a source, a second user) so that
    each body reaches the view that would store it."""
    app, auth = fuzz_target
    made = client.post(
        "/api/users", headers=auth, json={"username": "fuzzed", "password": "another long password"}
    )
    assert made.status_code == 201, made.get_json()
    return app, auth, {"source_id": "docs", "user_id": made.get_json()["id"]}


def _hostile_run(client, operation, ids: dict, auth: dict, failures: list) -> int:
    """Send the hostile variants of a few schema-valid bodies of one operation; how many."""
    path = operation.path.format(**{p: v for p, v in ids.items() if f"{{{p}}}" in operation.path})
    sent = []

    @given(case=operation.as_strategy(generation_mode=GenerationMode.POSITIVE))
    @settings(
        max_examples=3,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    def run(case):
        for what, raw in _hostile_bodies(case.body):
            sent.append(what)
            resp = client.open(
                path,
                method=operation.method.upper(),
                data=raw,
                headers={**auth, "Content-Type": "application/json"},
            )
            body = resp.get_json(silent=True) or {}
            if resp.status_code != 400 or not isinstance(body.get("detail"), str):
                failures.append(
                    f"{operation.label} ({what}): {resp.status_code} {resp.get_data(as_text=True)[:200]}"
                )

    run()
    return len(sent)


def test_huge_numbers_and_lone_surrogates_in_every_body_are_400(hostile_target):
    """Every operation with a JSON body (setup and login among them), given schema-valid
    bodies whose fields are in turn a 5,000-digit integer or a lone surrogate: a 400 with a
    `detail`, never a 500."""
    app, auth, ids = hostile_target
    client = app.test_client()
    operations = [op for op in _operations(app) if op.body]
    assert len(operations) >= 11
    failures: list[str] = []
    sent = sum(_hostile_run(client, op, ids, auth, failures) for op in operations)
    assert sent > 100
    broken = sorted({f.split(" (")[0] for f in failures})
    assert not failures, f"{len(failures)} of {sent} bodies failed, on {broken}:\n" + "\n".join(failures[:20])
    assert client.get("/api/auth/me", headers=auth).status_code == 200
