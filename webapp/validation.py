"""What every validator shares: unknown keys refused, and messages flattened to 'field: rule'."""

from __future__ import annotations

import unicodedata
from typing import Any

import marshmallow as ma

from webapp.exceptions import InvalidInput


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
    return {"Missing data for required field": "is required",
            "Unknown field": "unknown field",
            "Field may not be null": "may not be null"}.get(text, text)


def display_name(value: Any, limit: int) -> str:
    """A name people give (a source's, a saved search's) without surrounding spaces, or a 400:
    1 to `limit` characters, no control characters."""
    if not isinstance(value, str):
        raise InvalidInput("name: must be a string")
    name = value.strip()
    if not name or len(name) > limit:
        raise InvalidInput(f"name: must be 1 to {limit} characters")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise InvalidInput("name: must not contain control characters")
    return name
