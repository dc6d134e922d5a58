"""The search box's text as the one place of the page's filters: its `type:` and `source:`
terms are what the Type and Source selects show (a choice there is written into the box), and
its words alone are what the document page highlights. Pure string work."""

from __future__ import annotations

import re

from webapp.exceptions import TrawlError
from webapp.search.syntax import FIELDS, parse_syntax

SELECT_FIELDS = ("type", "source")  # the box's terms that have a select of their own
# `type:pdf`, `Source:"my notes"`: a term of the field, not negated (`-type:pdf` is a word)
_TERMS = {field: re.compile(rf'(?<!\S){field}:(?:"([^"]*)"|(\S+))', re.I) for field in SELECT_FIELDS}
# any `field:value` of the query language, and upper-case OR (for the words alone)
_ANY_TERM = re.compile(rf'(?<!\S)-?(?:{"|".join(FIELDS)}):(?:"[^"]*"|\S+)', re.I)


def terms(q: str, field: str) -> list[str]:
    """The values of the box's `field:` terms, in order."""
    return [quoted or plain for quoted, plain in _TERMS[field].findall(q)]


def _quoted(value: str) -> str:
    value = value.replace('"', "")
    return f'"{value}"' if any(c.isspace() for c in value) else value


def with_term(q: str, field: str, value: str | None) -> str:
    """`q` with its `field:` terms replaced by `field:value` (at the end), or removed (None,
    empty)."""
    rest = " ".join(_TERMS[field].sub(" ", q).split())
    return f"{rest} {field}:{_quoted(value)}".strip() if value else rest


def fold_selects(form: dict) -> dict:
    """The page's form with the selects' choices written into the box (where the box says
    nothing of that field) and each select showing the box's one term of its field (empty for
    none or several): one state, whichever of the two was changed."""
    for field in SELECT_FIELDS:
        if form.get(field) and not terms(form["q"], field):
            form["q"] = with_term(form["q"], field, form[field])
        typed = terms(form["q"], field)
        form[field] = typed[0] if len(typed) == 1 else ""
    return form


def words(q: str) -> str:
    """The words and phrases of a query without its operators and filters (`ext:cbz` ->
    ``, `hull -draft type:pdf` -> `hull`): what a page can mark in a document's text."""
    try:
        text = parse_syntax(q).text
    except TrawlError:  # a term being typed: drop what looks like one
        text = _ANY_TERM.sub(" ", q)
    kept = [w for w in text.replace('"', " ").split() if w != "OR" and not w.startswith("-")]
    return " ".join(kept)
