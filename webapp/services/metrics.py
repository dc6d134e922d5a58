"""GET /metrics: who may scrape, and the Prometheus text of every process plus the gauges
read at scrape time (documents per source, queue, workers, index size)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from flask import current_app
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from rq.registry import DeferredJobRegistry, FailedJobRegistry, StartedJobRegistry

from webapp.extensions import db
from webapp.models import Source
from webapp.runtime import get_queue, get_search, worker_count
from webapp.search import SearchBackendError

log = logging.getLogger(__name__)


def scrape() -> tuple[bytes, str]:
    """The text of one scrape and its content type."""
    registry = CollectorRegistry()
    registry.register(_Processes(Path(current_app.config["METRICS_DIR"])))
    registry.register(_Snapshot(live_gauges()))
    return generate_latest(registry), CONTENT_TYPE_LATEST


class _Processes:
    """The series of every process that wrote into METRICS_DIR (one folder per host)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def collect(self) -> Iterable[Metric]:
        return MultiProcessCollector.merge([str(p) for p in self.folder.glob("*/*.db")], accumulate=True)


class _Snapshot:
    """A collector that yields metric families measured beforehand (in the request)."""

    def __init__(self, families: list[GaugeMetricFamily]) -> None:
        self.families = families

    def collect(self) -> list[GaugeMetricFamily]:
        return self.families


def live_gauges() -> list[GaugeMetricFamily]:
    """Queue and worker counts from Redis; documents and index size from the search engine."""
    queue = get_queue()
    jobs = GaugeMetricFamily("trawl_queue_jobs", "Jobs of the scan queue, by state", labels=["state"])
    for state, count in (
        ("queued", queue.count),
        ("started", StartedJobRegistry(queue=queue).count),
        ("deferred", DeferredJobRegistry(queue=queue).count),
        ("failed", FailedJobRegistry(queue=queue).count),
    ):
        jobs.add_metric([state], count)
    workers = GaugeMetricFamily(
        "trawl_workers", "RQ workers serving the scan queue", value=worker_count(queue)
    )
    return [jobs, workers, *_index_gauges()]


def _index_gauges() -> list[GaugeMetricFamily]:
    """Documents per source and the index's size; none while the engine cannot answer (the
    series of the processes are still worth a scrape)."""
    try:
        search = get_search()
        documents = GaugeMetricFamily(
            "trawl_documents", "Documents in the search index, by source", labels=["source"]
        )
        for (source_id,) in db.session.query(Source.id).order_by(Source.id):
            documents.add_metric([source_id], search.count(source_id))
        size = GaugeMetricFamily(
            "trawl_index_bytes", "Size of the search index on disk", value=search.disk_bytes()
        )
    except SearchBackendError as exc:
        log.warning("Metrics without the index gauges: %s", exc)
        return []
    return [documents, size]
