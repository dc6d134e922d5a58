"""API tokens for scripts: created, listed and revoked per user, stored as a keyed hash.

A token is `trawl_` and 43 random URL-safe characters (256 bits), shown once. The database
keeps HMAC-SHA256(SECRET_KEY, token): a fast hash is enough for a random secret of that size,
and the key means a stolen database alone cannot check guesses. Changing SECRET_KEY ends every
token. The time of last use goes to a Redis hash on each request and reaches the database in
one write at most every TOKEN_FLUSH_SECONDS (and whenever tokens are listed), never per request.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import unicodedata
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import current_app
from sqlalchemy import or_, update

from webapp import keys
from webapp.exceptions import InvalidInput, NotFound, Unauthorized
from webapp.extensions import db
from webapp.models import ApiToken, User, by_id, iso, utcnow
from webapp.runtime import get_redis

PREFIX = "trawl_"
SCOPES = ("read", "full")
NAME_MAX = 100
LINK_PREFIX = "token:"  # what a download link made with an API token is bound to (no ':' in
# the ids of sessions and access tokens)
MAX_DAYS = 3650


def _digest(token: str) -> str:
    key = str(current_app.config["SECRET_KEY"]).encode()
    return hmac.new(key, token.encode(), hashlib.sha256).hexdigest()


def _valid(name: Any, scope: Any, days: Any) -> tuple[str, str, int | None]:
    """The one check of a new token's fields (API, web page and CLI)."""
    if not isinstance(name, str) or not name.strip() or len(name.strip()) > NAME_MAX:
        raise InvalidInput(f"name: must be 1 to {NAME_MAX} characters")
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        raise InvalidInput("name: must not contain control characters")
    if scope not in SCOPES:
        raise InvalidInput("scope: must be one of " + ", ".join(SCOPES))
    if days is not None and (
        isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_DAYS
    ):
        raise InvalidInput(f"expires_in_days: must be null or between 1 and {MAX_DAYS}")
    return name.strip(), scope, days


def create(user: User, name: Any, scope: Any, expires_in_days: Any = None) -> dict:
    """A new token of `user`; the answer is the only place its secret ever appears."""
    name, scope, days = _valid(name, scope, expires_in_days)
    secret = PREFIX + secrets.token_urlsafe(32)
    now = utcnow()
    row = ApiToken(
        user_id=user.id,
        name=name,
        scope=scope,
        token_hash=_digest(secret),
        created_at=now,
        expires_at=now + timedelta(days=days) if days else None,
    )
    db.session.add(row)
    db.session.commit()
    return {**to_json(row), "token": secret}


def to_json(row: ApiToken) -> dict:
    """A token as the API lists it (never its secret)."""
    return {
        "id": row.id,
        "name": row.name,
        "scope": row.scope,
        "user_id": row.user_id,
        "created_at": iso(row.created_at),
        "expires_at": iso(row.expires_at),
        "last_used_at": iso(row.last_used_at),
    }


def list_for(user: User) -> list[dict]:
    """The user's tokens, newest first (an admin's list holds everyone's)."""
    flush_use()
    query = db.session.query(ApiToken).order_by(ApiToken.created_at.desc(), ApiToken.id.desc())
    if not user.is_admin:
        query = query.filter_by(user_id=user.id)
    return [to_json(row) for row in query]


def delete(user: User, token_id: int) -> None:
    """Revoke a token at once: the user's own (admins: anyone's); 404 for others'."""
    row = by_id(ApiToken, token_id)
    if row is None or (row.user_id != user.id and not user.is_admin):
        raise NotFound(f"Token {token_id} not found")
    db.session.delete(row)
    db.session.commit()


def authenticate(secret: str) -> tuple[ApiToken, User]:
    """The token and its account, or 401: unknown (or deleted), expired, or account disabled."""
    row = db.session.query(ApiToken).filter_by(token_hash=_digest(secret)).first()
    if row is None:
        raise Unauthorized("Invalid API token")
    if row.expires_at is not None and row.expires_at <= utcnow():
        raise Unauthorized("API token has expired")
    user = db.session.get(User, row.user_id)
    if user is None or not user.active:
        raise Unauthorized("The account of this API token is disabled")
    note_use(row.id)
    return row, user


def session_id(token: ApiToken) -> str:
    """What a download link made with this token is bound to."""
    return f"{LINK_PREFIX}{token.id}"


def still_valid(session_id: str) -> bool:
    """For what a download link is bound to: False when it names an API token (`token:<id>`,
    see session_id) that was deleted or has expired; True for anything else (sessions are
    checked apart)."""
    if not session_id.startswith(LINK_PREFIX):
        return True
    number = session_id[len(LINK_PREFIX) :]
    row = by_id(ApiToken, int(number)) if number.isdigit() else None
    return row is not None and (row.expires_at is None or row.expires_at > utcnow())


def note_use(token_id: int) -> None:
    """Remember the time of this use in Redis; save the batch when the last save is old."""
    conn = get_redis()
    pipe = conn.pipeline()
    pipe.hset(keys.TOKENS_USED, str(token_id), int(datetime.now(UTC).timestamp()))
    pipe.set(keys.TOKENS_FLUSH, "1", nx=True, ex=keys.TOKEN_FLUSH_SECONDS)
    if pipe.execute()[1]:
        flush_use()


def flush_use() -> int:
    """Write the pending last-used times to the database (one statement per token); the
    number saved."""
    pipe = get_redis().pipeline()  # read and clear in one transaction: no use is lost
    pipe.hgetall(keys.TOKENS_USED)
    pipe.delete(keys.TOKENS_USED)
    pending, _ = pipe.execute()
    for raw_id, raw_time in pending.items():
        when = datetime.fromtimestamp(int(raw_time), UTC).replace(tzinfo=None)
        db.session.execute(
            update(ApiToken)
            .where(ApiToken.id == int(raw_id))
            .where(or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < when))
            .values(last_used_at=when)
        )
    if pending:
        db.session.commit()
    return len(pending)
