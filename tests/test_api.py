"""API-wide behaviour: error bodies, request ids, body limit, health, OpenAPI and the docs pages."""

from __future__ import annotations

import redis

from tests.conftest import redis_once


def test_every_api_error_has_only_a_detail(client, auth):
    cases = [
        client.get("/api/nothing-here"),
        client.get("/api/nothing-here", headers=auth),
        client.delete("/api/auth/status"),
        client.post("/api/search", headers=auth, data="{not json", content_type="application/json"),
        client.post("/api/search", headers=auth, data="q=x", content_type="text/plain"),
    ]
    for resp in cases:
        assert resp.status_code in (400, 404, 405, 415), resp.status_code
        assert resp.is_json and set(resp.get_json()) == {"detail"}, resp.get_data()
    assert cases[0].status_code == 404 and cases[2].status_code == 405


def test_oversize_body_is_413(client, auth):
    resp = client.post("/api/search", headers=auth, json={"q": "x" * (1024 * 1024 + 10)})
    assert resp.status_code == 413
    assert resp.get_json() == {"detail": "Request body is too large (limit 1 MiB)"}


def test_request_id_is_echoed_or_made(client):
    mine = client.get("/api/health", headers={"X-Request-ID": "abc-123"})
    assert mine.headers["X-Request-ID"] == "abc-123"
    made = client.get("/api/auth/status")
    assert len(made.headers["X-Request-ID"]) >= 16


def test_security_headers(client):
    resp = client.get("/api/health")
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert "frame-ancestors 'none'" in resp.headers["Content-Security-Policy"]
    assert "default-src 'self'" in resp.headers["Content-Security-Policy"]
    assert resp.headers["Referrer-Policy"]


def test_health_is_public_and_ok(client):
    resp = client.get("/api/health")
    assert resp.status_code == 200
    body = resp.get_json()
    assert body["status"] == "ok" and body["setup_required"] is True and body["version"]
    semantic = body["components"].pop("semantic")
    assert body["components"] == {"database": "ok", "redis": "ok", "search": "ok", "disk": "ok", "ocr": "off"}
    assert semantic.startswith("ok: multilingual-e5-small")  # the bundled model (meaning)


def _unreachable_redis() -> redis.Redis:
    """A client of a Redis that refuses connections (at once: redis_once)."""
    return redis_once("127.0.0.1", 1, socket_connect_timeout=0.5)


def test_health_is_503_when_redis_is_down(app):
    from webapp.runtime import get_redis

    app.extensions["trawl.redis"] = _unreachable_redis()
    try:
        resp = app.test_client().get("/api/health")
    finally:
        app.extensions["trawl.redis"] = get_redis(app)
    assert resp.status_code == 503
    body = resp.get_json()
    assert body["status"] == "degraded" and body["components"]["redis"].startswith("error")
    assert body["components"]["database"] == "ok"


def test_openapi_documents_every_endpoint_with_bearer_auth(client):
    spec = client.get("/openapi.json").get_json()
    assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
    paths = spec["paths"]
    expected = {
        ("/api/auth/status", "get"),
        ("/api/auth/setup", "post"),
        ("/api/auth/login", "post"),
        ("/api/auth/me", "get"),
        ("/api/auth/logout", "post"),
        ("/api/search", "post"),
        ("/api/documents/{doc_id}", "get"),
        ("/api/documents/{doc_id}/preview", "get"),
        ("/api/documents/{doc_id}/download-link", "post"),
        ("/api/documents/{doc_id}/download", "get"),
        ("/api/sources", "get"),
        ("/api/sources", "post"),
        ("/api/sources/{source_id}", "get"),
        ("/api/sources/{source_id}", "put"),
        ("/api/sources/{source_id}", "delete"),
        ("/api/sources/test-path", "post"),
        ("/api/sources/{source_id}/reindex", "post"),
        ("/api/sources/{source_id}/clear-stale", "post"),
        ("/api/health", "get"),
        ("/api/status", "get"),
        ("/api/status/{source_id}", "get"),
        ("/api/auth/password", "put"),
        ("/api/users", "get"),
        ("/api/users", "post"),
        ("/api/users/{user_id}", "get"),
        ("/api/users/{user_id}", "put"),
        ("/api/users/{user_id}", "delete"),
        ("/api/tokens", "get"),
        ("/api/tokens", "post"),
        ("/api/tokens/{token_id}", "delete"),
    }
    found = {(p, m) for p, ops in paths.items() for m in ops if m != "parameters"}
    assert expected <= found
    public = {
        ("/api/auth/status", "get"),
        ("/api/auth/setup", "post"),
        ("/api/auth/login", "post"),
        ("/api/health", "get"),
        ("/api/documents/{doc_id}/download", "get"),
    }
    for path, method in expected:
        op = paths[path][method]
        assert op.get("summary"), (path, method)
        if (path, method) not in public:
            assert op.get("security") == [{"bearerAuth": []}], (path, method)
            assert "401" in op["responses"], (path, method)
    error = spec["components"]["schemas"]["Error"]
    assert list(error["properties"]) == ["detail"]


def test_docs_pages_are_served_from_this_server(client):
    for page, asset in (("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")):
        html = client.get(page).get_data(as_text=True)
        assert asset in html and "http" not in html.split("<body>")[1].split("</body>")[0]
        src = next(part.split('"')[0] for part in html.split('src="')[1:] if asset in part)
        assert client.get(src).status_code == 200, src


def test_redis_down_is_503_with_a_detail(app, auth):
    from webapp.runtime import get_redis

    real = get_redis(app)
    app.extensions["trawl.redis"] = _unreachable_redis()
    try:
        resp = app.test_client().get("/api/auth/me", headers=auth)
    finally:
        app.extensions["trawl.redis"] = real
    assert resp.status_code == 503
    assert resp.get_json() == {"detail": "Redis is unavailable; try again shortly"}
