"""The RQ dashboard at /admin/rq is for a logged-in admin only."""

from __future__ import annotations

import time


def _log_in(client, user_id=1):
    with client.session_transaction() as sess:
        sess["uid"] = user_id
        sess["iat"] = int(time.time())
        sess["csrf"] = "t"
        sess.permanent = True


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


def test_dashboard_actions_need_our_own_origin(app, client, token):
    from webapp.runtime import get_queue

    get_queue(app).enqueue("os.getcwd")
    _log_in(client)
    assert client.post("/admin/rq/queue/trawl/compact").status_code == 403
    ok = client.post("/admin/rq/queue/trawl/compact", headers={"Origin": "http://localhost"})
    assert ok.status_code == 200
