"""A source's three phases (scan, OCR, meaning) as progress bars: done, pending, an ETA and,
for a phase that stopped, why. Pure: built from the source's status (services/status.py)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from flask import Flask

SCAN, OCR, MEANING = "scan", "ocr", "semantic"
# states in which a phase is at work (the fragment that shows it polls itself meanwhile)
ACTIVE = {"queued", "indexing", "reading", "embedding"}


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """A field of a dict or of an object (a live run is a RunStats, a kept one a dict)."""
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _eta(started_at: str | None, done: int, total: int, now: datetime) -> int | None:
    """Seconds left at the rate so far; None before anything is done or without a start."""
    if not started_at or done <= 0 or total <= done:
        return None
    try:
        start = datetime.fromisoformat(started_at)
    except ValueError:
        return None
    elapsed = (now - (start if start.tzinfo else start.replace(tzinfo=UTC))).total_seconds()
    return max(1, round(elapsed / done * (total - done))) if elapsed > 0 else None


def scan_phase(info: Mapping, now: datetime | None = None) -> dict:
    """The scan: the running one's files done of those to extract, else the last one's end."""
    now = now or datetime.now(UTC)
    run = info.get("last_run") or {}
    state = info.get("state") or "idle"
    if state in ("queued", "indexing"):
        progress = _get(run, "progress") or {}
        done, total = int(_get(progress, "done", 0) or 0), int(_get(progress, "total", 0) or 0)
        eta = _eta(_get(run, "started_at"), done, total, now)
        return _phase(SCAN, state, done, max(0, total - done), eta, None)
    files = int(info.get("successful") or 0) + int(info.get("failed") or 0) + int(info.get("skipped") or 0)
    failed = _get(run, "state") == "failed"
    error = (_get(run, "message") or "failed") if failed else None
    return _phase(SCAN, "error" if failed else "idle", files, 0, None, error)


def background_phase(name: str, status: Mapping | None, pending_only: int = 0) -> dict:
    """OCR or meaning in the shape of the source status (`{state, done, pending, eta_seconds,
    error}`); a status without OCR's shape gives what is known: the files waiting."""
    if not status:  # how many were read is not known: a bar that runs while files wait
        if not pending_only:
            return _phase(name, "idle", 0, 0, None, None)
        return _phase(name, "reading", None, pending_only, None, None)
    state = status.get("state") or "idle"
    error = status.get("error")
    return _phase(
        name,
        "error" if error and state not in ("off",) else state,
        status.get("done"),
        int(status.get("pending") or 0),
        status.get("eta_seconds"),
        error,
    )


def _phase(name: str, state: str, done: int | None, pending: int, eta: int | None, error: str | None) -> dict:
    total = (done or 0) + pending
    return {
        "name": name,
        "state": state,
        "done": done,
        "pending": pending,
        "total": total,
        "eta_seconds": eta,
        "error": error,
        "active": state in ACTIVE,
    }


def phases(info: Mapping) -> list[dict]:
    """Scan, OCR and meaning of one source's status, in that order."""
    ocr = info.get("ocr") if isinstance(info.get("ocr"), Mapping) else None
    return [
        scan_phase(info),
        background_phase(OCR, ocr, int(info.get("ocr_pending") or 0)),
        background_phase(MEANING, info.get("semantic")),
    ]


def busy(infos: list[Mapping], queue: Mapping | None = None) -> bool:
    """Whether anything runs or waits (a page showing it then polls for the next state)."""
    if queue and (queue.get("queued") or queue.get("started")):
        return True
    return any(p["active"] for info in infos for p in phases(info))


def init_app(app: Flask) -> None:
    """Make phases() and busy() callable from the templates."""
    app.add_template_global(phases)
    app.add_template_global(busy, "work_running")
