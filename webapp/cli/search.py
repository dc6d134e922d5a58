"""Searching from the shell, with the query language and checks of the API."""

from __future__ import annotations

import html
import re
import unicodedata

import click
from flask.cli import with_appcontext

from webapp.cli.common import JSON_OPTION, fail, needs_data, print_json
from webapp.exceptions import TrawlError
from webapp.services import documents, search_args

SNIPPET_CHARS = 160  # one line of a wide terminal
_TAG = re.compile(r"<[^>]*>")


def terminal_text(text: str) -> str:
    """Text fit for one terminal line: no control or format characters (a file's own escape
    sequences or bidi overrides would act on the terminal), whitespace runs as one space."""
    kept = (" " if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") else ch for ch in text)
    return " ".join("".join(kept).split())


def plain_snippet(snippet: str) -> str:
    """The snippet's words without its HTML (the API marks matches with <em>)."""
    return terminal_text(html.unescape(_TAG.sub("", snippet)))


def print_page(page: dict) -> None:
    """The results as people read them: rank, title, type, where, a one-line snippet."""
    click.echo(f"{page['total']} results in {page['processing_time_ms']} ms")
    for r in page["results"]:
        found = "  (by meaning)" if r.get("match") == "meaning" else ""
        title = terminal_text(r.get("title") or r["basename"])
        click.echo(f"{r['rank']:>4}. {title}  [{r['type']}]{found}")
        click.echo(f"      {terminal_text(r['path'])}")
        snippet = plain_snippet(r["snippet"])
        if snippet:
            click.echo(f"      {snippet}")
    for facet, counts in (page.get("facet_distribution") or {}).items():
        click.echo(f"{facet}: " + ", ".join(f"{terminal_text(str(v))} {n}" for v, n in counts.items()))


@click.command("search")
@with_appcontext
@click.argument("query")
@click.option("--limit", default="10", help="Results to show (1-100).")
@click.option("--offset", default="0", help="Results to skip.")
@click.option("--source", "source_id", default=None, help="Only this source (id).")
@click.option("--type", "doc_type", default=None, help="Only this document type.")
@click.option("--sort", default="relevance", help="relevance, modified_at:desc, ...")
@click.option(
    "--facet",
    "facets",
    multiple=True,
    help="Count matches per type, extension, source_id or year (repeatable).",
)
@JSON_OPTION
@needs_data
def search(
    query: str,
    limit: str,
    offset: str,
    source_id: str | None,
    doc_type: str | None,
    sort: str,
    facets: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search from the shell: rank, title, type, where and a snippet of each result."""
    raw = {
        "q": query,
        "limit": limit,
        "offset": offset,
        "source_id": source_id,
        "type": doc_type,
        "sort": sort,
        "snippet_length": SNIPPET_CHARS,
        "facets": list(facets),
    }
    try:
        page = documents.search(search_args.load(raw), None)
    except TrawlError as exc:
        fail(exc)
    # rank, not score: a hybrid page mixes keyword scores with meaning's similarities
    for rank, result in enumerate(page["results"], start=page["offset"] + 1):
        result["rank"] = rank
    if as_json:
        print_json(page)
    else:
        print_page(page)
