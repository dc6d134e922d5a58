"""Schemathesis fuzzing of every endpoint of /openapi.json, in process and authenticated.

Each operation gets a bounded number of generated requests (schema-valid ones, then invalid
ones) against the WSGI app with an admin's bearer token and one indexed source; no answer may be
a 5xx, use a status the schema does not document, or carry a body that violates the schema.
"""

from __future__ import annotations

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

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance,
          content_type_conformance]
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
    @settings(max_examples=MAX_EXAMPLES, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
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
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
                         ids=["valid", "invalid"])
def test_no_server_errors_and_responses_match_the_schema(fuzz_target, mode):
    app, auth = fuzz_target
    operations = list(_operations(app))
    assert len(operations) >= 20  # every endpoint of the interface is in the schema
    failures = [f for op in operations if (f := _fuzz(app, op, mode, auth))]
    assert not failures, "\n\n".join(failures)
    me = app.test_client().get("/api/auth/me", headers=auth)
    assert me.status_code == 200  # the run was authenticated to the end
