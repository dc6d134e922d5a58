"""The RQ dashboard at /admin/rq is for a logged-in admin only."""

from __future__ import annotations

from tests.ui_helpers import login


def _log_in(client):
    assert login(client).status_code == 302


def test_anonymous_and_bearer_token_users_are_sent_to_login(client, auth):
    for headers in ({}, auth):
        resp = client.get("/admin/rq/", headers=headers)
        assert resp.status_code == 302 and "/login" in resp.headers["Location"]
    delete = client.post("/admin/rq/job/x/delete")
    assert delete.status_code == 302


def test_an_admin_session_sees_the_dashboard(client, token):
    _log_in(client)
    resp = client.get("/admin/rq/")
    assert resp.status_code == 200 and b"RQ" in resp.data
    assert client.get("/admin/rq/0/data/queues.json").status_code == 200


def _dashboard_csrf(client) -> str:
    """The token the dashboard's script reads from its cookie and sends back as X-CSRFToken."""
    assert client.get("/admin/rq/").status_code == 200
    cookie = client.get_cookie("_csrf_token", path="/admin/rq")
    assert cookie is not None and not cookie.http_only
    return cookie.value


def test_dashboard_actions_need_our_origin_and_csrf_token(app, client, token):
    from webapp.runtime import get_queue

    get_queue(app).enqueue("os.getcwd")
    _log_in(client)
    csrf = _dashboard_csrf(client)
    url = "/admin/rq/queue/trawl/compact"
    origin = {"Origin": "http://localhost"}
    for headers in (
        {},
        origin,
        {"X-CSRFToken": csrf},
        {**origin, "X-CSRFToken": "forged"},
        {"Origin": "http://evil.example", "X-CSRFToken": csrf},
    ):
        refused = client.post(url, headers=headers)
        assert refused.status_code == 403 and set(refused.get_json()) == {"detail"}, headers
    ok = client.post(url, headers={**origin, "X-CSRFToken": csrf})
    assert ok.status_code == 200 and ok.get_json()["status"] == "OK"


def test_requeue_is_not_reachable_by_a_cross_site_get(app, client, token):
    """<img src=/admin/rq/requeue/trawl> on another site must not requeue failed jobs."""
    from rq.registry import FailedJobRegistry

    from webapp.runtime import get_queue, get_redis

    job = get_queue(app).enqueue("os.getcwd")
    registry = FailedJobRegistry("trawl", connection=get_redis(app))
    registry.add(job, ttl=600, exc_string="boom")
    _log_in(client)
    resp = client.get("/admin/rq/requeue/trawl", headers={"Referer": "http://evil.example/"})
    assert resp.status_code == 405 and set(resp.get_json()) == {"detail"}
    assert registry.get_job_ids() == [job.id]  # still failed, not requeued
    csrf = _dashboard_csrf(client)
    done = client.post("/admin/rq/requeue/trawl", headers={"Origin": "http://localhost", "X-CSRFToken": csrf})
    assert done.status_code == 200 and done.get_json()["count"] == 1


def test_bad_dashboard_paths_answer_4xx_not_500(app, client, token):
    _log_in(client)
    csrf = _dashboard_csrf(client)
    gets = {
        "/admin/rq/0/view/job/no-such-job": 404,
        "/admin/rq/0/data/job/no-such-job.json": 404,
        "/admin/rq/1/view": 404,
        "/admin/rq/7/data/queues.json": 404,
        "/admin/rq/0/data/jobs/trawl/bogus/8/asc/1.json": 404,
        "/admin/rq/0/data/jobs/trawl/failed/0/asc/1.json": 400,
        "/admin/rq/0/data/jobs/trawl/failed/x/asc/1.json": 400,
        "/admin/rq/0/data/jobs/trawl/failed/8/up/1.json": 400,
        "/admin/rq/0/data/jobs/trawl/failed/8/asc/0.json": 400,
        "/admin/rq/0/view/jobs/trawl/bogus/8/asc/1": 404,
    }
    for url, status in gets.items():
        resp = client.get(url)
        assert resp.status_code == status, (url, resp.status_code)
        if url.endswith(".json"):
            assert set(resp.get_json()) == {"detail"}, url
    posted = client.post(
        "/admin/rq/job/no-such-job/requeue", headers={"Origin": "http://localhost", "X-CSRFToken": csrf}
    )
    assert posted.status_code == 404 and set(posted.get_json()) == {"detail"}
    fine = client.get("/admin/rq/0/data/jobs/trawl/failed/8/dsc/1.json")
    assert fine.status_code == 200 and fine.get_json()["jobs"] == []


def test_dashboard_pages_get_their_own_policy_and_the_site_keeps_its_strict_one(client, token):
    _log_in(client)
    dash = client.get("/admin/rq/").headers["Content-Security-Policy"]
    assert "'unsafe-eval'" in dash and "frame-ancestors 'none'" in dash
    site = client.get("/").headers["Content-Security-Policy"]
    assert "unsafe-eval" not in site and "unsafe-inline" not in site.split("script-src")[1]


def test_the_dashboard_opens_on_trawls_queue_counts_what_it_lists_and_links_back(app, client, token):
    """Its Jobs tab shows Trawl's queue (not RQ's "default"), a failed job that expired is
    neither counted nor listed, and every page has a way back to Trawl."""
    import time

    from rq.registry import FailedJobRegistry

    from webapp.runtime import get_queue, get_redis

    _log_in(client)
    status = client.get("/status").get_data(as_text=True)
    assert 'href="/admin/rq/0/view/jobs/trawl/queued/8/asc/1"' in status
    jobs_tab = client.get("/admin/rq/0/view/jobs")
    assert jobs_tab.status_code == 302
    assert jobs_tab.headers["Location"].endswith("/admin/rq/0/view/jobs/trawl/queued/8/asc/1")
    page = client.get("/admin/rq/0/view/jobs/trawl/queued/8/asc/1").get_data(as_text=True)
    assert 'href="/status"' in page and "Back to Trawl" in page
    registry = FailedJobRegistry("trawl", connection=get_redis(app))
    kept = get_queue(app).enqueue("os.getcwd")
    registry.add(kept, ttl=600, exc_string="boom")
    gone = get_queue(app).enqueue("os.getpid")
    registry.add(gone, ttl=1, exc_string="boom")
    time.sleep(1.5)
    queues = client.get("/admin/rq/0/data/queues.json").get_json()["queues"]
    trawl = next(q for q in queues if q["name"] == "trawl")
    listed = client.get("/admin/rq/0/data/jobs/trawl/failed/8/asc/1.json").get_json()["jobs"]
    assert trawl["failed_job_registry_count"] == len(listed) == 1
