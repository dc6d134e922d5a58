"""Jinja filters of the UI: human sizes, relative and absolute dates, schedule descriptions."""

from __future__ import annotations

import mimetypes
import re
from datetime import UTC, datetime

from flask import Flask
from flask_babel import format_date, format_decimal, gettext, ngettext
from flask_babel import lazy_gettext as _l
from markupsafe import Markup

from webapp import schedule
from webapp.ui import querybox
from webapp.ui.messages import VALUE_MESSAGES

_UNITS = ("bytes", "KB", "MB", "GB", "TB")  # the unit symbols are the same in German
_NOT_EM = re.compile(r"<(?!/?em>)")


def filesize(value: int | None) -> str:
    """1536 -> '1.5 KB' (powers of 1024, like file managers; '1,5 KB' in German)."""
    if value is None:
        return "–"
    size = float(value)
    for unit in _UNITS:
        if size < 1024 or unit == _UNITS[-1]:
            if unit == "bytes":
                return ngettext("%(num)s byte", "%(num)s bytes", int(size))
            return f"{format_decimal(size, '0.0' if size < 10 else '0')} {unit}"
        size /= 1024
    return f"{format_decimal(size, '0')} TB"


def num(value: int | float | None) -> str:
    """A number in the page's language: 12345 -> '12,345' (English), '12.345' (German)."""
    return "–" if value is None else format_decimal(value)


def to_datetime(value: int | float | str | datetime | None) -> datetime | None:
    """A naive UTC datetime from Unix seconds, an ISO string or a datetime."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return (
            value.replace(tzinfo=None) if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)
        )
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
    try:
        return to_datetime(datetime.fromisoformat(value))
    except ValueError:
        return None


def _ago(seconds: float, future: bool) -> str:
    steps = ((3600, 60, "minute"), (86400, 3600, "hour"), (86400 * 30, 86400, "day"))
    for limit, div, name in steps:
        if seconds < limit:
            n = max(1, int(seconds // div))
            return _AGO[name, future](n)
    return ""


# whole phrases, not pieces: German says "vor 5 Minuten" and "in 5 Minuten" with other endings
_AGO = {
    ("minute", False): lambda n: ngettext("%(num)s minute ago", "%(num)s minutes ago", n),
    ("minute", True): lambda n: ngettext("in %(num)s minute", "in %(num)s minutes", n),
    ("hour", False): lambda n: ngettext("%(num)s hour ago", "%(num)s hours ago", n),
    ("hour", True): lambda n: ngettext("in %(num)s hour", "in %(num)s hours", n),
    ("day", False): lambda n: ngettext("%(num)s day ago", "%(num)s days ago", n),
    ("day", True): lambda n: ngettext("in %(num)s day", "in %(num)s days", n),
}


def reltime(value, now: datetime | None = None) -> str:
    """'just now', '5 minutes ago', 'in 3 hours', '4 days ago'; the date when older than 30 days."""
    when = to_datetime(value)
    if when is None:
        return gettext("never")
    now = now or datetime.now(UTC).replace(tzinfo=None)
    delta = (now - when).total_seconds()
    if abs(delta) < 60:
        return gettext("just now")
    return _ago(abs(delta), delta < 0) or format_date(when, "d MMM y")


def recent(value, now: datetime | None = None) -> bool:
    """Within 30 days of now: said relatively ('5 days ago'); older dates are shown as dates."""
    when = to_datetime(value)
    now = now or datetime.now(UTC).replace(tzinfo=None)
    return when is not None and abs((now - when).total_seconds()) < 86400 * 30


def fulltime(value) -> str:
    """'2026-11-21 10:30 UTC' (the exact time, shown as a tooltip and in tables)."""
    when = to_datetime(value)
    return when.strftime("%Y-%m-%d %H:%M UTC") if when else "–"


def isotime(value) -> str:
    """ISO 8601 with a Z, for <time datetime=...>."""
    when = to_datetime(value)
    return when.isoformat() + "Z" if when else ""


def describe_schedule(value: str | None) -> str:
    """The schedule in words ('Every day at 02:00', 'Manual only')."""
    return schedule.describe(value, gettext)


def highlighted(html: str | None) -> Markup:
    """Backend HTML whose only markup is <em>: any other '<' is escaped, so no other tag lives."""
    return Markup(_NOT_EM.sub("&lt;", html or ""))


def text_tables(marked: Markup) -> Markup:
    """The text preview of an Office file with its tables as tables: runs of lines holding a
    tab become <table> rows (the text is already escaped; its only markup is <em>)."""
    out: list[str] = []
    rows: list[str] = []

    def close() -> None:
        if rows:
            out.append('<table class="text-table"><tbody>' + "".join(rows) + "</tbody></table>")
            rows.clear()

    for line in str(marked).split("\n"):
        if "\t" in line:
            rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in line.split("\t")) + "</tr>")
        else:
            close()
            out.append(line + "\n")
    close()
    return Markup("".join(out))


def bdi(value) -> Markup:
    """User text (a name, a path) isolated from the line around it, escaped: its own bidi
    characters (U+202E, U+2066-2069) or right-to-left letters cannot reorder that line."""
    return Markup("<bdi>{}</bdi>").format("" if value is None else value)


def container_parts(path: str) -> tuple[str, str]:
    """A member's path split into its container's path and its path inside (`!/`)."""
    container, _, inner = path.rpartition("!/")
    return container, inner


# document types in words for people (the API and the query language keep the ids: type:raw_image)
TYPE_LABELS = {
    "text": _l("Text"),
    "markdown": _l("Markdown"),
    "code": _l("Source code"),
    "config": _l("Configuration"),
    "pdf": _l("PDF"),
    "docx": _l("Word document"),
    "xlsx": _l("Spreadsheet"),
    "pptx": _l("Presentation"),
    "rtf": _l("RTF document"),
    "epub": _l("E-book"),
    "subtitle": _l("Subtitles"),
    "comic": _l("Comic book"),
    "image": _l("Image"),
    "raw_image": _l("RAW photo"),
    "media": _l("Audio or video"),
    "archive": _l("Archive"),
    "email": _l("E-mail"),
    "file": _l("Other file"),
}


def type_label(doc_type: str | None) -> str:
    """'raw_image' -> 'RAW photo'; an unknown type as it is."""
    return TYPE_LABELS.get(doc_type or "", doc_type or "–")


TITLE_MAX = 120  # a longer metadata title is a sentence or a dump, not a title
# titles that programs write for people who never set one: "Slide 1", "Untitled", "Document1",
# "Microsoft Word - report.doc", "PowerPoint Presentation"
_PLACEHOLDER_TITLE = re.compile(
    r"(slide|page|untitled|document|presentation|powerpoint presentation|title|sheet|workbook|"
    r"new document|no title|unknown|book)\s*\d*|microsoft (word|powerpoint|excel) - .*|"
    r"\d+|[\W_]*",
    re.I,
)


def doc_title(doc: dict) -> str:
    """The title to show: the document's own when it reads as one, else the file name."""
    title = " ".join((doc.get("title") or "").split())
    if not title or len(title) > TITLE_MAX or _PLACEHOLDER_TITLE.fullmatch(title):
        return doc.get("basename") or title
    return title


def result_title(result: dict) -> str:
    """A search result's title: an e-mail's subject (a file name says nothing of a message),
    else the file name."""
    if result.get("type") == "email":
        return doc_title(result)
    return result.get("basename") or ""


# the form fields messages name ("current_password: is wrong"), as their labels say them
FIELD_LABELS = {
    "current_password": _l("Current password"),
    "new_password": _l("New password"),
    "password": _l("Password"),
    "username": _l("User name"),
    "name": _l("Name"),
    "scope": _l("Scope"),
    "expires_in_days": _l("Expiry"),
    "source_ids": _l("Sources"),
}
_FIELD_MESSAGE = re.compile(r"([a-z][a-z_]*): (.+)", re.S)
# the groups of VALUE_MESSAGES that are words, not values
SAID_AGAIN = ("why", "kind", "field", "action", "relation")
_VERBS = ("is ", "are ", "must ", "was ", "has ", "cannot ", "does ")


def _said(message: str) -> str:
    """One message in the page's language: listed as it is, or by a pattern of the messages
    that carry a value (ui/messages.py), else as it came."""
    said = gettext(message)
    if said != message:
        return said
    for pattern, template in VALUE_MESSAGES:
        match = pattern.fullmatch(message)
        if match:
            values = match.groupdict()
            # a message inside a message ('… (in b.zip)') and a file's kind are words too
            values.update({k: _said(values[k]) for k in SAID_AGAIN if k in values})
            if "num" in values:  # '10,000' or '2.5' as the service wrote it
                values["num"] = num(float(values["num"].replace(",", "")))
            return gettext(template, **values)
    return message


def localized(detail: str | None) -> str:
    """A service message in the page's language, a field name before it kept as written
    ('limit: must be between 1 and 100' -> 'limit: muss zwischen 1 und 100 liegen')."""
    if not detail:
        return ""
    said = _said(detail)
    match = _FIELD_MESSAGE.fullmatch(detail) if said == detail else None
    return f"{match.group(1)}: {_said(match.group(2))}" if match else said


def readable(detail: str | None) -> str:
    """A service message in a form's words: 'current_password: is wrong' -> 'Current password
    is wrong', 'new_password: the two passwords do not match' -> 'New password: the two ...'."""
    match = _FIELD_MESSAGE.fullmatch(detail or "")
    if not match:
        return _said(detail) if detail else ""
    field, rest = match.groups()
    label = FIELD_LABELS.get(field, field.replace("_", " ").capitalize())
    said = _said(rest)  # in the page's language, and is the verb still first?
    starts = rest.startswith(_VERBS)
    return f"{label} {said}" if starts else f"{label}: {said}"


def lightbox_kind(result: dict) -> str | None:
    """What the grid's lightbox shows of a result: `image` (pictures, RAW previews), `video`,
    or None (its tile opens the document page)."""
    if result.get("type") in ("image", "raw_image"):
        return "image"
    if result.get("type") == "media":
        guessed, _ = mimetypes.guess_type(result.get("basename") or "", strict=False)
        return "video" if guessed and guessed.startswith("video/") else None
    return None


def init_app(app: Flask) -> None:
    """Register the filters on the app's Jinja environment."""
    for func in (
        filesize,
        reltime,
        fulltime,
        isotime,
        describe_schedule,
        highlighted,
        bdi,
        container_parts,
        type_label,
        readable,
        localized,
        doc_title,
        result_title,
        recent,
        text_tables,
        num,
        lightbox_kind,
    ):
        app.add_template_filter(func)
    app.add_template_filter(querybox.words, "query_words")
