"""Sources admin: list, add, edit, delete, path test, schedule preview, scans and their progress."""

from __future__ import annotations

import htmx_flask
from flask import current_app, flash, g, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_babel import ngettext

from webapp import schedule
from webapp.exceptions import Conflict, TrawlError
from webapp.indexing.globs import DEFAULT_EXCLUDE, DEFAULT_INCLUDE
from webapp.models import utcnow
from webapp.services import access, scans, sources, status, ui_support
from webapp.ui.blueprint import bp
from webapp.ui.filters import localized
from webapp.ui.htmx import is_htmx, render
from webapp.ui.session import admin_required

SCHEDULE_PRESETS = {"manual": None, "hourly": "@hourly", "daily": "@daily", "weekly": "@weekly"}
SCHEDULE_LABELS = {
    "manual": _l("Manual only"),
    "hourly": _l("Every hour"),
    "daily": _l("Every day at 02:00"),
    "weekly": _l("Every Sunday at 02:00"),
    "custom": _l("Custom (cron)"),
}


# -- form handling --------------------------------------------------------------------------------


def _lines(text: str) -> list[str] | None:
    """One pattern a line; an empty box means the default list."""
    patterns = [line.strip() for line in text.splitlines() if line.strip()]
    return patterns or None


def schedule_from_form(form) -> str | None:
    """The scan_schedule of the form's schedule choice and cron box."""
    choice = form.get("schedule_choice", "manual")
    if choice == "custom":
        return form.get("cron", "").strip() or None
    return SCHEDULE_PRESETS.get(choice)


def form_to_data(form, creating: bool) -> dict:
    """The create/update body of the service from the submitted form."""
    data = {
        "name": form.get("name", ""),
        "root_path": form.get("root_path", "").strip(),
        "include_patterns": _lines(form.get("include_patterns", "")),
        "exclude_patterns": _lines(form.get("exclude_patterns", "")),
        "scan_schedule": schedule_from_form(form),
        "allow_overlap": form.get("allow_overlap") == "1",
    }
    if creating and form.get("id", "").strip():
        data["id"] = form["id"].strip()
    for flag in ("watch", "semantic"):  # a hidden "0" before the checkbox's "1": absent
        if flag in form:  # means unchanged
            data[flag] = "1" in form.getlist(flag)
    return data


def _form_state(source=None, form=None) -> dict:
    """What the form shows: the submitted values, the source's, or the defaults."""
    if form is not None:
        return {
            "name": form.get("name", ""),
            "id": form.get("id", ""),
            "root_path": form.get("root_path", ""),
            "include_patterns": form.get("include_patterns", ""),
            "exclude_patterns": form.get("exclude_patterns", ""),
            "schedule_choice": form.get("schedule_choice", "manual"),
            "cron": form.get("cron", ""),
            "scan_now": form.get("scan_now") == "1",
            "watch": "1" in form.getlist("watch") if "watch" in form else True,
            "allow_overlap": form.get("allow_overlap") == "1",
            "semantic": "1" in form.getlist("semantic") if "semantic" in form else True,
        }
    value = source.scan_schedule if source else None
    choice = next((k for k, v in SCHEDULE_PRESETS.items() if v == value), "custom")
    return {
        "name": source.name if source else "",
        "id": source.id if source else "",
        "root_path": source.root_path if source else "",
        "include_patterns": "\n".join(source.include_patterns if source else DEFAULT_INCLUDE),
        "exclude_patterns": "\n".join(source.exclude_patterns if source else DEFAULT_EXCLUDE),
        "schedule_choice": choice,
        "cron": value if choice == "custom" else "",
        "scan_now": True,
        "watch": source.watch if source else True,
        "allow_overlap": False,
        "semantic": source.semantic if source else True,
    }


LABELS = {
    "name": _l("Name"),
    "id": _l("ID"),
    "root_path": _l("Folder"),
    "include_patterns": _l("Include patterns"),
    "exclude_patterns": _l("Exclude patterns"),
    "cron": _l("Cron expression"),
}


def form_error(detail: str) -> tuple[str | None, str]:
    """(the form field an error names, the message in that field's label).

    'scan_schedule: must be 5 fields' -> ('cron', 'Cron expression: must be 5 fields'), the
    rule in the page's language; a message naming no field of the form is said whole."""
    name, _sep, rule = detail.partition(":")
    field = "cron" if name == "scan_schedule" else name
    if field not in LABELS or not rule:
        return None, localized(detail)
    return field, f"{LABELS[field]}: {localized(rule.strip())}"


def _render_form(source, values: dict, error: TrawlError | None = None, status_code: int = 200):
    detail = error.detail if error else None
    error_field, message = form_error(detail) if detail else (None, None)
    # a folder overlapping another source's: offer the explicit override beside the field
    overlap = isinstance(error, Conflict) and error_field == "root_path"
    preview = _schedule_preview(values)
    if error_field == "cron":
        preview["error"] = None  # the cron box says it already: once is enough
    return render_template(
        "source_form.html",
        source=source,
        values=values,
        error=message,
        error_field=error_field,
        schedule_labels=SCHEDULE_LABELS,
        default_include=DEFAULT_INCLUDE,
        default_exclude=DEFAULT_EXCLUDE,
        allowed_roots=sources.allowed_roots(),
        preview=preview,
        overlap=overlap,
    ), status_code


# -- pages ----------------------------------------------------------------------------------------


@bp.get("/sources")
def sources_page():
    """Every source with its state, counts, schedule and scan buttons."""
    return render_template("sources.html", rows=ui_support.source_rows(g.user))


@bp.route("/sources/new", methods=["GET", "POST"])
@admin_required
def source_new():
    """Add a source; validation errors are shown next to the form."""
    if request.method == "GET":
        return _render_form(None, _form_state())
    try:
        created = sources.create(
            form_to_data(request.form, creating=True), scan_now=request.form.get("scan_now") == "1"
        )
    except TrawlError as exc:
        return _render_form(None, _form_state(form=request.form), exc, 400)
    if request.form.get("scan_now") == "1":
        flash(_("Source “%(name)s” added; its first scan has started.", name=created.name), "success")
    else:
        flash(
            _("Source “%(name)s” added. Start its first scan with “Scan now”.", name=created.name), "success"
        )
    return redirect(url_for("ui.sources_page") + f"#source-{created.id}")


@bp.route("/sources/<source_id>/edit", methods=["GET", "POST"])
@admin_required
def source_edit(source_id: str):
    """Edit a source's name, folder, patterns and schedule."""
    source = sources.get(source_id)
    if request.method == "GET":
        return _render_form(source, _form_state(source))
    try:
        sources.update(source_id, form_to_data(request.form, creating=False))
    except TrawlError as exc:
        return _render_form(source, _form_state(form=request.form), exc, 400)
    flash(_("Source “%(name)s” saved.", name=source.name), "success")
    return redirect(url_for("ui.sources_page") + f"#source-{source_id}")


@bp.route("/sources/<source_id>/delete", methods=["GET", "POST"])
@admin_required
def source_delete(source_id: str):
    """Ask for confirmation (GET), then delete the source and its index entries (POST)."""
    source = sources.get(source_id)
    if request.method == "GET":
        return render_template("source_delete.html", source=sources.to_json(source))
    name = source.name
    sources.delete(source_id)
    flash(_("Source “%(name)s” deleted. Its files on disk were not touched.", name=name), "success")
    return redirect(url_for("ui.sources_page"))


# -- htmx helpers of the form ---------------------------------------------------------------------


@bp.post("/sources/test-path")
@admin_required
def source_test_path():
    """Path diagnostics for the form's root_path (a fragment, or a page without JavaScript)."""
    report = sources.diagnose_path(request.form.get("root_path", "").strip())
    return render("path_test.html", "_path_test.html", report=report)


def _schedule_preview(values) -> dict:
    """Description and next three runs of the chosen schedule, or why it is invalid."""
    value = schedule_from_form(values)
    if value is None:
        return {"value": None, "text": _("Scans run only when you start them."), "runs": [], "error": None}
    problem = schedule.validate_schedule(value)
    if problem:
        error = _("Invalid schedule: %(problem)s", problem=localized(problem))
        return {"value": value, "text": "", "runs": [], "error": error}
    tz = current_app.config["SCHEDULE_TIMEZONE"]
    runs = schedule.next_runs(value, utcnow(), tz, 3)
    return {"value": value, "text": schedule.describe(value, _) + f" ({tz})", "runs": runs, "error": None}


@bp.get("/sources/schedule-preview")
@admin_required
def schedule_preview():
    """The schedule preview fragment (the form asks for it as the choice or cron box changes)."""
    return render("schedule_preview.html", "_schedule_preview.html", preview=_schedule_preview(request.args))


# -- scans ----------------------------------------------------------------------------------------


def _status_fragment(source_id: str):
    """The live status cell of one source (it polls itself while a scan is queued or running)."""
    source = access.source_for(g.user, source_id)
    return render(
        "source.html",
        "_source_status.html",
        info=status.source_status(source),
        source=sources.to_json(source),
    )


def _action(source_id: str, run):
    """Run a scan action; htmx gets the status cell and a message event, others a redirect."""
    name = sources.get(source_id).name  # an unknown source is a 404 page, not a message
    try:
        message, level = run(), "success"
    except TrawlError as exc:
        message, level = localized(exc.detail), "error"  # its source id stays quoted as it was
    quoted = _("“%(name)s”", name=name)  # people know the source by its name, not its id
    message = message.replace(f"Source '{source_id}'", quoted).replace(f"'{source_id}'", quoted)
    if is_htmx():
        return htmx_flask.make_response(
            _status_fragment(source_id), trigger={"trawl:notify": {"message": message, "level": level}}
        )
    flash(message, level)
    return redirect(url_for("ui.sources_page") + f"#source-{source_id}")


@bp.post("/sources/<source_id>/reindex")
@admin_required
def source_reindex(source_id: str):
    """Queue a scan (full=1: a full rebuild); 409 while busy is shown as a message."""
    full = request.form.get("full") == "1"

    def run() -> str:
        scans.request_scan(source_id, full=full)
        at = f"'{source_id}'"  # _action puts the name there
        return (
            _("Full rebuild of %(source)s queued", source=at)
            if full
            else _("Scan of %(source)s queued", source=at)
        )

    return _action(source_id, run)


@bp.post("/sources/<source_id>/clear-stale")
@admin_required
def source_clear_stale(source_id: str):
    """Remove the failed-file records so the next scan retries them."""

    def run() -> str:
        removed = scans.clear_stale(source_id)
        return ngettext(
            "Removed %(num)s failed file record.", "Removed %(num)s failed file records.", removed
        )

    return _action(source_id, run)


@bp.get("/sources/<source_id>/status")
def source_status(source_id: str):
    """The live status cell of a source (polled every second while it scans)."""
    return _status_fragment(source_id)
