"""What Trawl's queries become in Meilisearch's language: the `q` it is sent and the filter
expressions (access, the request's filters, the query language's fields and ranges)."""

from __future__ import annotations

from collections.abc import Iterable

from webapp.search import SearchQuery, collapses
from webapp.search.query import ParsedQuery, QueryTerm
from webapp.search.syntax import QuerySpec, Range

NOTHING = "chunk < 0"  # a filter no document passes (every chunk number is 0 or more)


def quote(value: str) -> str:
    """A string literal for a Meilisearch filter expression."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def any_of(attribute: str, values: Iterable[str]) -> str:
    """`attribute IN [...]`; NOTHING for no values (no grant, no candidate: no document)."""
    named = ", ".join(quote(v) for v in values)
    return f"{attribute} IN [{named}]" if named else NOTHING


def meili_q(spec: QuerySpec, parsed: ParsedQuery) -> str:
    """The q Meilisearch gets: its own `-word` / `-"phrase"` exclusions, then the text.

    Meilisearch cannot limit one word to some attributes, so a `title:` term is sent as a
    phrase that must match in any field (docs/api.md says so).
    """
    parts = ["-" + phrase(words) for words in spec.excluded]
    parts += ['"' + " ".join(words) + '"' for words in spec.title]
    return " ".join(parts + [meili_text(parsed)]).lstrip()


def phrase(words: tuple[str, ...]) -> str:
    return words[0] if len(words) == 1 else '"' + " ".join(words) + '"'


def meili_filters(query: SearchQuery, spec: QuerySpec) -> list[str]:
    """The one place filters are composed: the access filter, the request's filters and the
    query language's (field values any-of, ranges all-of)."""
    out = []
    if query.source_ids is not None:  # the sources the asker may see (none: NOTHING)
        out.append(any_of("source_id", query.source_ids))
    if query.source_id is not None:
        out.append(f"source_id = {quote(query.source_id)}")
    if query.type is not None:
        out.append(f"type = {quote(query.type)}")
    if query.within_ids is not None:  # meaning's candidates (search/hybrid.py)
        out.append(any_of("id", query.within_ids))
    for attribute, values in (
        ("type", spec.types),
        ("extension", spec.extensions),
        ("source_id", spec.sources),
        ("folders", spec.paths),
    ):
        if values:
            out.append(any_of(attribute, values))
    if spec.cameras:
        out.append(any_of("camera", spec.cameras))
    out += [meili_range("date", r) for r in spec.modified]
    out += [meili_range("size_bytes", r) for r in spec.size]
    if collapses(query):  # identical texts once (a document without the flag is no copy)
        out.append("copy != true")
    return [f for f in out if f]


def meili_range(attribute: str, bounds: Range) -> str:
    parts = []
    if bounds.low is not None:
        parts.append(f"{attribute} >= {bounds.low}")
    if bounds.high is not None:
        parts.append(f"{attribute} < {bounds.high}")
    return "(" + " AND ".join(parts) + ")" if parts else ""


def meili_text(parsed: ParsedQuery) -> str:
    """The query as Meilisearch reads it. It has no `OR`: the alternatives of a slot are
    sent as words of their own (with `last` or `frequency` any of them may match); phrases
    stay quoted, and a typed word our tokenizer splits (`file7`, `INV-2024-001`) is sent
    quoted as typed, so that its parts match together (Meilisearch's phrases are exact: no
    prefix while such a word is typed); a trailing space unless the last word is a prefix
    being typed."""
    parts = []
    for slot in parsed.slots:
        for alternative in slot.alternatives:
            if isinstance(alternative, QueryTerm):
                parts.append(alternative.text)
            else:
                parts.append('"' + alternative.raw.replace('"', " ") + '"')
    last = parsed.terms[-1] if parsed.terms else None
    prefix = bool(parsed.slots) and last is parsed.slots[-1].alternatives[-1] and last.prefix
    return " ".join(parts) + ("" if prefix else " ")
