"""The one validator of search arguments: the API, the web page and the CLI give the same errors.

`load()` checks the shape (the API's marshmallow schema, so the texts are the API's);
`to_query()` checks what needs the data: the query language of `q`, that a `type` is a
known type and a source exists, and turns `path:` folders into absolute ones.
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Iterable, Mapping

import marshmallow as ma
from marshmallow import fields, validate

from webapp.exceptions import InvalidInput
from webapp.extensions import db
from webapp.models import IndexedFile, Source
from webapp.search import (
    DEFAULT_MATCHING_STRATEGY,
    FACETS,
    MATCHING_STRATEGIES,
    SORTS,
    SearchQuery,
)
from webapp.search.hybrid import DEFAULT_SEMANTIC_RATIO
from webapp.search.syntax import QuerySpec, parse_syntax
from webapp.services.access import Visible, can_see
from webapp.validation import StrictSchema, validation_detail

# A question pasted whole is searched (its first MAX_QUERY_WORDS words); longer text is 400.
MAX_Q_CHARS = 4000


class HybridSchema(StrictSchema):
    """`hybrid`: how much meaning weighs against words (Meilisearch's names)."""

    semantic_ratio = fields.Float(
        required=True,
        validate=validate.Range(min=0.0, max=1.0, error="must be between 0 and 1"),
        metadata={
            "description": "0: words only, 1: meaning only; absent: "
            f"{DEFAULT_SEMANTIC_RATIO} (docs/relevance.md)"
        },
    )


class SearchArgsSchema(StrictSchema):
    """The search request: the API's JSON body, the web page's query string, the CLI's options."""

    q = fields.String(required=True)
    source_id = fields.String(load_default=None, allow_none=True)
    type = fields.String(load_default=None, allow_none=True)
    limit = fields.Integer(
        load_default=20, validate=validate.Range(min=1, max=100, error="must be between 1 and 100")
    )
    offset = fields.Integer(
        load_default=0, validate=validate.Range(min=0, max=100_000, error="must be between 0 and 100000")
    )
    sort = fields.String(
        load_default="relevance", validate=validate.OneOf(SORTS, error="must be one of " + ", ".join(SORTS))
    )
    snippet_length = fields.Integer(
        load_default=300, validate=validate.Range(min=50, max=1000, error="must be between 50 and 1000")
    )
    matching_strategy = fields.String(
        load_default=DEFAULT_MATCHING_STRATEGY,
        validate=validate.OneOf(
            MATCHING_STRATEGIES, error="must be one of " + ", ".join(MATCHING_STRATEGIES)
        ),
    )
    facets = fields.List(
        fields.String(),
        load_default=list,
        metadata={"description": "Count matches per value of these: " + ", ".join(FACETS)},
    )
    facet_folder = fields.String(
        load_default=None,
        allow_none=True,
        metadata={
            "description": "The folder, relative to the sources' roots, whose subfolders the "
            "`folder` facet counts; absent: the single relative `path:` of q, else the top"
        },
    )
    hybrid = fields.Nested(
        HybridSchema,
        load_default=None,
        allow_none=True,
        metadata={"description": "Fuse meaning with words; absent: the default ratio"},
    )

    @ma.validates("q")
    def _q(self, value: str, **kwargs) -> None:
        if len(value) > MAX_Q_CHARS:
            raise ma.ValidationError(f"must be at most {MAX_Q_CHARS} characters")

    @ma.validates_schema
    def _browse(self, data: dict, **kwargs) -> None:
        """An empty q lists documents when a sort, type or source says which (browsing)."""
        listing = data.get("type") or data.get("source_id") or data.get("sort", "relevance") != "relevance"
        if "q" in data and not data["q"].strip() and not listing:
            raise ma.ValidationError(
                "must not be empty (or give a sort, type or source_id to list documents)", "q"
            )

    @ma.validates("facet_folder")
    def _facet_folder(self, value: str | None, **kwargs) -> None:
        if value and ".." in value.split("/"):
            raise ma.ValidationError("must be a folder inside the sources, without `..`")

    @ma.validates("facets")
    def _facets(self, value: list[str], **kwargs) -> None:
        for name in value:
            if name not in FACETS:
                raise ma.ValidationError(f"unknown facet {name!r} (use {', '.join(FACETS)})")


def load(raw: Mapping) -> dict:
    """Arguments as the API's search body would be after validation; InvalidInput when bad."""
    try:
        return SearchArgsSchema().load(dict(raw))
    except ma.ValidationError as exc:
        raise InvalidInput(validation_detail(exc.messages)) from None


def to_query(args: Mapping, visible: Visible) -> SearchQuery:
    """A SearchQuery of loaded arguments after the checks against the data (400 when bad),
    limited to the `visible` sources (None: all); one not visible is an unknown source."""
    spec = parse_syntax(args["q"])
    source_id = args.get("source_id") or None
    doc_type = args.get("type") or None
    if doc_type is not None:
        check_type(doc_type, "type")
    if source_id is not None:
        check_source(source_id, "source_id", visible)
    for value in spec.types:
        check_type(value, f"q: type:{value}")
    for value in spec.sources:
        check_source(value, f"q: source:{value}", visible)
    wanted = [source_id] if source_id else list(spec.sources) or visible
    facets = tuple(dict.fromkeys(args.get("facets") or ()))
    folder_facet: tuple[str, ...] = ()
    if "folder" in facets:
        folder_facet = tuple(folder_parents(facet_folder(args, spec), wanted))
    if spec.paths:
        spec = dataclasses.replace(spec, paths=tuple(resolve_paths(spec.paths, wanted)))
    return SearchQuery(
        q=args["q"],
        source_id=source_id,
        type=doc_type,
        limit=args.get("limit", 20),
        offset=args.get("offset", 0),
        sort=args.get("sort", "relevance"),
        snippet_length=args.get("snippet_length", 300),
        facets=facets,
        folder_facet=folder_facet,
        spec=spec,
        source_ids=None if visible is None else tuple(sorted(visible)),
        matching_strategy=args.get("matching_strategy") or DEFAULT_MATCHING_STRATEGY,
    )


def facet_folder(args: Mapping, spec: QuerySpec) -> str:
    """The folder (relative, `` for the top) whose subfolders the `folder` facet counts."""
    asked = args.get("facet_folder")
    if asked is None and len(spec.paths) == 1 and not spec.paths[0].startswith("/"):
        asked = spec.paths[0]
    return _clean(asked.strip("/")).strip("/") if asked and asked.strip("/") else ""


def folder_parents(folder: str, source_ids: Iterable[str] | None) -> list[str]:
    """The absolute folders of a relative one under the root of each source (of
    `source_ids` when given): the parents the `folder` facet counts the subfolders of."""
    return [_clean(posixpath.join(root, folder)) if folder else root for _, root in source_roots(source_ids)]


def source_roots(source_ids: Iterable[str] | None) -> list[tuple[str, str]]:
    """(id, root folder) of the sources (of `source_ids` when given), deepest root first."""
    wanted = None if source_ids is None else set(source_ids)
    rows = db.session.query(Source.id, Source.root_path)
    found = [(sid, _clean(root)) for sid, root in rows if wanted is None or sid in wanted]
    return sorted(found, key=lambda row: -len(row[1]))


def relative_folders(counts: Mapping[str, int], source_ids: Iterable[str] | None) -> dict[str, int]:
    """The `folder` facet's absolute folders as paths relative to their source's root (the
    same folder name in several sources counts once, summed), most frequent first."""
    roots = source_roots(source_ids)
    out: dict[str, int] = {}
    for folder, count in counts.items():
        for _, root in roots:
            if folder.startswith(root.rstrip("/") + "/"):
                name = folder[len(root.rstrip("/")) + 1 :]
                out[name] = out.get(name, 0) + count
                break
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def semantic_ratio(args: Mapping) -> float:
    """The weight of meaning a loaded request asks for (the default when absent)."""
    return float((args.get("hybrid") or {}).get("semantic_ratio", DEFAULT_SEMANTIC_RATIO))


def check_type(doc_type: str, label: str) -> None:
    """400 `<label>: unknown type 'X'` unless extractors make that type or documents have it."""
    # the extractors' registry imports every extractor's libraries: only when a type is checked
    # (a CLI search without one stays light, docs/performance.md "The CLI")
    from webapp.indexing.extractors import DOC_TYPES

    if doc_type in DOC_TYPES:
        return
    if db.session.query(IndexedFile.id).filter_by(doc_type=doc_type).first() is None:
        raise InvalidInput(f"{label}: unknown type {doc_type!r}")


def check_source(source_id: str, label: str, visible: Visible = None) -> None:
    """400 `<label>: unknown source 'x'` unless that source exists and is visible."""
    if not can_see(visible, source_id) or db.session.get(Source, source_id) is None:
        raise InvalidInput(f"{label}: unknown source {source_id!r}")


def resolve_paths(paths: Iterable[str], source_ids: Iterable[str] | None) -> list[str]:
    """Absolute folders for `path:` values: absolute ones as they are, relative ones under the
    root of each source (of `source_ids` when given)."""
    roots = None
    out: list[str] = []
    for path in paths:
        if path.startswith("/"):
            out.append(_clean(path))
            continue
        if roots is None:
            query = db.session.query(Source.id, Source.root_path)
            roots = [root for sid, root in query if not source_ids or sid in source_ids]
        # No source to resolve it under: kept relative, it matches nothing (folders are absolute).
        out += [_clean(posixpath.join(root, path)) for root in roots] or [path]
    return list(dict.fromkeys(out))


def _clean(path: str) -> str:
    """`/a//b/./c/` -> `/a/b/c` (the form the index keeps folders in)."""
    return posixpath.normpath(path).replace("//", "/")
