"""Saved searches: a user's searches kept under a name (query, filters, sort), for the API and UI."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.exc import IntegrityError

from webapp.exceptions import Conflict, NotFound
from webapp.extensions import db
from webapp.models import SavedSearch, User, by_id, iso
from webapp.services import search_args
from webapp.services.access import visible_sources
from webapp.validation import display_name

NAME_MAX = 100


def to_json(saved: SavedSearch) -> dict:
    """The API's shape of a saved search."""
    return {
        "id": saved.id,
        "name": saved.name,
        "q": saved.q,
        "source_id": saved.source_id,
        "type": saved.type,
        "sort": saved.sort,
        "created_at": iso(saved.created_at),
    }


def list_json(user: User) -> list[dict]:
    """The user's saved searches, by name."""
    rows = db.session.query(SavedSearch).filter_by(user_id=user.id).order_by(SavedSearch.name, SavedSearch.id)
    return [to_json(s) for s in rows]


def create(user: User, data: Mapping) -> SavedSearch:
    """Save a search; 400 when the search itself would be refused, 409 when the name is taken."""
    name = display_name(data.get("name"), NAME_MAX)
    args = search_args.load(
        {
            "q": data.get("q"),
            "source_id": data.get("source_id") or None,
            "type": data.get("type") or None,
            "sort": data.get("sort") or "relevance",
        }
    )
    # unknown types, sources (or ones the user may not see) and bad query terms are refused here
    search_args.to_query(args, visible_sources(user))
    if db.session.query(SavedSearch.id).filter_by(user_id=user.id, name=name).first():
        raise Conflict(f"name: you already have a saved search named '{name}'")
    saved = SavedSearch(
        user_id=user.id,
        name=name,
        q=args["q"].strip(),
        source_id=args["source_id"],
        type=args["type"],
        sort=args["sort"],
    )
    db.session.add(saved)
    try:
        db.session.commit()
    except IntegrityError:  # the same name saved at the same moment by another request
        db.session.rollback()
        raise Conflict(f"name: you already have a saved search named '{name}'") from None
    return saved


def delete(user: User, saved_id: int) -> None:
    """Delete one of the user's saved searches (another user's is a 404, as a missing one)."""
    saved = by_id(SavedSearch, saved_id)
    if saved is None or saved.user_id != user.id:
        raise NotFound(f"Saved search {saved_id} not found")
    db.session.delete(saved)
    db.session.commit()
