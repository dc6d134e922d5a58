"""Saved searches in the UI: save the current search under a name, list and delete them."""

from __future__ import annotations

from flask import flash, g, redirect, request, url_for
from flask_babel import gettext as _

from webapp.exceptions import TrawlError
from webapp.services import saved_searches
from webapp.ui.blueprint import bp
from webapp.ui.filters import readable

# The page's filters that have no field of their own in a saved search: kept as query terms.
_AS_TERMS = (("ext", "ext"), ("year", "modified"), ("camera", "camera"), ("folder", "path"))


def search_url(saved: dict) -> str:
    """The search page's address of a saved search."""
    params = {
        "q": saved["q"],
        "source": saved["source_id"],
        "type": saved["type"],
        "sort": saved["sort"] if saved["sort"] != "relevance" else None,
    }
    return url_for("ui.index", **{k: v for k, v in params.items() if v})


def _quoted(value: str) -> str:
    value = value.strip().replace('"', "")
    return f'"{value}"' if any(c.isspace() for c in value) else value


def _from_form(form) -> dict:
    """The saved search of the page's form: its box, filters and sort."""
    terms = [(form.get("q") or "").strip()]
    terms += [f"{field}:{_quoted(form[name])}" for name, field in _AS_TERMS if (form.get(name) or "").strip()]
    start, end = (form.get("from") or "").strip(), (form.get("to") or "").strip()
    if start or end:
        terms.append(f"modified:{start}..{end}")
    return {
        "name": form.get("name", ""),
        "q": " ".join(t for t in terms if t),
        "source_id": (form.get("source") or "").strip() or None,
        "type": (form.get("type") or "").strip() or None,
        "sort": form.get("sort") or "relevance",
    }


@bp.post("/saved-searches")
def saved_search_create():
    """Save the search the form carries; back to that search with a message."""
    data = _from_form(request.form)
    try:
        saved = saved_searches.to_json(saved_searches.create(g.user, data))
    except TrawlError as exc:
        flash(_("Not saved: %(reason)s", reason=readable(exc.detail)), "error")
        return redirect(search_url({"sort": "relevance", **data}))
    flash(_("Search saved as “%(name)s”.", name=saved["name"]), "success")
    return redirect(search_url(saved))


@bp.post("/saved-searches/<int:saved_id>/delete")
def saved_search_delete(saved_id: int):
    """Delete one of the user's saved searches; back to the search page."""
    saved_searches.delete(g.user, saved_id)
    flash(_("Saved search deleted."), "success")
    return redirect(url_for("ui.index"))
