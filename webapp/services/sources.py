"""Sources: validation of roots, patterns and schedules; create, update, delete; path diagnostics."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from flask import current_app
from sqlalchemy import func

from webapp import embed_jobs, jobs, slugs
from webapp import schedule as cron
from webapp.exceptions import Conflict, InvalidInput
from webapp.extensions import db
from webapp.indexing import thumbstore
from webapp.indexing.globs import DEFAULT_EXCLUDE, DEFAULT_INCLUDE, validate_pattern
from webapp.indexing.runstats import FileStatus
from webapp.indexing.scanner import inside_any, within
from webapp.models import IndexedFile, Source, UserSource, get_source, iso, utcnow
from webapp.runtime import get_meaning, get_search
from webapp.services import scans
from webapp.services.access import Visible, can_see
from webapp.validation import display_name

PATTERN_FIELDS = {"include_patterns": DEFAULT_INCLUDE, "exclude_patterns": DEFAULT_EXCLUDE}
NAME_MAX = 200  # the column's width


def allowed_roots() -> list[str]:
    """The resolved folders sources may live in."""
    return list(current_app.config["ALLOWED_ROOTS"])


def inside_allowed_roots(path: str) -> bool:
    """Whether `path` (symlinks followed) lies inside one of the allowed roots."""
    return inside_any(path, allowed_roots())


def diagnose_path(raw: str) -> dict:
    """What the service sees at a path, disclosing nothing outside the allowed roots."""
    roots = allowed_roots()
    report = {
        "path": raw,
        "ok": False,
        "visible": False,
        "inside_allowed_roots": False,
        "exists": False,
        "is_directory": False,
        "readable": False,
        "allowed_roots": roots,
        "message": "",
        "hint": "",
        "checked": [],
    }
    if not raw or not os.path.isabs(raw) or "\x00" in raw:
        report["message"] = "The path must be absolute"
        report["hint"] = f"Use a full path such as {os.path.join(roots[0], 'documents')}"
        return report
    resolved = os.path.realpath(raw)
    report["checked"] = ["inside_allowed_roots"]  # the checks that ran (the page shows the rest
    if not inside_allowed_roots(resolved):  # as not run, not as failed)
        report["message"] = "The path is outside the allowed roots"
        report["hint"] = "Set ALLOWED_ROOTS to include it, or pick a folder under " + ", ".join(roots)
        return report
    report["inside_allowed_roots"] = True
    report["path"] = resolved
    report["visible"] = os.path.lexists(raw)
    report["exists"] = os.path.exists(resolved)
    report["is_directory"] = os.path.isdir(resolved)
    report["readable"] = report["is_directory"] and os.access(resolved, os.R_OK | os.X_OK)
    report["ok"] = report["readable"]
    report["checked"] += (
        ["visible", "exists"]
        + (["is_directory"] if report["exists"] else [])
        + (["readable"] if report["is_directory"] else [])
    )
    report["message"], report["hint"] = _path_message(report)
    return report


def _path_message(r: dict) -> tuple[str, str]:
    if not r["exists"]:
        return "The path does not exist", "Check the spelling, or mount the folder into the service"
    if not r["is_directory"]:
        return "The path is not a directory", "A source root must be a folder"
    if not r["readable"]:
        return "The directory is not readable", "Give the service's user read and execute permission"
    return "The path can be indexed", ""


def resolve_root(raw: Any) -> str:
    """The resolved root_path, or a 400 that says what is wrong with it."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput("root_path: is required")
    report = diagnose_path(raw)
    if not report["ok"]:
        raise InvalidInput(f"root_path: {report['message'][0].lower()}{report['message'][1:]}")
    return report["path"]


def overlap_problem(root: str, own_id: str | None = None) -> str | None:
    """Why `root` (resolved) may not be a source's folder: it is the folder of another source,
    inside it or around it (the same files would be indexed twice). None when it is free."""
    for other in db.session.query(Source).order_by(Source.name, Source.id):
        if other.id == own_id:
            continue
        if root == other.root_path:
            relation = "is the folder of"
        elif within(root, other.root_path):
            relation = "is inside the folder of"
        elif within(other.root_path, root):
            relation = "holds the folder of"
        else:
            continue
        return (
            f"root_path: {root} {relation} the source “{other.name}” ({other.root_path}); "
            "one folder is indexed by one source. Edit that source instead, or allow the "
            "overlap to index these files twice"
        )
    return None


def _check_overlap(root: str, data: Mapping, own_id: str | None = None) -> None:
    """409 when `root` overlaps another source's folder and the overlap is not allowed."""
    allow = data.get("allow_overlap", False)
    if not isinstance(allow, bool):
        raise InvalidInput("allow_overlap: must be true or false")
    problem = None if allow else overlap_problem(root, own_id)
    if problem:
        raise Conflict(problem)


def valid_name(value: Any) -> str:
    """The name without surrounding spaces, or a 400: 1 to 200 characters, no control characters.

    The one check of a source's name, for the API, the web form and the CLI alike.
    """
    return display_name(value, NAME_MAX)


def _patterns(field: str, value: Any) -> list[str]:
    """A validated pattern list; None means the default list."""
    if value is None:
        return list(PATTERN_FIELDS[field])
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise InvalidInput(f"{field}: must be a list of glob patterns")
    for pattern in value:
        problem = validate_pattern(pattern)
        if problem:
            raise InvalidInput(f"{field}: {pattern!r} {problem}")
    return list(value)


def _schedule(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    value = str(value).strip()
    problem = cron.validate_schedule(value)
    if problem:
        raise InvalidInput(f"scan_schedule: {problem}")
    return value


def _flag(field: str, value: Any) -> bool:
    """`watch` (follow changes under the root) and `semantic` (embed passages for meaning)
    are booleans."""
    if not isinstance(value, bool):
        raise InvalidInput(f"{field}: must be true or false")
    return value


def _next_scan(schedule: str | None):
    return cron.next_scan(schedule, utcnow(), current_app.config["SCHEDULE_TIMEZONE"])


def _new_id(data: Mapping, name: str) -> str:
    taken = {sid for (sid,) in db.session.query(Source.id)}
    if data.get("id") is None:
        return slugs.unique_slug(slugs.slugify(name), taken)
    sid = data["id"]
    if not isinstance(sid, str) or not slugs.is_valid_source_id(sid):
        raise InvalidInput("id: must match ^[a-z0-9][a-z0-9_-]{0,62}$")
    if sid in taken:
        raise Conflict(f"Source '{sid}' already exists")
    return sid


def create(data: Mapping, scan_now: bool = False) -> Source:
    """Validate and store a new source, put it on its schedule, and queue its first scan when
    `scan_now` (the web form's default; the API's is off, so create-then-reindex keeps working)."""
    name = valid_name(data.get("name"))
    root = resolve_root(data.get("root_path"))
    source_id = _new_id(data, name)
    _check_overlap(root, data)
    source = Source(
        id=source_id,
        name=name,
        root_path=root,
        include_patterns=_patterns("include_patterns", data.get("include_patterns")),
        exclude_patterns=_patterns("exclude_patterns", data.get("exclude_patterns")),
        scan_schedule=_schedule(data.get("scan_schedule")),
        watch=_flag("watch", data.get("watch", True)),
        semantic=_flag("semantic", data.get("semantic", True)),
    )
    source.next_scan_at = _next_scan(source.scan_schedule)
    db.session.add(source)
    db.session.commit()
    thumbstore.forget_deleted(current_app.config["DATA_DIR"], source.id)  # an id used before
    _reschedule(source)
    if scan_now:
        scans.request_scan(source.id)
    scans.sources_changed()
    return source


get = get_source  # the name the API, UI and CLI call it by


def update(source_id: str, data: Mapping) -> Source:
    """Partial update: absent fields stay, null patterns reset, null schedule means manual."""
    source = get(source_id)
    old_name = source.name
    if "name" in data:
        source.name = valid_name(data["name"])
    if "root_path" in data:
        root = resolve_root(data["root_path"])
        if root != source.root_path:  # a folder kept as it is was allowed when it was set
            _check_overlap(root, data, source.id)
        source.root_path = root
    for field in PATTERN_FIELDS:
        if field in data:
            setattr(source, field, _patterns(field, data[field]))
    if "scan_schedule" in data:
        source.scan_schedule = _schedule(data["scan_schedule"])
        source.next_scan_at = _next_scan(source.scan_schedule)
    if "watch" in data:
        source.watch = _flag("watch", data["watch"])
    semantic_was = source.semantic
    if "semantic" in data:
        source.semantic = _flag("semantic", data["semantic"])
    source.updated_at = utcnow()
    db.session.commit()
    if source.semantic != semantic_was:
        _semantic_switched(source)
    if source.name != old_name:
        _rename_documents(source)
    _reschedule(source)
    scans.sources_changed()
    return source


def delete(source_id: str) -> None:
    """Cancel its scan, remove its documents and records; files on disk are never touched."""
    source = get(source_id)
    scans.cancel_scan(source.id)
    jobs.unschedule(source.id)
    get_search().delete_source(source.id)
    get_meaning().delete_source(source.id)
    thumbstore.remove_source(current_app.config["DATA_DIR"], source.id)
    db.session.query(IndexedFile).filter_by(source_id=source.id).delete()
    db.session.query(UserSource).filter_by(source_id=source.id).delete()  # its grants
    db.session.delete(source)
    db.session.commit()
    scans.sources_changed()


def _semantic_switched(source: Source) -> None:
    """Off: the source's vectors go (its running embedding job stops at its next check) and
    its records wait again. On: the embedding phase is queued."""
    if source.semantic:
        jobs.enqueue_embed(source.id)
        return
    embed_jobs.enqueue_drop_vectors(source.id)  # searches leave the source out at once
    db.session.query(IndexedFile).filter_by(source_id=source.id).update({IndexedFile.embedded: False})
    db.session.commit()


def _rename_documents(source: Source) -> None:
    """Rewriting every document of a big source takes a while: a worker does it."""
    jobs.enqueue_rename(source.id)


def _reschedule(source: Source) -> None:
    jobs.schedule_source(source.id, source.next_scan_at)


def counts() -> dict[str, dict[str, int]]:
    """Per source: records by status, in one query."""
    rows = db.session.query(IndexedFile.source_id, IndexedFile.status, func.count()).group_by(
        IndexedFile.source_id, IndexedFile.status
    )
    out: dict[str, dict[str, int]] = {}
    for sid, status, n in rows:
        out.setdefault(sid, {})[status] = n
    return out


def to_json(source: Source, by_status: Mapping[str, int] | None = None) -> dict:
    """The source object of the API, with its live state and counts."""
    if by_status is None:
        by_status = counts().get(source.id, {})
    return {
        "id": source.id,
        "name": source.name,
        "root_path": source.root_path,
        "include_patterns": source.include_patterns,
        "exclude_patterns": source.exclude_patterns,
        "scan_schedule": source.scan_schedule,
        "watch": source.watch,
        "semantic": source.semantic,
        "created_at": iso(source.created_at),
        "updated_at": iso(source.updated_at),
        "last_scan_at": iso(source.last_scan_at),
        "next_scan_at": iso(source.next_scan_at),
        "state": scans.scan_state(source.id),
        "watch_state": scans.watch_state(source),
        "document_count": sum(by_status.values()),
        "failed_count": by_status.get(FileStatus.FAILED, 0),
    }


def list_json(visible: Visible) -> list[dict]:
    """Every visible source (None: all) as the API shows it, ordered by name."""
    by_source = counts()
    return [
        to_json(s, by_source.get(s.id, {}))
        for s in db.session.query(Source).order_by(Source.name, Source.id)
        if can_see(visible, s.id)
    ]
