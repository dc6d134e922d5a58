"""Browsing on the search page: the facets beside the results (the folder tree among them)
and the choice between the list and the grid of pictures."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l

from webapp.search.syntax import QuerySpec
from webapp.ui.filters import type_label

# (API facet, URL parameter, heading) of the facets beside the results, the folder tree first.
FACET_GROUPS = (
    ("folder", "folder", _l("Folder")),
    ("type", "type", _l("Type")),
    ("extension", "ext", _l("Extension")),
    ("source_id", "source", _l("Source")),
    ("year", "year", _l("Year")),
    ("camera", "camera", _l("Camera")),
)
MAX_FACET_LINKS = 12
MAX_FOLDER_LINKS = 30
VIEWS = ("list", "grid")
PICTURE_TYPES = frozenset({"image", "raw_image"})  # a search for only these shows the grid

PageUrl = Callable[..., str]  # page_url(page, **changed parameters) of pages.py


def view_of(form: Mapping, spec: QuerySpec | None) -> str:
    """`grid` or `list`: as asked (`view`), else the grid for a search of pictures only."""
    if form.get("view") in VIEWS:
        return form["view"]
    types = set(spec.types) if spec else set()
    if form.get("type"):
        types.add(form["type"])
    return "grid" if types and types <= PICTURE_TYPES else "list"


def facet_groups(result: dict, form: dict, source_names: dict[str, str], page_url: PageUrl) -> list[dict]:
    """The facets beside the results: per value its count and a link that toggles it."""
    distribution = result.get("facet_distribution") or {}
    groups = []
    for facet, param, label in FACET_GROUPS:
        counts = distribution.get(facet) or {}
        if facet == "folder":
            tree = folder_tree(counts, form["folder"], page_url)
            if tree["values"] or tree["crumbs"]:
                groups.append({"param": param, "label": label, **tree})
            continue
        items = sorted(
            counts.items(), key=lambda kv: (-int(kv[0]), 0) if facet == "year" else (-kv[1], kv[0])
        )[:MAX_FACET_LINKS]
        values = [
            {
                "value": value,
                "count": count,
                "selected": form[param] == value,
                "label": _label(facet, value, source_names),
                "url": page_url(1, **{param: None if form[param] == value else value}),
            }
            for value, count in items
        ]
        if values:
            groups.append({"param": param, "label": label, "values": values, "crumbs": []})
    return groups


def _label(facet: str, value: str, source_names: dict[str, str]) -> str:
    if facet == "source_id":
        return source_names.get(value, value)
    return type_label(value) if facet == "type" else value


def folder_tree(counts: Mapping[str, int], folder: str, page_url: PageUrl) -> dict:
    """The folder facet as one level of a tree: the way up from the chosen folder (each step
    a link to that level; `All folders` drops the filter) and its subfolders with their
    counts, each a link one level down (the search then counts that one's subfolders)."""
    folder = folder.strip("/")
    crumbs = []
    if folder:
        crumbs.append({"label": _("All folders"), "url": page_url(1, folder=None)})
        parts = folder.split("/")
        for depth in range(1, len(parts) + 1):
            path = "/".join(parts[:depth])
            crumbs.append(
                {"label": parts[depth - 1], "url": page_url(1, folder=path), "current": path == folder}
            )
    values = [
        {
            "value": path,
            "count": count,
            "selected": False,
            "label": path.rpartition("/")[2] + "/",
            "url": page_url(1, folder=path),
        }
        for path, count in list(counts.items())[:MAX_FOLDER_LINKS]
    ]
    return {"values": values, "crumbs": crumbs}
