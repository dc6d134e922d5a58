"""Database models: users, their source grants and API tokens, sources and the per-file index
records."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, BigInteger, ForeignKey, Index, String, Text, UniqueConstraint, false, true
from sqlalchemy.orm import Mapped, mapped_column, validates

from webapp.exceptions import NotFound
from webapp.extensions import db
from webapp.validation import username_key


def utcnow() -> datetime:
    """Naive UTC now, second precision (the API's datetime format)."""
    return datetime.now(UTC).replace(tzinfo=None, microsecond=0)


def iso(value: datetime | None) -> str | None:
    """ISO 8601 without zone, as the API writes datetimes."""
    return value.replace(microsecond=0).isoformat() if value else None


ROLES = ("admin", "user")


class User(db.Model):
    """An account that can log in; the first one is created by setup and is an admin."""

    __tablename__ = "users"
    id: Mapped[int] = mapped_column(primary_key=True)
    username: Mapped[str] = mapped_column(String(50), unique=True)
    # NFKC + casefold of the username (validation.username_key, set with it below): what is
    # unique, so `Admin` cannot sit beside `admin`, and what login looks up
    username_key: Mapped[str] = mapped_column(String(200), unique=True)
    password_hash: Mapped[str] = mapped_column(String(255))
    is_admin: Mapped[bool] = mapped_column(default=False)  # the role: admin, or user
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    active: Mapped[bool] = mapped_column(default=True)  # a disabled account cannot log in
    last_login_at: Mapped[datetime | None]
    # Raised when the account is disabled: part of its credential stamp, so every session,
    # token and download link from before ends, and enabling it again does not revive them.
    generation: Mapped[int] = mapped_column(default=0)
    # the UI's language chosen on the account page ('en', 'de'); None: the browser's
    locale: Mapped[str | None] = mapped_column(String(8))

    @validates("username")
    def _set_key(self, _field: str, username: str) -> str:
        self.username_key = username_key(username)
        return username

    @property
    def role(self) -> str:
        """`admin` or `user`."""
        return "admin" if self.is_admin else "user"


class UserSource(db.Model):
    """A source granted to a user (admins see every source without grants)."""

    __tablename__ = "user_sources"
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    source_id: Mapped[str] = mapped_column(
        String(63), ForeignKey("sources.id", ondelete="CASCADE"), primary_key=True
    )


class ApiToken(db.Model):
    """A key for scripts: only a keyed hash of it is kept (services/tokens.py)."""

    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    scope: Mapped[str] = mapped_column(String(8))  # read | full
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # HMAC-SHA256, hex
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]  # flushed from Redis in batches


class Source(db.Model):
    """A directory root with its patterns and schedule."""

    __tablename__ = "sources"
    id: Mapped[str] = mapped_column(String(63), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    root_path: Mapped[str] = mapped_column(Text)
    include_patterns: Mapped[list] = mapped_column(JSON)
    exclude_patterns: Mapped[list] = mapped_column(JSON)
    scan_schedule: Mapped[str | None] = mapped_column(String(100))
    watch: Mapped[bool] = mapped_column(default=True, server_default=true())  # live updates
    semantic: Mapped[bool] = mapped_column(default=True, server_default=true())  # meaning (embeddings)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_scan_at: Mapped[datetime | None]
    next_scan_at: Mapped[datetime | None]
    last_run: Mapped[dict | None] = mapped_column(JSON)  # RunStats of the latest run that ended


class IndexedFile(db.Model):
    """What the last scan recorded about one file of a source."""

    __tablename__ = "indexed_files"
    __table_args__ = (
        UniqueConstraint("source_id", "path", name="uq_indexed_files_source_path"),
        Index("ix_indexed_files_source_status", "source_id", "status"),
        Index("ix_indexed_files_source_indexed", "source_id", "indexed_at"),  # last indexed
        Index("ix_indexed_files_source_ocr", "source_id", "ocr"),
        Index("ix_indexed_files_source_container", "source_id", "container"),
        Index("ix_indexed_files_source_embedded", "source_id", "embedded"),
        # the copies of a text: in any source (the `copies` of a result), in one (the primary)
        Index("ix_indexed_files_text_hash", "text_hash", "source_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    source_id: Mapped[str] = mapped_column(String(63), ForeignKey("sources.id", ondelete="CASCADE"))
    path: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    mtime_ns: Mapped[int] = mapped_column(BigInteger)  # exact, for change detection
    modified_at: Mapped[datetime]
    indexed_at: Mapped[datetime] = mapped_column(default=utcnow)
    hash: Mapped[str] = mapped_column(String(64))  # SHA-256 of the path
    doc_type: Mapped[str] = mapped_column(String(32), default="file")
    status: Mapped[str] = mapped_column(String(16))  # success | failed | skipped
    error_message: Mapped[str | None] = mapped_column(Text)
    ocr: Mapped[str | None] = mapped_column(String(16))  # pending | done | failed; None: not needed
    # a member of an archive or e-mail (path `a.zip!/b.txt`): the path of the file on disk
    # that holds it, at any depth; None for files the walk finds
    container: Mapped[str | None] = mapped_column(Text)
    # its passages are in the vector store (indexing/embed_phase.py); every write of the record
    # (a new or changed file) makes it false again
    embedded: Mapped[bool] = mapped_column(default=False, server_default=false())
    # SHA-256 of the normalised extracted text, title and content (indexing/copies.py): files
    # of the same hash are copies, listed and embedded once; None: no text, failed, or the text
    # still waits for OCR (never a copy of anything)
    text_hash: Mapped[str | None] = mapped_column(String(64))


class RunRecord(db.Model):
    """One ended scan of a source (the Jobs history); the newest RUNS_KEPT per source are kept."""

    __tablename__ = "run_records"
    __table_args__ = (Index("ix_run_records_source_finished", "source_id", "finished_at"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    source_id: Mapped[str] = mapped_column(String(63), ForeignKey("sources.id", ondelete="CASCADE"))
    state: Mapped[str] = mapped_column(String(16))  # a final RunState
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime] = mapped_column(default=utcnow)
    stats: Mapped[dict] = mapped_column(JSON)  # the run's RunStats, without its error list


class SavedSearch(db.Model):
    """A search a user saved under a name (query, filters, sort)."""

    __tablename__ = "saved_searches"
    __table_args__ = (UniqueConstraint("user_id", "name", name="uq_saved_searches_user_name"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(100))
    q: Mapped[str] = mapped_column(Text)
    source_id: Mapped[str | None] = mapped_column(String(63))
    type: Mapped[str | None] = mapped_column(String(32))
    sort: Mapped[str] = mapped_column(String(32), default="relevance")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


MAX_ROW_ID = 2**31 - 1  # integer primary keys (INTEGER on PostgreSQL)


def by_id(model: type[db.Model], ident: int) -> db.Model | None:
    """The row with this integer id, or None; an id outside the column's range is none too
    (PostgreSQL would refuse it with an error: a path's `/users/99999999999` is a 404)."""
    if not 0 < ident <= MAX_ROW_ID:
        return None
    return db.session.get(model, ident)


def get_source(source_id: str) -> Source:
    """The source, or NotFound (a 404 for the API and the UI)."""
    source = db.session.get(Source, source_id)
    if source is None:
        raise NotFound(f"Source '{source_id}' not found")
    return source
