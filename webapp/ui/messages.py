"""Messages of the services that the pages show (form errors, error pages), listed here so the
catalogue holds them: `filters.readable` looks each one up in the page's language.

The services and the API keep them in English (an API's `detail` is for scripts and logs); a
message that carries a value (a term, a name, a number) is matched by a pattern of
VALUE_MESSAGES and said again in the page's language; one not listed is shown as it is.
A rule after a field name ('current_password: is wrong') is looked up without the field.
"""

from __future__ import annotations

import re


def N_(message: str) -> str:  # noqa: N802  (the marker pybabel extracts by default)
    """Mark a message for the catalogue without translating it here."""
    return message


SERVICE_MESSAGES = (
    N_("Invalid username or password"),
    N_("This account is disabled"),
    N_("Setup already completed"),
    N_("is wrong"),
    N_("must be at least 8 characters"),
    N_("must contain something besides spaces and control characters"),
    N_("must be 3-50 characters of letters, digits, '.', '_' or '-'"),
    N_("must not contain control characters"),
    N_("must be 1 to 100 characters"),
    N_("must be 1 to 200 characters"),
    N_("must be null or between 1 and 3650"),
    N_("must be a list of source ids"),
    N_("Only an admin may do this"),
    N_("The form's security token is missing or has expired. Reload the page and try again."),
    N_("File no longer exists"),
    N_("The source of this document no longer exists"),
    N_("This document has no thumbnail"),
    N_("Download link has expired"),
    N_("Invalid download token"),
    N_("Download link ended with the session that made it"),
    N_("The source folder now resolves outside the allowed roots"),
    N_("The file now resolves outside its source folder"),
    # the plain details of webapp/errors.py, shown on the error page
    N_("Bad request"),
    N_("Authentication required"),
    N_("Forbidden"),
    N_("Not found"),
    N_("Method not allowed"),
    N_("Conflict"),
    N_("Request body is too large (limit 1 MiB)"),
    N_("Unsupported media type"),
    N_("Requested range not satisfiable"),
    N_("Internal server error"),
    N_("Service unavailable"),
    # why a folder cannot be scanned or watched (indexing/scanner.py, services/scans.py)
    N_("the watcher is not running"),
    N_("Directory vanished during the scan"),
    N_("Permission denied: directory is not readable"),
    N_("Permission denied"),
)

# Messages that carry a value: (the English message as a pattern, its catalogue template with
# the pattern's named groups as placeholders). `filters.localized` fills the template in the
# page's language; the English template gives back the service's own words.
_TERM = r"(?P<term>\S.*?)"
VALUE_MESSAGES = tuple(
    (re.compile(pattern, re.S), template)
    for pattern, template in (
        (
            _TERM + r" is not a date \(use 2024, 2024-03 or 2024-03-15\)",
            N_("%(term)s is not a date (use 2024, 2024-03 or 2024-03-15)"),
        ),
        (
            _TERM + r" is not a size \(use 500, 10k, 2MB or 1GB\)",
            N_("%(term)s is not a size (use 500, 10k, 2MB or 1GB)"),
        ),
        (_TERM + r" needs a value, e\.g\. (?P<example>.+)", N_("%(term)s needs a value, e.g. %(example)s")),
        (
            _TERM + r" has no word to look for, e\.g\. (?P<example>.+)",
            N_("%(term)s has no word to look for, e.g. %(example)s"),
        ),
        (
            _TERM + r": a filter cannot be excluded; write the values you want, e\.g\. (?P<example>.+)",
            N_("%(term)s: a filter cannot be excluded; write the values you want, e.g. %(example)s"),
        ),
        (_TERM + r" ends before it starts", N_("%(term)s ends before it starts")),
        (r"is not a date \(use (?P<example>.+)\)", N_("is not a date (use %(example)s)")),
        (r"unknown type (?P<value>.+)", N_("unknown type %(value)s")),
        (r"unknown source (?P<value>.+)", N_("unknown source %(value)s")),
        (r"must be between (?P<low>-?\d+) and (?P<high>-?\d+)", N_("must be between %(low)s and %(high)s")),
        (r"must be a whole number", N_("must be a whole number")),
        (r"must be 1 to (?P<num>\d+) characters", N_("must be 1 to %(num)s characters")),
        (r"must be at least (?P<num>\d+) characters", N_("must be at least %(num)s characters")),
        (r"must be one of (?P<values>.+)", N_("must be one of %(values)s")),
        (r"Document '(?P<id>.*)' not found", N_("Document '%(id)s' not found")),
        (r"Source '(?P<id>.*)' not found", N_("Source '%(id)s' not found")),
        (r"User (?P<id>\S+) not found", N_("User %(id)s not found")),
        (r"Token (?P<id>\S+) not found", N_("Token %(id)s not found")),
        (r"Saved search (?P<id>\S+) not found", N_("Saved search %(id)s not found")),
        (r"Source '(?P<id>.*)' already exists", N_("Source '%(id)s' already exists")),
        (r"User '(?P<name>.*)' already exists", N_("User '%(name)s' already exists")),
        (
            r"you already have a saved search named '(?P<name>.*)'",
            N_("you already have a saved search named '%(name)s'"),
        ),
        (
            r"Source '(?P<id>.*)' is busy; try again when the scan has finished",
            N_("Source '%(id)s' is busy; try again when the scan has finished"),
        ),
        (r"Source '(?P<id>.*)' is already queued", N_("Source '%(id)s' is already queued")),
        (r"Source '(?P<id>.*)' is already indexing", N_("Source '%(id)s' is already indexing")),
        (r"File no longer exists: (?P<why>.+)", N_("File no longer exists: %(why)s")),
        (r"Root path does not exist: (?P<path>.+)", N_("Root path does not exist: %(path)s")),
        (r"Root path is not a directory: (?P<path>.+)", N_("Root path is not a directory: %(path)s")),
        (r"Root path is not readable: (?P<path>.+)", N_("Root path is not readable: %(path)s")),
        (r"Root path cannot be read: (?P<path>.+)", N_("Root path cannot be read: %(path)s")),
        (
            r"Root path now resolves outside the allowed roots: (?P<path>.+)",
            N_("Root path now resolves outside the allowed roots: %(path)s"),
        ),
        (r"Directory cannot be read: (?P<why>.+)", N_("Directory cannot be read: %(why)s")),
        (r"File cannot be read: (?P<why>.+)", N_("File cannot be read: %(why)s")),
        (r"The search engine failed: (?P<why>.+)", N_("The search engine failed: %(why)s")),
    )
)
