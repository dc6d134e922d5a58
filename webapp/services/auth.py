"""Accounts, passwords, access tokens and their revocation, and who a request comes from (one
verifier for both kinds of bearer token, and for the web session)."""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from dataclasses import dataclass
from functools import lru_cache

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from flask import current_app, g, request, session
from flask_jwt_extended import create_access_token, current_user, decode_token, get_jwt, verify_jwt_in_request

from webapp import keys
from webapp.exceptions import Conflict, InvalidInput, Unauthorized
from webapp.extensions import db, jwt
from webapp.models import ApiToken, User, iso, utcnow
from webapp.runtime import get_redis
from webapp.services import tokens
from webapp.services.access import granted
from webapp.validation import has_visible, username_key

USERNAME_RE = re.compile(r"^[A-Za-z0-9._-]{3,50}$")
MIN_PASSWORD = 8


def _hasher() -> PasswordHasher:
    """The argon2id hasher at the app's cost (PASSWORD_HASH_*: the test suite's is cheap)."""
    c = current_app.config
    return _hasher_for(
        c["PASSWORD_HASH_TIME_COST"], c["PASSWORD_HASH_MEMORY_KIB"], c["PASSWORD_HASH_PARALLELISM"]
    )


@lru_cache(maxsize=4)
def _hasher_for(time_cost: int, memory_kib: int, parallelism: int) -> PasswordHasher:
    return PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=parallelism)


def validate_credentials(username: str, password: str) -> None:
    """Setup and create-admin rules: username 3-50 of letters, digits, ._- ; a password."""
    if not isinstance(username, str) or not USERNAME_RE.fullmatch(username):
        raise InvalidInput("username: must be 3-50 characters of letters, digits, '.', '_' or '-'")
    check_password(password)


def check_password(password: str, field: str = "password") -> None:
    """A password: 8+ characters, and not only whitespace and control or format characters."""
    if not isinstance(password, str) or len(password) < MIN_PASSWORD:
        raise InvalidInput(f"{field}: must be at least {MIN_PASSWORD} characters")
    if not has_visible(password):
        raise InvalidInput(f"{field}: must contain something besides spaces and control characters")


def name_taken(username: str, but: User | None = None) -> None:
    """409 when another account has this name, ignoring case and Unicode normalisation."""
    query = db.session.query(User.id).filter_by(username_key=username_key(username))
    if but is not None:
        query = query.filter(User.id != but.id)
    if query.first():
        raise Conflict(f"User '{username}' already exists")


def setup_required() -> bool:
    """True until the first account exists."""
    return db.session.query(User.id).first() is None


def create_user(username: str, password: str, is_admin: bool = True) -> User:
    """Create an account (409 when the name is taken)."""
    validate_credentials(username, password)
    name_taken(username)
    user = User(username=username, password_hash=_hasher().hash(password), is_admin=is_admin)
    db.session.add(user)
    db.session.commit()
    return user


def setup(username: str, password: str) -> User:
    """First-run creation of the admin account; refused once any account exists."""
    if not setup_required():
        raise Conflict("Setup already completed")
    return create_user(username, password, is_admin=True)


def authenticate(username: str, password: str) -> User:
    """The user for these credentials; the same 401 for an unknown name and a wrong password."""
    key = username_key(username) if isinstance(username, str) else ""
    user = db.session.query(User).filter_by(username_key=key).first() if key else None
    try:
        hasher = _hasher()
        hasher.verify(user.password_hash if user else _dummy_hash(hasher), password or "")
    except (VerificationError, InvalidHashError):
        user = None
    if user is None:
        raise Unauthorized("Invalid username or password")
    if not user.active:
        raise Unauthorized("This account is disabled")
    user.last_login_at = utcnow()
    db.session.commit()
    return user


@lru_cache(maxsize=4)
def _dummy_hash(hasher: PasswordHasher) -> str:
    """A hash verified for unknown users so both failures take as long (made on first need:
    argon2 takes 64 MB while hashing, which workers that never log anyone in should not pay)."""
    return hasher.hash(secrets.token_urlsafe(16))


def credential_stamp(user: User) -> str:
    """A short fingerprint of the account's password hash and generation: a new password or
    disabling the account changes it, so every token, session and download link that carries
    the old stamp stops working (accounts never disabled keep the stamps of before)."""
    material = user.password_hash + (f":{user.generation}" if user.generation else "")
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def set_password(user: User, password: str) -> None:
    """Set a new password (not committed); sessions, access tokens, download links and API
    tokens of the old one end with it."""
    check_password(password)
    user.password_hash = _hasher().hash(password)
    db.session.query(ApiToken).filter_by(user_id=user.id).delete()


def change_password(user: User, password: str) -> None:
    """Set a new password; the user's tokens, UI sessions and download links end with the old one."""
    set_password(user, password)
    db.session.commit()


def change_own_password(user: User, current: str, new: str) -> dict:
    """PUT /api/auth/password: check the current password, set the new one, and return a new
    access token (every other session and token of the account has ended)."""
    try:
        _hasher().verify(user.password_hash, current or "")
    except (VerificationError, InvalidHashError):
        raise InvalidInput("current_password: is wrong") from None
    check_password(new, "new_password")
    change_password(user, new)
    return issue_token(user)


def set_locale(user: User, code: str | None) -> None:
    """Save the UI's language of the account (the UI checks the code; None: the browser's)."""
    user.locale = code or None
    db.session.commit()


def issue_token(user: User) -> dict:
    """The token response of login and setup."""
    token = create_access_token(identity=str(user.id), additional_claims={"stp": credential_stamp(user)})
    claims = decode_token(token)
    return {"access_token": token, "token_type": "bearer", "expires_in": int(claims["exp"] - claims["iat"])}


def revoke(claims: dict) -> None:
    """Deny this token's jti until it would have expired anyway."""
    revoke_session(claims["jti"], int(claims["exp"]))


def revoke_session(session_id: str, expires_at: int) -> None:
    """End a session (an access token's jti or a UI session's id) and what it signed, until
    `expires_at` (a Unix time) when it would have ended anyway."""
    ttl = max(1, int(expires_at - time.time()))
    get_redis().set(keys.revoked_token(session_id), "1", ex=ttl)


def session_revoked(session_id: str) -> bool:
    """Whether this session id was ended by a logout."""
    return bool(get_redis().exists(keys.revoked_token(session_id)))


def user_json(user: User) -> dict:
    """The current-user response."""
    return {
        "id": user.id,
        "username": user.username,
        "role": user.role,
        "is_admin": user.is_admin,
        "active": user.active,
        "source_ids": sorted(granted(user.id)),
        "created_at": iso(user.created_at),
        "last_login_at": iso(user.last_login_at),
    }


@jwt.token_in_blocklist_loader
def _is_revoked(header: dict, payload: dict) -> bool:
    return session_revoked(str(payload.get("jti", "")))


@jwt.user_lookup_loader
def _load_user(header: dict, payload: dict) -> User | None:
    """The token's user; once per request (the verification below loads it first, and the
    session's identity map keeps an object only while something else holds it)."""
    known = g.get("token_user")
    if known is not None and str(known.id) == str(payload.get("sub")):
        return known
    try:
        g.token_user = db.session.get(User, int(payload["sub"]))
    except (TypeError, ValueError):
        return None
    return g.token_user


@jwt.token_verification_loader
def _verify_access_token(header: dict, payload: dict) -> bool:
    """Only access tokens that expire and carry their user's current credential stamp
    authenticate API calls (never a download token, never one from before a password change)."""
    if payload.get("type") != "access" or not isinstance(payload.get("exp"), int | float):
        return False
    user = _load_user(header, payload)
    if user is None:
        return True  # "user gone": the user lookup answers 401
    return user.active and payload.get("stp") == credential_stamp(user)


def session_user() -> User | None:
    """The user logged in to this browser session (the UI's signed cookie), or None when there
    is no session, it expired or was revoked, or the user is gone or changed password."""
    uid, issued, sid = session.get("uid"), session.get("iat"), session.get("sid")
    if uid is None or not isinstance(issued, int) or not isinstance(sid, str):
        return None
    lifetime = current_app.permanent_session_lifetime.total_seconds()
    user = None
    if time.time() - issued < lifetime and not session_revoked(sid):
        user = db.session.get(User, uid)
    if user is not None and (not user.active or session.get("stp") != credential_stamp(user)):
        user = None
    if user is None:
        for key in ("uid", "iat", "sid", "stp"):
            session.pop(key, None)
    return user


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: the account, what it may do (`full`, or `read` for a read
    API token) and what ends it (an access token's jti, an API token's link id, a web
    session's id). Made by `bearer_caller` or `session_caller` alone."""

    user: User
    scope: str
    session_id: str
    api_token_id: int | None = None  # the API token sent, None for an access token or session

    def end(self) -> None:
        """Log this credential out: an API token is deleted, an access token revoked."""
        if self.api_token_id is not None:
            tokens.delete(self.user, self.api_token_id)
        else:
            revoke(get_jwt())


def bearer_caller() -> Caller:
    """The caller of this request by its `Authorization: Bearer` credential, or 401: an API
    token (`trawl_...`, services/tokens.py) or an access token (a JWT, checked by
    flask-jwt-extended with the loaders above: type, expiry, revocation, credential stamp)."""
    scheme, _, credential = request.headers.get("Authorization", "").partition(" ")
    credential = credential.strip()
    if scheme.lower() == "bearer" and credential.startswith(tokens.PREFIX):
        row, user = tokens.authenticate(credential)
        return Caller(user, row.scope, tokens.session_id(row), row.id)
    verify_jwt_in_request()
    return Caller(current_user, "full", get_jwt()["jti"])


def session_caller() -> Caller | None:
    """The caller of this request by the web session's cookie, or None without a session."""
    user = session_user()
    return None if user is None else Caller(user, "full", str(session.get("sid", "")))
