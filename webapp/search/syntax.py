"""The query language: pulls exclusions and field filters out of `q`, leaving the free text.

Pure: `parse_syntax("report -draft type:pdf modified:2024")` gives a `QuerySpec` whose `text`
is `report` (words, "phrases" and upper-case `OR`, for `query.parse_query`), plus what the
backends turn into filters. A known field with a value it cannot read raises
`QuerySyntaxError` naming the term; a `field:` that is not known stays plain text, its name
and value two words (`misc:quarterly` searches `misc quarterly`).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from webapp.exceptions import QuerySyntaxError
from webapp.search.query import tokens

# field name as typed (any case) -> QuerySpec attribute; other `name:` words stay text.
FIELDS = {
    "type": "types",
    "ext": "extensions",
    "source": "sources",
    "path": "paths",
    "title": "title",
    "modified": "modified",
    "size": "size",
    "camera": "cameras",
}
EXAMPLES = {
    "type": "type:pdf",
    "ext": "ext:docx",
    "source": "source:notes",
    "path": "path:projects/2024",
    "title": "title:budget",
    "modified": "modified:2024-03",
    "size": "size:>10MB",
    "camera": 'camera:"Canon EOS 5D"',
}
DATE_HINT = "is not a date (use 2024, 2024-03 or 2024-03-15)"
SIZE_HINT = "is not a size (use 500, 10k, 2MB or 1GB)"
UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "t": 1024**4,
    "tb": 1024**4,
}

MAX_SIZE = 2**62
_FIELD_RE = re.compile(r"(-?)([A-Za-z]+):")
# `name:value` of a name that is no field: two words, as typed without the colon (the index
# would read `misc:quarterly` as one word of two parts, a phrase). A value that starts with
# a slash or a backslash is a URL or a Windows path and stays one piece.
_UNKNOWN_FIELD_RE = re.compile(r"^([A-Za-z]+):(?=[^\s/\\:])")
_DATE_RE = re.compile(r"(\d{4})(?:-(\d{1,2})(?:-(\d{1,2}))?)?")
_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)", re.IGNORECASE)
_COMPARE_RE = re.compile(r"(>=|<=|>|<)?(.*)", re.DOTALL)


@dataclass(frozen=True)
class Range:
    """Integers from `low` (inclusive) to `high` (exclusive); None is unbounded."""

    low: int | None = None
    high: int | None = None


@dataclass(frozen=True)
class QuerySpec:
    """What a query asks for: free text plus exclusions and filters (all AND together)."""

    text: str = ""
    excluded: tuple[tuple[str, ...], ...] = ()  # folded words of each -word / -"phrase"
    types: tuple[str, ...] = ()  # several values of one field: any of them
    extensions: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()  # as typed; absolute folders once resolved by the service
    title: tuple[tuple[str, ...], ...] = ()  # folded words of each title: term, each required
    modified: tuple[Range, ...] = ()  # Unix seconds, UTC; every range must hold
    size: tuple[Range, ...] = ()  # bytes; every range must hold
    cameras: tuple[str, ...] = ()  # the camera as the `camera` facet names it (any case)

    @property
    def has_positive_text(self) -> bool:
        """True when something must match in the text (words, phrases or title: terms)."""
        return bool(tokens(self.text)) or bool(self.title)

    @property
    def is_filter_only(self) -> bool:
        """True when the query only narrows (filters, exclusions): it lists documents."""
        return not self.has_positive_text

    @property
    def has_syntax(self) -> bool:
        """True when anything besides free text was written."""
        return any(
            (
                self.excluded,
                self.types,
                self.extensions,
                self.sources,
                self.paths,
                self.title,
                self.modified,
                self.size,
                self.cameras,
            )
        )


@dataclass
class _Piece:
    """One part of the query as written: free text or one syntax term."""

    raw: str
    end: int
    is_text: bool


def parse_syntax(q: str) -> QuerySpec:
    """Split `q` into free text and syntax terms; QuerySyntaxError names a bad term."""
    pieces = list(_pieces(q))
    values: dict[str, list] = {name: [] for name in set(FIELDS.values()) | {"excluded"}}
    for piece in pieces:
        if not piece.is_text:
            _read_term(piece.raw, values)
    return QuerySpec(text=_free_text(q, pieces), **{k: tuple(v) for k, v in values.items()})


def _pieces(q: str):
    """Text and syntax pieces in order: quotes keep their spaces, fields need a known name."""
    pos, n = 0, len(q)
    while pos < n:
        if q[pos].isspace():
            pos += 1
            continue
        start = pos
        field = _FIELD_RE.match(q, pos)
        if field and field.group(2).lower() in FIELDS:
            pos = _value_end(q, field.end())
            yield _Piece(q[start:pos], pos, is_text=False)
        elif q.startswith('-"', pos) or (q[pos] == "-" and pos + 1 < n and q[pos + 1].isalnum()):
            pos = _value_end(q, pos + 1)
            yield _Piece(q[start:pos], pos, is_text=False)
        elif q[pos] == '"':
            pos = _value_end(q, pos)
            yield _Piece(q[start:pos], pos, is_text=True)
        else:
            while pos < n and not q[pos].isspace() and q[pos] != '"':
                pos += 1
            yield _Piece(q[start:pos], pos, is_text=True)


def _value_end(q: str, pos: int) -> int:
    """End of a value starting at `pos`: past its closing quote, or at the next space."""
    if pos < len(q) and q[pos] == '"':
        close = q.find('"', pos + 1)
        return len(q) if close < 0 else close + 1
    while pos < len(q) and not q[pos].isspace():
        pos += 1
    return pos


def _free_text(q: str, pieces: list[_Piece]) -> str:
    """The text pieces joined; an `OR` beside a syntax term has nothing to join and goes."""
    kept = []
    for i, piece in enumerate(pieces):
        if not piece.is_text:
            continue
        if piece.raw == "OR":
            before = i > 0 and pieces[i - 1].is_text
            after = i + 1 < len(pieces) and pieces[i + 1].is_text and pieces[i + 1].raw != "OR"
            if not (before and after):
                continue
        kept.append(piece)
    text = " ".join(_UNKNOWN_FIELD_RE.sub(r"\1 ", p.raw, count=1) for p in kept)
    # The last word is a prefix (still being typed) only when it really ends the query.
    if kept and (kept[-1] is not pieces[-1] or kept[-1].end < len(q)):
        text += " "
    return text


def _unquote(value: str) -> str:
    if value.startswith('"'):
        value = value[1:-1] if len(value) > 1 and value.endswith('"') else value[1:]
    return value.strip()


def _read_term(raw: str, values: dict[str, list]) -> None:
    """Add one syntax term (`-word`, `-"a phrase"`, `field:value`) to `values`."""
    field = _FIELD_RE.match(raw)
    if field is None or field.group(2).lower() not in FIELDS:  # an exclusion
        words = tuple(tokens(_unquote(raw[1:])))
        if words:
            values["excluded"].append(words)
        return
    if field.group(1):
        raise QuerySyntaxError(
            f"q: {raw}: a filter cannot be excluded; "
            f"write the values you want, e.g. {EXAMPLES[field.group(2).lower()]}"
        )
    name = field.group(2).lower()
    value = _unquote(raw[field.end() :])
    if not value:
        raise QuerySyntaxError(f"q: {raw} needs a value, e.g. {EXAMPLES[name]}")
    key = FIELDS[name]
    if key in ("types", "extensions"):
        values[key].append(value.lower().lstrip(".") if key == "extensions" else value.lower())
    elif key == "paths":  # `a//b/` -> `a/b`, the form folders are indexed in
        values[key].append(re.sub("/+", "/", value).rstrip("/") or "/")
    elif key in ("sources", "cameras"):
        values[key].append(" ".join(value.split()) if key == "cameras" else value)
    elif key == "title":
        words = tuple(tokens(value))
        if not words:
            raise QuerySyntaxError(f"q: {raw} has no word to look for, e.g. {EXAMPLES[name]}")
        values[key].append(words)
    elif key == "modified":
        values[key].append(_range(raw, value, _date_period, DATE_HINT))
    else:
        values[key].append(_range(raw, value, _size_period, SIZE_HINT))


def _range(raw: str, value: str, period, hint: str) -> Range:
    """A value, a comparison (`>x`, `<=x`) or `a..b` as a Range; `period(text)` -> (low, high)."""
    try:
        if ".." in value:
            first, _, last = value.partition("..")
            if not first and not last:
                raise ValueError(value)
            low = period(first)[0] if first else None
            high = period(last)[1] if last else None
            if low is not None and high is not None and low >= high:
                raise QuerySyntaxError(f"q: {raw} ends before it starts")
            return Range(low, high)
        op, operand = _COMPARE_RE.fullmatch(value).groups()
        low, high = period(operand)
    except (ValueError, OverflowError):
        raise QuerySyntaxError(f"q: {raw} {hint}") from None
    return {
        None: Range(low, high),
        ">": Range(high, None),
        ">=": Range(low, None),
        "<": Range(None, low),
        "<=": Range(None, high),
    }[op]


def _date_period(text: str) -> tuple[int, int]:
    """Start and end (exclusive) in Unix seconds of a year, month or day, UTC."""
    m = _DATE_RE.fullmatch(text.strip())
    if m is None:
        raise ValueError(text)
    year, month, day = int(m.group(1)), m.group(2), m.group(3)
    if month is None:
        return _epoch(year, 1, 1), _epoch(year + 1, 1, 1)  # year 0 or 10000: ValueError
    month = int(month)
    if not 1 <= month <= 12:
        raise ValueError(text)
    if day is None:
        start = _epoch(year, month, 1)
        return start, start + calendar.monthrange(year, month)[1] * 86400
    start = _epoch(year, month, int(day))  # datetime refuses 2024-02-30
    return start, start + 86400


def _epoch(year: int, month: int, day: int) -> int:
    return int(datetime(year, month, day, tzinfo=UTC).timestamp())


def _size_period(text: str) -> tuple[int, int]:
    """Bytes of a size (`10MB`, `1.5k`, `500`): the range holding exactly that size."""
    m = _SIZE_RE.fullmatch(text.strip())
    if m is None or m.group(2).lower() not in UNITS:
        raise ValueError(text)
    size = round(float(m.group(1)) * UNITS[m.group(2).lower()])
    if size >= MAX_SIZE:  # beyond what the index's 64-bit integers hold
        raise ValueError(text)
    return size, size + 1
