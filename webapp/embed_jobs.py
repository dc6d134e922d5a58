"""RQ jobs of the embedding phase (meaning, indexing/embed_phase.py) and the helpers that queue
them: on the low-priority queue the OCR jobs use, which workers serve when the main one is
empty. jobs.py queues the phase after a scan, a live update and an OCR job."""

from __future__ import annotations

from flask import Flask, current_app

from webapp import keys
from webapp.extensions import db
from webapp.indexing.background import enqueue_once, stalled
from webapp.indexing.embed_phase import KIND, EmbedRun, follow_model, pending_count, pending_sources, problem
from webapp.indexing.state import writer_lock
from webapp.models import Source
from webapp.runtime import get_meaning, get_queue, get_redis


def embed_job(source_id: str) -> int:
    """Embed a source's waiting documents for a while; queue the rest behind other jobs."""
    app = current_app._get_current_object()
    with app.app_context():
        get_redis(app).delete(keys.embed_queued(source_id))  # from now on a new job may queue
        run = EmbedRun(app, source_id)
        done = run.run()
        if run.ran and not run.stopped:  # a stopped run is queued again by what stopped it
            enqueue_embed(source_id)
        return done


def enqueue_embed(source_id: str) -> None:
    """Queue an embedding job when the source has meaning on, documents wait and none is
    queued yet."""
    source = db.session.get(Source, source_id)
    if source is None or not source.semantic or not pending_count(source_id):
        return
    enqueue_once(
        embed_job,
        source_id,
        keys.embed_queued(source_id),
        keys.EMBED_JOB_TIMEOUT,
        keys.EMBED_RESULT_TTL,
        keys.EMBED_FAILURE_TTL,
    )


def drop_vectors_job(source_id: str) -> int:
    """Meaning switched off: remove the source's vectors (where the engine holds them, a
    partial update of every document, hence a job). Nothing when the source is gone or was
    switched on again meanwhile (its documents are being embedded anew)."""
    app = current_app._get_current_object()
    with app.app_context():
        source = db.session.get(Source, source_id)
        if source is None or source.semantic:
            return 0
        with writer_lock(source_id, app):  # after an embedding write in progress, not within
            get_meaning(app).delete_source(source_id)
        return 1


def enqueue_drop_vectors(source_id: str) -> None:
    """Queue drop_vectors_job on the main queue (as a rename's rewrite)."""
    get_queue().enqueue(
        drop_vectors_job, source_id, job_timeout=keys.RENAME_JOB_TIMEOUT, result_ttl=keys.RENAME_RESULT_TTL
    )


def resume_embed(app: Flask) -> int:
    """At scheduler start: queue the phase for every source whose documents still wait for it
    (all of them when the model changed: follow_model), and sweep the temporary files killed
    writers left among the vectors."""
    with app.app_context():
        get_meaning(app).sweep()
        follow_model(app)
        sources = pending_sources()
        for source_id in sources:
            enqueue_embed(source_id)
        return len(sources)


def requeue_stalled_embed(app: Flask) -> list[str]:
    """The scheduler's sweep: queue the phase again for every source whose documents have
    waited with no job for background.STALL_SECONDS (after its error's backoff, if any;
    never for vectors that cannot be read: verify --repair first)."""
    with app.app_context():
        again = [
            sid
            for sid in stalled(KIND, pending_sources(), keys.embed_running, keys.embed_queued)
            if not problem(sid)
        ]
        for source_id in again:
            enqueue_embed(source_id)
        return again
