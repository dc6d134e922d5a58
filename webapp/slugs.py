"""Source id rules: the allowed shape, slugs made from names, and making them unique."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Container

SOURCE_ID_RE = r"^[a-z0-9][a-z0-9_-]{0,62}$"
MAX_LENGTH = 63
FALLBACK = "source"

_SOURCE_ID = re.compile(SOURCE_ID_RE)
_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
# letters that Unicode decomposition does not reduce to ASCII
_SPECIAL = str.maketrans(
    {
        "ß": "ss",
        "æ": "ae",
        "Æ": "AE",
        "ø": "o",
        "Ø": "O",
        "œ": "oe",
        "Œ": "OE",
        "đ": "d",
        "Đ": "D",
        "ł": "l",
        "Ł": "L",
        "þ": "th",
        "Þ": "TH",
        "ð": "d",
        "Ð": "D",
        "ı": "i",
    }
)


def is_valid_source_id(source_id: object) -> bool:
    """True when `source_id` has the allowed shape (lower case, digits, `_`, `-`, ≤ 63)."""
    return isinstance(source_id, str) and _SOURCE_ID.fullmatch(source_id) is not None


def slugify(name: str) -> str:
    """A source id made from a display name: "Café Photos" -> "cafe-photos"."""
    folded = unicodedata.normalize("NFKD", name.translate(_SPECIAL))
    ascii_text = folded.encode("ascii", "ignore").decode("ascii").lower()
    slug = _NOT_ALNUM.sub("-", ascii_text).strip("-")
    slug = slug[:MAX_LENGTH].rstrip("-")
    return slug or FALLBACK


def unique_slug(base: str, taken: Container[str]) -> str:
    """`base`, or `base-2`, `base-3`, … (cut to stay within 63 chars) when already taken."""
    if base not in taken:
        return base
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = base[: MAX_LENGTH - len(suffix)].rstrip("-") + suffix
        if candidate not in taken:
            return candidate
        number += 1
