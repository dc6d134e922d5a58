"""Accounts as admins manage them: create, edit, disable, delete, and the sources they see.

The rules: usernames and passwords as at setup (services/auth.py), a role of `admin` or
`user`, grants naming existing sources. The last active admin cannot be disabled, demoted
or deleted (409), so the service always has someone who can manage it. Disabling raises the
account's generation, which is part of its credential stamp: every session, access token and
download link it had ends at once, and enabling it again does not bring them back; its API
tokens are deleted. Deleting removes its grants and tokens with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webapp.exceptions import Conflict, InvalidInput, NotFound
from webapp.extensions import db
from webapp.models import ROLES, ApiToken, Source, User, UserSource, by_id
from webapp.services import auth

FIELDS = ("username", "password", "role", "active", "source_ids")


def get(user_id: int) -> User:
    """The account, or 404."""
    user = by_id(User, user_id)
    if user is None:
        raise NotFound(f"User {user_id} not found")
    return user


def list_json() -> list[dict]:
    """Every account, by username."""
    return [auth.user_json(u) for u in db.session.query(User).order_by(User.username)]


def _role(value: Any) -> bool:
    if value not in ROLES:
        raise InvalidInput("role: must be one of " + ", ".join(ROLES))
    return value == "admin"


def _active(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput("active: must be true or false")
    return value


def _source_ids(value: Any) -> list[str]:
    """Granted sources: a list of ids of existing sources (400 naming an unknown one)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput("source_ids: must be a list of source ids")
    known = {sid for (sid,) in db.session.query(Source.id).filter(Source.id.in_(value))}
    for sid in value:
        if sid not in known:
            raise InvalidInput(f"source_ids: unknown source {sid!r}")
    return sorted(set(value))


def create(data: Mapping) -> User:
    """A new account: username and password required; role `user`, active, no grants unless
    given."""
    is_admin = _role(data.get("role", "user"))
    active = _active(data.get("active", True))
    grants = _source_ids(data.get("source_ids", []))
    user = auth.create_user(data.get("username") or "", data.get("password") or "", is_admin=is_admin)
    user.active = active
    _grant(user, grants)
    db.session.commit()
    return user


def update(user_id: int, data: Mapping) -> User:
    """Partial update of an account (absent fields stay)."""
    user = get(user_id)
    if "username" in data and data["username"] != user.username:
        auth.validate_credentials(data["username"], "x" * auth.MIN_PASSWORD)
        auth.name_taken(data["username"], but=user)  # a change of case only is allowed
        user.username = data["username"]
    is_admin = _role(data["role"]) if "role" in data else user.is_admin
    active = _active(data["active"]) if "active" in data else user.active
    if user.is_admin and user.active and not (is_admin and active):
        _keep_an_admin(user, "disabled" if not active else "demoted")
    grants = _source_ids(data["source_ids"]) if "source_ids" in data else None
    if "password" in data:
        auth.set_password(user, data["password"] if isinstance(data["password"], str) else "")
    if user.active and not active:
        user.generation += 1  # ends its sessions, access tokens and download links
        db.session.query(ApiToken).filter_by(user_id=user.id).delete()
    user.is_admin, user.active = is_admin, active
    if grants is not None:
        _grant(user, grants)
    db.session.commit()
    return user


def delete(user_id: int) -> None:
    """Delete an account with its grants and tokens (never the last active admin)."""
    user = get(user_id)
    if user.is_admin and user.active:
        _keep_an_admin(user, "deleted")
    db.session.query(UserSource).filter_by(user_id=user.id).delete()
    db.session.query(ApiToken).filter_by(user_id=user.id).delete()
    db.session.delete(user)
    db.session.commit()


def _keep_an_admin(user: User, action: str) -> None:
    others = (
        db.session.query(User.id)
        .filter(User.is_admin.is_(True), User.active.is_(True), User.id != user.id)
        .first()
    )
    if others is None:
        raise Conflict(f"The last active admin cannot be {action}")


def _grant(user: User, source_ids: list[str]) -> None:
    """Replace the account's grants (flushed so its id exists)."""
    db.session.flush()
    db.session.query(UserSource).filter_by(user_id=user.id).delete()
    db.session.add_all(UserSource(user_id=user.id, source_id=sid) for sid in source_ids)
