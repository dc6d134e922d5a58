"""The meaning phase's rate, with the real bundled model: it runs the model on two threads in
Linux's idle class, grouped by length, and stores each document's passages once and in order;
a phase alone is not cut into a job a minute; a scan queued meanwhile still takes the worker
back, and what was read whole before it is kept; no model call starts while a search is being
answered."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from rq.registry import FinishedJobRegistry
from sqlalchemy import select

from tests import test_ocr
from tests.test_vector_failures import _prose
from webapp import keys
from webapp.extensions import db
from webapp.indexing import background, embed_phase
from webapp.indexing.scanner import doc_id
from webapp.models import IndexedFile
from webapp.runtime import get_meaning, get_ocr_queue, get_redis
from webapp.search import embedder

run_ocr = test_ocr.run_ocr  # both queues: the embedding jobs wait on the low-priority one
pytestmark = pytest.mark.skipif(not embedder.status()[0], reason="the model is not installed")


class Calls:
    """The phase's model calls, as they happen (on the model's threads)."""

    def __init__(self, monkeypatch, then=None) -> None:
        self.calls: list[tuple[int, int, list[str]]] = []
        self.lock = threading.Lock()
        self.then = then  # called after each call with the number of calls so far
        real = embed_phase._timed_embed

        def spied(texts: list[str], *rest: float):
            out = real(texts, *rest)
            tid = threading.get_native_id()
            with self.lock:
                self.calls.append((tid, os.sched_getscheduler(tid), list(texts)))
                count = len(self.calls)
            if self.then:
                self.then(count)
            return out

        monkeypatch.setattr(embed_phase, "_timed_embed", spied)

    def passages(self) -> list[str]:
        return [text for _, _, texts in self.calls for text in texts]


def _texts(count: int) -> dict[str, str]:
    """Documents of one to three passages, of varied lengths."""
    return {f"doc{i:02d}.txt": _prose(i, 300 + (i * 397) % 2400) for i in range(count)}


def _embedded(client, auth, source_id: str) -> dict:
    return client.get(f"/api/status/{source_id}", headers=auth).get_json()["semantic"]


def test_the_phase_runs_the_model_on_two_idle_threads_and_stores_each_passage_once_in_order(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr, monkeypatch
):
    texts = _texts(40)
    make_source(make_tree("notes", texts), name="Notes", id="notes")
    assert client.post("/api/sources/notes/reindex", headers=auth).status_code == 200
    run_jobs()  # the scan; the embedding job waits on the low-priority queue
    calls = Calls(monkeypatch)
    run_ocr()
    assert _embedded(client, auth, "notes")["pending"] == 0

    threads = {tid for tid, _, _ in calls.calls}
    assert len(threads) == 2  # EMBED_CPU_SHARE 2 (the default): both cores when they are free
    assert {policy for _, policy, _ in calls.calls} == {os.SCHED_IDLE}  # ... and only then
    expected = {name: embedder.passages(None, text, "text") for name, text in texts.items()}
    assert sorted(calls.passages()) == sorted(p for cut in expected.values() for p in cut)  # once each
    model = embedder.load()
    for _, _, group in calls.calls:  # each call holds texts of about one length (little padding)
        lengths = model.lengths(group)
        assert max(lengths) - min(lengths) <= 64, lengths
    with app.app_context():
        paths = db.session.scalars(select(IndexedFile.path).where(IndexedFile.source_id == "notes")).all()
        for path in paths:
            cut = expected[Path(path).name]
            stored = get_meaning(app).vectors_of(doc_id("notes", path))
            alone = embedder.embed_passages(cut)  # each document's passages, in their order
            assert stored.shape == alone.shape
            assert (np.sum(stored * alone, axis=1) > 0.99).all(), path


def test_a_phase_alone_is_not_cut_into_a_job_a_minute_but_yields_to_another_phase(
    app, client, auth, make_tree, make_source, run_jobs, run_ocr, monkeypatch
):
    monkeypatch.setattr(background, "JOB_SECONDS", 0.0)  # every job's time is up after a page
    monkeypatch.setattr(embed_phase, "DOCS_PER_READ", 4)
    make_source(make_tree("alone", _texts(12)), name="Alone", id="alone")
    assert client.post("/api/sources/alone/reindex", headers=auth).status_code == 200
    run_jobs()
    info, etas = background.PhaseInfo("embed", "alone", get_redis(app)), []
    Calls(monkeypatch, then=lambda _: etas.append(info.eta_seconds(10**6)))  # (8 left: 0 s on a fast machine)
    run_ocr()  # no other background job waits: one job reads its three pages
    assert _embedded(client, auth, "alone")["pending"] == 0
    assert len(FinishedJobRegistry(queue=get_ocr_queue(app)).get_job_ids()) == 1
    assert etas[0] is None and etas[-1] > 0  # the ETA is known from the first page, not the job's end

    make_source(make_tree("first", _texts(12)), name="First", id="first")
    make_source(make_tree("second", _texts(3)), name="Second", id="second")
    for sid in ("first", "second"):
        assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_jobs()
    with app.app_context():  # another phase waits: the job's time is up after a page
        assert embed_phase.EmbedRun(app, "first").run() == 4
    assert _embedded(client, auth, "first")["pending"] == 8


def test_a_scan_queued_mid_page_takes_the_worker_back_and_what_was_read_whole_is_kept(
    app, client, auth, make_tree, make_source, run_jobs, monkeypatch
):
    make_source(make_tree("short", {f"n{i:02d}.txt": _prose(i, 200 + 20 * i) for i in range(24)}), id="short")
    make_source(make_tree("other", {"a.txt": "a short note"}), name="Other", id="other")
    assert client.post("/api/sources/short/reindex", headers=auth).status_code == 200
    run_jobs()
    get_ocr_queue(app).empty()  # the job is run here, by hand

    def scan_other(count: int) -> None:
        if count == 2:  # a scan is queued while the page is being read
            client.post("/api/sources/other/reindex", headers=auth)

    calls = Calls(monkeypatch, then=scan_other)
    with app.app_context():
        run = embed_phase.EmbedRun(app, "short")
        done = run.run()
    assert 0 < done < 24  # it yielded within its one page of 24 documents ...
    assert len(calls.passages()) < 24
    assert _embedded(client, auth, "short")["pending"] == 24 - done  # ... keeping those it read
    run_jobs()  # the scan runs
    assert client.get("/api/status/other", headers=auth).get_json()["total_files"] == 1
    with app.app_context():
        assert embed_phase.EmbedRun(app, "short").run() == 24 - done
    assert sorted(calls.passages()) == sorted(
        _prose(i, 200 + 20 * i) for i in range(24)
    )  # every document read once


def test_no_model_call_starts_while_a_search_is_being_answered(
    app, client, auth, make_tree, make_source, run_jobs, monkeypatch
):
    monkeypatch.setattr(background, "STEP_ASIDE_SECONDS", 3.0)
    monkeypatch.setattr(background, "STEP_ASIDE_MAX", 5.0)
    make_source(make_tree("aside", _texts(4)), name="Aside", id="aside")
    assert client.post("/api/sources/aside/reindex", headers=auth).status_code == 200
    run_jobs()
    get_ocr_queue(app).empty()  # the job is run here, by hand
    started, real = [], embed_phase._timed_embed

    def spied(texts: list[str], *rest: float):
        started.append(time.monotonic())
        return real(texts, *rest)

    monkeypatch.setattr(embed_phase, "_timed_embed", spied)
    with app.app_context():
        embedder.load()
    assert client.post("/api/search", json={"q": "harbour"}, headers=auth).status_code == 200
    searched, quiet = time.monotonic(), get_redis(app).pttl(keys.SEARCHING) / 1000
    assert quiet > 1.0  # the search said so, for STEP_ASIDE_SECONDS from its start
    with app.app_context():
        assert embed_phase.EmbedRun(app, "aside").run() == 4  # then the phase reads them all
    assert started[0] >= searched + quiet - 0.1  # not one model call before the moment was over
