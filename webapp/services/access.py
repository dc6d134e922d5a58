"""Who may see which source: admins see every source, users the sources granted to them.

A source a user was not granted does not exist for that user: its documents are filtered out
inside the search query (both backends), and asking for it or one of its documents by id is
the same 404 as for an id that never existed. `None` below means "every source".
"""

from __future__ import annotations

from webapp.exceptions import NotFound
from webapp.extensions import db
from webapp.models import Source, User, UserSource

Visible = frozenset[str] | None  # the source ids a user sees; None: all of them


def visible_sources(user: User | None) -> Visible:
    """The sources `user` may see: None (all) for admins and for the CLI (no user)."""
    if user is None or user.is_admin:
        return None
    return granted(user.id)


def granted(user_id: int) -> frozenset[str]:
    """The sources granted to an account (what admins set; admins see all regardless)."""
    rows = db.session.query(UserSource.source_id).filter_by(user_id=user_id)
    return frozenset(sid for (sid,) in rows)


def can_see(visible: Visible, source_id: str) -> bool:
    """Whether a source is among the visible ones."""
    return visible is None or source_id in visible


def source_for(user: User | None, source_id: str) -> Source:
    """The source, or the 404 of a missing one when `user` may not see it."""
    source = db.session.get(Source, source_id)
    if source is None or not can_see(visible_sources(user), source_id):
        raise NotFound(f"Source '{source_id}' not found")
    return source
