"""GET /metrics: Prometheus text of every web and worker process (see docs/operations.md)."""

from __future__ import annotations

from flask import Response, current_app
from flask.views import MethodView

from webapp.api.common import Blueprint, check_requester, errors
from webapp.services import metrics

blp = Blueprint("metrics", __name__, url_prefix="", description="Prometheus metrics")


@blp.route("/metrics")
class Metrics(MethodView):
    @blp.doc(
        security=[{"bearerAuth": []}],
        responses={
            "200": {
                "description": "Prometheus text format",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            }
        },
    )
    @errors(blp, 401, 403)
    def get(self):
        """Every series of the web and worker processes; an admin's access or API token
        unless METRICS_PUBLIC."""
        if not current_app.config["METRICS_PUBLIC"]:
            check_requester(admin=True)
        body, content_type = metrics.scrape()
        return Response(body, content_type=content_type, headers={"Cache-Control": "no-store"})
