"""Domain exceptions; errors.py maps each to its HTTP status once."""

from __future__ import annotations


class TrawlError(Exception):
    """Base of every domain error; `status` is the HTTP status it maps to."""

    status = 500

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class InvalidInput(TrawlError):
    """The request is malformed: a missing field, a bad value, a path that cannot be used."""

    status = 400


class Unauthorized(TrawlError):
    """Missing, invalid, expired or revoked credentials."""

    status = 401


class Forbidden(TrawlError):
    """Authenticated, but not allowed to do this."""

    status = 403


class NotFound(TrawlError):
    """The source or document does not exist."""

    status = 404


class Unprocessable(TrawlError):
    """The request is fine but the file it names cannot be handled (an image with no preview)."""

    status = 422


class Conflict(TrawlError):
    """The resource is busy or already exists."""

    status = 409


class Unavailable(TrawlError):
    """A backing service (database, Redis, search engine) cannot be reached."""

    status = 503


class QuerySyntaxError(InvalidInput):
    """A known field of the query language holds a value it cannot read (names the term)."""
