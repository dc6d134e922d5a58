"""Log lines of every process: readable text by default, one JSON object per line with
LOG_FORMAT=json, both carrying the request id, source id and job id when they are known."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from flask import g, has_request_context, request
from rq import get_current_job

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s%(context)s"
CONTEXT_FIELDS = ("request_id", "source_id", "job_id")
_bound: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "trawl_log_context", default=None
)


@contextmanager
def bind(**fields: str) -> Iterator[None]:
    """Add fields (source_id=...) to every line logged inside the block, in this thread."""
    token = _bound.set({**(_bound.get() or {}), **{k: v for k, v in fields.items() if v}})
    try:
        yield
    finally:
        _bound.reset(token)


def context() -> dict[str, str]:
    """The known request id, source id and job id of the line being logged."""
    out = dict(_bound.get() or {})
    if has_request_context():
        if getattr(g, "request_id", None):
            out.setdefault("request_id", g.request_id)
        source_id = (request.view_args or {}).get("source_id")
        if isinstance(source_id, str):
            out.setdefault("source_id", source_id)
    if "job_id" not in out:
        job = get_current_job()
        if job is not None:
            out["job_id"] = job.id
    return out


class ContextFilter(logging.Filter):
    """Put the context fields on each record (and a ` [k=v ...]` suffix for text lines)."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = context()
        for key in CONTEXT_FIELDS:
            setattr(record, key, fields.get(key))
        record.context = "  [" + " ".join(f"{k}={v}" for k, v in fields.items()) + "]" if fields else ""
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the context, and any traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value:
                line[key] = value
        if record.name == "gunicorn.access" and isinstance(record.args, dict):
            # gunicorn logs a request after Flask is done with it: the id is in the response
            if record.args.get("{x-request-id}o", "-") != "-":
                line["request_id"] = record.args["{x-request-id}o"]
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of LOG_FORMAT ("text" or "json")."""
    return JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)


def configure(level: str, log_format: str) -> logging.Handler:
    """Send every logger's lines to stderr in LOG_FORMAT (the one handler of ours on the root
    logger: building another app in the same process reconfigures it, never adds a second)."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, _TrawlHandler)), None)
    if handler is None:
        handler = _TrawlHandler(sys.stderr)
        handler.addFilter(ContextFilter())
        root.addHandler(handler)
    handler.setFormatter(formatter(log_format))
    root.setLevel(level)
    return handler


class _TrawlHandler(logging.StreamHandler):
    """The root handler `configure` installs (told apart from handlers of others, e.g. pytest)."""
