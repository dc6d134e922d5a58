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
    # why a file could not be read (indexing/extractors, indexing/isolation.py): the failed
    # files' page, a failed document's page, an archive's members
    N_("File is not readable"),
    N_("File vanished or changed while it was read"),
    N_("File needs too much memory to extract"),
    N_("Extractor crashed on this file"),
    N_("Extraction child did not start"),
    N_("Extraction failed"),
    N_("PDF is password protected"),
    N_("Document is password protected"),
    N_("Archive is password protected"),
    N_("Archive is password protected; decrypting a rar member needs unar or unrar"),
    N_("Reading this rar member needs unrar, unar, 7z or bsdtar"),
    N_("Archive has too many entries"),
    N_("Archive looks like a decompression bomb"),
    N_("Archive member is too large"),
    N_("Archive member could not be read (the archive may be damaged)"),
    N_("Archive member uses a compression Trawl cannot read"),
    N_("Image dimensions are too large"),
    N_("Invalid XML"),
    N_("Message is too large"),
    N_("No preview image in this RAW file"),
    N_("Not a valid image file"),
    N_("Not a valid media file"),
    N_("Not a valid comic archive"),
    N_("Not a valid e-mail message"),
    N_("Not a valid Outlook message"),
    N_("Not a valid mailbox (no messages)"),
    N_("Not a valid zip archive"),
    N_("Not a valid rar archive"),
    N_("Not a valid tar archive (it may be truncated)"),
    N_("Not a valid 7z archive (it may be truncated)"),
    N_("This page cannot be read out of the archive"),
    N_("Tesseract is not installed"),
    N_("unreadable EXIF"),
    N_("audio"),  # a media file's kind
    N_("video"),
    # a source's folder, on the form and the path test (services/sources.py)
    N_("is required"),
    N_("must be true or false"),
    N_("must be a string"),
    N_("must be a list of glob patterns"),
    N_("The path must be absolute"),
    N_("the path must be absolute"),
    N_("The path is outside the allowed roots"),
    N_("the path is outside the allowed roots"),
    N_("The path does not exist"),
    N_("the path does not exist"),
    N_("The path is not a directory"),
    N_("the path is not a directory"),
    N_("The directory is not readable"),
    N_("the directory is not readable"),
    N_("The path can be indexed"),
    N_("Check the spelling, or mount the folder into the service"),
    N_("A source root must be a folder"),
    N_("Give the service's user read and execute permission"),
    # a schedule (schedule.py) and a glob pattern (indexing/globs.py)
    N_("must be 5 fields (minute hour day-of-month month day-of-week) or one of @hourly, @daily, @weekly"),
    N_("never runs: no date matches the day and month fields"),
    N_("pattern must not be empty"),
    N_("a character class must not contain '/'"),
)

# the words some messages carry (said again in the page's language: filters.SAID_AGAIN)
FILE_KINDS = (
    N_("comic archive"),
    N_("RAW image"),
    N_("media"),
    N_("image"),
    N_("subtitle"),
    N_("markdown"),
    N_("text"),
    N_("source"),
    N_("configuration"),
    N_("archive"),
    N_("e-mail"),
)
CRON_FIELDS = (N_("minute"), N_("hour"), N_("day-of-month"), N_("month"), N_("day-of-week"))
ADMIN_ACTIONS = (N_("disabled"), N_("demoted"), N_("deleted"))
OVERLAPS = (N_("is the folder of"), N_("is inside the folder of"), N_("holds the folder of"))

# the words some messages carry (said again in the page's language: filters.SAID_AGAIN)
FILE_KINDS = (
    N_("comic archive"),
    N_("RAW image"),
    N_("media"),
    N_("image"),
    N_("subtitle"),
    N_("markdown"),
    N_("text"),
    N_("source"),
    N_("configuration"),
    N_("archive"),
    N_("e-mail"),
)
CRON_FIELDS = (N_("minute"), N_("hour"), N_("day-of-month"), N_("month"), N_("day-of-week"))
ADMIN_ACTIONS = (N_("disabled"), N_("demoted"), N_("deleted"))
OVERLAPS = (N_("is the folder of"), N_("is inside the folder of"), N_("holds the folder of"))

# the kinds of file extractors name in "Not a valid ... file" (extractors/__init__._LABELS)
FILE_KINDS = (
    N_("comic archive"),
    N_("RAW image"),
    N_("media"),
    N_("image"),
    N_("subtitle"),
    N_("markdown"),
    N_("text"),
    N_("source"),
    N_("configuration"),
    N_("archive"),
    N_("e-mail"),
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
        (_TERM + r": unknown type (?P<value>.+)", N_("%(term)s: unknown type %(value)s")),
        (_TERM + r": unknown source (?P<value>.+)", N_("%(term)s: unknown source %(value)s")),
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
        # why a file could not be read; a `why` or `kind` is said in the page's language too
        (r"Extraction timed out after (?P<num>[\d.]+) s", N_("Extraction timed out after %(num)s s")),
        (r"Extraction failed: (?P<name>\w+)", N_("Extraction failed: %(name)s")),
        (r"File is larger than (?P<num>\d+) MB", N_("File is larger than %(num)s MB")),
        (r"Not a valid (?P<kind>.+?) file", N_("Not a valid %(kind)s file")),
        (
            r"Not a valid (?P<kind>.+?) file \(nested too deeply\)",
            N_("Not a valid %(kind)s file (nested too deeply)"),
        ),
        (
            r"Not a valid (?P<kind>.+?) file \(legacy binary Office format\)",
            N_("Not a valid %(kind)s file (legacy binary Office format)"),
        ),
        (
            r"Archive has an unsafe member name: (?P<name>.+)",
            N_("Archive has an unsafe member name: %(name)s"),
        ),
        (r"Archive has a link member: (?P<name>.+)", N_("Archive has a link member: %(name)s")),
        (r"Archive has more than (?P<num>[\d,]+) members", N_("Archive has more than %(num)s members")),
        (
            r"Archive looks like a decompression bomb \(too large when unpacked\)",
            N_("Archive looks like a decompression bomb (too large when unpacked)"),
        ),
        (
            r"Archive looks like a decompression bomb \(compressed too well\)",
            N_("Archive looks like a decompression bomb (compressed too well)"),
        ),
        (
            r"Archive looks like a decompression bomb \((?P<name>.+) is compressed too well\)",
            N_("Archive looks like a decompression bomb (%(name)s is compressed too well)"),
        ),
        (
            r"Archive looks like a decompression bomb \(a member is larger than declared\)",
            N_("Archive looks like a decompression bomb (a member is larger than declared)"),
        ),
        (r"(?P<why>.+) \(in (?P<name>[^()]+)\)", N_("%(why)s (in %(name)s)")),
        (
            r"Cut at (?P<num>[\d,]+) members \((?P<setting>\w+), for this file and everything inside it\): "
            r"indexing stopped in the file itself; what comes after it was not indexed",
            N_(
                "Cut at %(num)s members (%(setting)s, for this file and everything inside it): "
                "indexing stopped in the file itself; what comes after it was not indexed"
            ),
        ),
        (
            r"Cut at (?P<num>[\d,]+) members \((?P<setting>\w+), for this file and everything inside it\): "
            r"indexing stopped in (?P<name>.+); what comes after it was not indexed",
            N_(
                "Cut at %(num)s members (%(setting)s, for this file and everything inside it): "
                "indexing stopped in %(name)s; what comes after it was not indexed"
            ),
        ),
        (
            r"This comic has no page (?P<num>\d+) \(it has (?P<pages>\d+)\)",
            N_("This comic has no page %(num)s (it has %(pages)s)"),
        ),
        (r"This presentation has no picture (?P<num>\d+)", N_("This presentation has no picture %(num)s")),
        (r"Tesseract failed \((?P<code>-?\d+)\)", N_("Tesseract failed (%(code)s)")),
        # a source's folder, its schedule and its patterns
        (r"Use a full path such as (?P<path>.+)", N_("Use a full path such as %(path)s")),
        (
            r"Set ALLOWED_ROOTS to include it, or pick a folder under (?P<roots>.+)",
            N_("Set ALLOWED_ROOTS to include it, or pick a folder under %(roots)s"),
        ),
        (
            r"(?P<path>.+) (?P<relation>is the folder of|is inside the folder of|holds the folder of) "
            r"the source “(?P<name>.*)” \((?P<other>.+)\); one folder is indexed by one source\. "
            r"Edit that source instead, or allow the overlap to index these files twice",
            N_(
                "%(path)s %(relation)s the source “%(name)s” (%(other)s); one folder is indexed by one "
                "source. Edit that source instead, or allow the overlap to index these files twice"
            ),
        ),
        (
            r"unknown preset '(?P<value>.*)': use @hourly, @daily or @weekly",
            N_("unknown preset '%(value)s': use @hourly, @daily or @weekly"),
        ),
        (r"(?P<field>[a-z-]+): step must be at least 1", N_("%(field)s: step must be at least 1")),
        (
            r"(?P<field>[a-z-]+): (?P<value>-?\d+) is out of range (?P<low>\d+)-(?P<high>\d+)",
            N_("%(field)s: %(value)s is out of range %(low)s-%(high)s"),
        ),
        (
            r"(?P<field>[a-z-]+): range (?P<first>\d+)-(?P<last>\d+) runs backwards",
            N_("%(field)s: range %(first)s-%(last)s runs backwards"),
        ),
        (
            r"(?P<field>[a-z-]+): '(?P<value>.*)' is not a valid value",
            N_("%(field)s: '%(value)s' is not a valid value"),
        ),
        (  # a source's pattern and why globs.validate_pattern refuses it
            r"'(?P<pattern>.*?)' (?P<why>(?:pattern|invalid pattern|a character class|unbalanced|segment) "
            r".+)",
            N_("'%(pattern)s' %(why)s"),
        ),
        (r"invalid pattern '(?P<pattern>.*)': (?P<why>.+)", N_("invalid pattern '%(pattern)s': %(why)s")),
        (
            r"pattern '(?P<pattern>.*)' must be relative to the root, not absolute",
            N_("pattern '%(pattern)s' must be relative to the root, not absolute"),
        ),
        (
            r"pattern '(?P<pattern>.*)' must not contain '\.\.' segments",
            N_("pattern '%(pattern)s' must not contain '..' segments"),
        ),
        (
            r"pattern '(?P<pattern>.*)' has an empty or '\.' path segment",
            N_("pattern '%(pattern)s' has an empty or '.' path segment"),
        ),
        (
            r"pattern '(?P<pattern>.*)' expands to too many alternatives",
            N_("pattern '%(pattern)s' expands to too many alternatives"),
        ),
        (
            r"segment '(?P<value>.*)' ends with a lone backslash",
            N_("segment '%(value)s' ends with a lone backslash"),
        ),
        (
            r"unbalanced '(?P<bracket>[\[{}])' in '(?P<pattern>.*)'",
            N_("unbalanced '%(bracket)s' in '%(pattern)s'"),
        ),
        (
            r"The last active admin cannot be (?P<action>\w+)",
            N_("The last active admin cannot be %(action)s"),
        ),
    )
)
