"""How a Tantivy query is composed around its text part: the access filter, the request's and
the query language's filters, exclusions, copies, and the containers a search leaves out so
that a container and its members are listed once (search.folds). TantivyBackend's search
builds every query it runs (page, facets, fold) here."""

from __future__ import annotations

import dataclasses

import tantivy
from tantivy import Occur, Query

from webapp.search import FOLDED_TYPES, MAX_FOLDED, SearchQuery, collapses, folds, naming_words
from webapp.search.ranking import FIELD_WEIGHTS, NAME_FIELDS
from webapp.search.syntax import QuerySpec, Range
from webapp.search.tantivy_text import TextQuery, index_words


def folded_out(query: SearchQuery, spec: QuerySpec, builder: TextQuery, match: Query) -> Query | None:
    """What is left out so that a container and its members are listed once: the
    containers (FOLDED_TYPES) whose names hold no word of the query (search.folded) and
    that hold a member matching it (counted by `container_id` over every match, copies
    too, whose text is listed under their primary: one more pass over the matches,
    skipped while the index holds no container); None when there is none. Counted
    without meaning's candidates (`within_ids`): whether a container is listed does not
    depend on which others are asked about."""
    searcher = builder.searcher
    if not (builder.held and folds(query)) or not any(searcher.doc_freq("type", t) for t in FOLDED_TYPES):
        return None
    every = dataclasses.replace(query, within_ids=None, with_copies=True)
    whole = compose(match, every, spec, builder)
    members = Query.boolean_query([(Occur.Must, whole), (Occur.Must, Query.exists_query("container_id"))])
    aggs = {"held": {"terms": {"field": "container_id", "size": MAX_FOLDED}}}
    held = [str(b["key"]) for b in searcher.aggregate(members, aggs)["held"]["buckets"]]
    if not held:
        return None
    shape = [
        (Occur.Must, Query.term_set_query(builder.schema, "id", held)),
        (Occur.Must, Query.term_set_query(builder.schema, "type", list(FOLDED_TYPES))),
    ]
    shape += [(Occur.MustNot, builder.term("basename", w)) for w in index_words(naming_words(query))]
    return Query.boolean_query(shape)


def compose(
    text_query: Query,
    query: SearchQuery,
    spec: QuerySpec,
    builder: TextQuery,
    fold: Query | None = None,
) -> Query:
    """The one place filters are composed: the text part AND the access filter, the
    request's filters and the query language's filters (scored 0), its `title:` terms
    (scored), -exclusions and the containers `fold` leaves out (folded_out)."""
    schema = builder.schema
    filters = []
    if builder.visible is not None:  # the sources the asker may see (None: all there are)
        filters.append(builder.granted())
    if query.source_id is not None:
        filters.append(builder.term("source_id", query.source_id))
    if query.type is not None:
        filters.append(builder.term("type", query.type))
    if query.within_ids is not None:  # meaning's candidates (search/hybrid.py)
        filters.append(Query.term_set_query(schema, "id", list(query.within_ids)))
    filters += [
        Query.term_set_query(schema, field, list(values))
        for field, values in (
            ("type", spec.types),
            ("extension", spec.extensions),
            ("source_id", spec.sources),
            ("folders", spec.paths),
        )
        if values
    ]
    if spec.cameras:
        filters.append(Query.term_set_query(schema, "camera_key", [c.casefold() for c in spec.cameras]))
    date = "date" if builder.dated else "modified_at"
    filters += [_range(schema, date, r) for r in spec.modified]
    filters += [_range(schema, "size_bytes", r) for r in spec.size]
    if query.also_ids:  # meaning's confident documents match too, scoring 0 for the text
        also = Query.const_score_query(Query.term_set_query(schema, "id", list(query.also_ids)), 0.0)
        text_query = Query.boolean_query([(Occur.Should, text_query), (Occur.Should, also)])
    clauses = [(Occur.Must, text_query)]
    clauses += [(Occur.Must, Query.const_score_query(f, 0.0)) for f in filters]
    if builder.dated and collapses(query):  # identical texts once (an older index: no flags)
        clauses.append((Occur.MustNot, builder.term("copy", "1")))
    clauses += [(Occur.Must, builder.words_in(words, NAME_FIELDS)) for words in spec.title]
    clauses += [(Occur.MustNot, builder.words_in(words, tuple(FIELD_WEIGHTS))) for words in spec.excluded]
    if fold is not None:
        clauses.append((Occur.MustNot, fold))
    return Query.boolean_query(clauses) if len(clauses) > 1 else text_query


def _range(schema: tantivy.Schema, field: str, bounds: Range) -> Query:
    """Integers of `field` within [low, high)."""
    return Query.range_query(
        schema,
        field,
        tantivy.FieldType.Integer,
        bounds.low,
        bounds.high,
        include_lower=True,
        include_upper=bounds.high is None,
    )
