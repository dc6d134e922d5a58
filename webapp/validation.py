"""What every validator shares: one JSON reader for request bodies, unknown keys refused, and
messages flattened to 'field: rule'."""

from __future__ import annotations

import json
import math
import unicodedata
from typing import Any

import marshmallow as ma
from flask.json.provider import DefaultJSONProvider

from webapp.exceptions import InvalidInput

INT_LIMIT = 2**63  # a body's integers are 64-bit at most (what a database column holds)


class BodyRefused(json.JSONDecodeError):
    """Valid JSON syntax the service will not take: a number out of range, a lone surrogate."""

    def __init__(self, reason: str, doc: str):
        super().__init__(reason, doc, 0)
        self.reason = reason


def _integer(text: str) -> int:
    # the length check comes first: int() of 5,000 digits is slow, past 4,300 a ValueError
    if len(text) > 20 or not -INT_LIMIT <= (value := int(text)) < INT_LIMIT:
        raise ValueError("a number is out of range (64-bit integers at most)")
    return value


def _real(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number is out of range")
    return value


def _constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def _lone_surrogate(data: Any) -> bool:
    """Whether a string (or key) anywhere in the parsed body holds half a UTF-16 pair, which
    no UTF-8 text (a database, a log line) can hold. A loop, not recursion: depth is free."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def load_json(raw: str | bytes) -> Any:
    """The one reader of JSON request bodies (Flask's `request.get_json` and the API's
    argument parser both use it). Syntax errors are `json.JSONDecodeError`; what parses but
    cannot be held (an integer past 64 bits, an infinite number, NaN, a lone surrogate
    `"\\ud800"`) is `BodyRefused`, a subclass, so each caller's 400 covers both."""
    try:
        text = raw if isinstance(raw, str) else raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BodyRefused("the body is not UTF-8 text", "?") from None
    try:
        data = json.loads(text, parse_int=_integer, parse_float=_real, parse_constant=_constant)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:
        raise BodyRefused(str(exc), text) from None
    if _lone_surrogate(data):
        raise BodyRefused("a string holds a lone surrogate (\\ud800-\\udfff)", text)
    return data


class JSONProvider(DefaultJSONProvider):
    """Flask's JSON with `load_json` as its reader (`request.get_json` anywhere)."""

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return load_json(s)


def json_detail(error: ValueError) -> str:
    """The 400 detail of a body `load_json` could not take."""
    if isinstance(error, BodyRefused):
        return f"Invalid JSON body: {error.reason}"
    return "Invalid JSON body"


class StrictSchema(ma.Schema):
    """Unknown keys are an error (400 naming the key)."""

    class Meta:
        unknown = ma.RAISE


def validation_detail(messages) -> str:
    """Flatten marshmallow/webargs messages into 'field: rule' (the first problem)."""
    if isinstance(messages, dict):
        if set(messages) <= {"json", "query", "form", "files", "headers", "path"}:
            for value in messages.values():
                return validation_detail(value)
        for field, value in messages.items():
            inner = validation_detail(value)
            if field == "_schema":
                return inner
            return f"{field}: {inner[0].lower() + inner[1:] if inner else 'is invalid'}"
    if isinstance(messages, list | tuple) and messages:
        return validation_detail(messages[0])
    text = str(messages).rstrip(".")
    return {
        "Missing data for required field": "is required",
        "Unknown field": "unknown field",
        "Field may not be null": "may not be null",
    }.get(text, text)


# letters and symbols that draw nothing: the Hangul fillers, the braille blank, the
# combining grapheme joiner
BLANK_GLYPHS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f")


def invisible(ch: str) -> bool:
    """Whether a character shows nothing: whitespace, control and format characters (the
    zero-width ones, bidi marks), surrogates, unassigned code points, blank glyphs."""
    return ch.isspace() or ch in BLANK_GLYPHS or unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Cn")


def has_visible(text: str) -> bool:
    """Whether a name or a password holds something besides invisible characters."""
    return not all(invisible(ch) for ch in text)


def username_key(name: str) -> str:
    """What makes two usernames the same account: NFKC, then casefold (`Admin`, `ADMIN` and
    fullwidth `ａｄｍｉｎ` are one name), unique in the database."""
    return unicodedata.normalize("NFKC", name).casefold()


def display_name(value: Any, limit: int) -> str:
    """A name people give (a source's, a saved search's) without surrounding spaces, or a 400:
    1 to `limit` characters, no control characters, not only invisible ones."""
    if not isinstance(value, str):
        raise InvalidInput("name: must be a string")
    name = value.strip()
    if not name or len(name) > limit:
        raise InvalidInput(f"name: must be 1 to {limit} characters")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise InvalidInput("name: must not contain control characters")
    if not has_visible(name):
        raise InvalidInput(
            "name: must contain a visible character (not only spaces, zero-width or format characters)"
        )
    return name
