"""Messages of the services that the pages show (form errors, error pages), listed here so the
catalogue holds them: `filters.readable` looks each one up in the page's language.

The services and the API keep them in English (an API's `detail` is for scripts and logs); a
message not listed here, or one that carries a value (a name, a number), is shown as it is.
A rule after a field name ('current_password: is wrong') is looked up without the field.
"""

from __future__ import annotations


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
)
