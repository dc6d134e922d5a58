"""E-mail: .eml and .msg messages (attachments are members) and .mbox files (each message a
member, split in one streaming pass: a mailbox is never held in memory)."""

from __future__ import annotations

import os
import posixpath
import re
from datetime import UTC, datetime
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from email.utils import parsedate_to_datetime
from typing import IO, Any

from . import base
from ._util import clean_str
from .base import Budget, Extracted, ExtractionError, ExtractionSettings, ExtractorSpec, Member, Sink
from .epub import html_text

HEADERS = {"from": "from", "to": "to", "cc": "cc", "date": "date", "message-id": "message_id"}
_UNSAFE = re.compile(r"[\x00-\x1f/\\:]+")


def _address_text(value: Any) -> str:
    return clean_str(str(value)).strip() if value is not None else ""


def _parsed_date(value: Any) -> datetime | None:
    """A Date header as an aware datetime (one without a zone is read as UTC), or None."""
    try:
        parsed = parsedate_to_datetime(str(value))
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if parsed is None:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _date(value: str) -> str | None:
    parsed = _parsed_date(value)
    return parsed.isoformat() if parsed else None


# the sent date is the time of a message's attachments and of a mailbox's messages (their
# member time); outside these years it is a broken or forged header and the container's time
# is used (a member's time is kept in nanoseconds as a 64-bit integer, which ends in 2262)
SENT_YEARS = (1826, 2201)


def _epoch(value: datetime | None) -> int | None:
    """A sent date as Unix seconds; None without one or outside SENT_YEARS."""
    if value is None or not SENT_YEARS[0] <= value.year < SENT_YEARS[1]:
        return None
    try:
        return int(value.timestamp())
    except (OverflowError, OSError, ValueError):
        return None


def sent_at(meta: dict[str, Any]) -> int | None:
    """The sent date of a message's metadata (its `date`, ISO), Unix seconds; None without one."""
    try:
        return _epoch(datetime.fromisoformat(meta["date"]))
    except (KeyError, TypeError, ValueError):
        return None


def _metadata(message: EmailMessage) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for header, key in HEADERS.items():
        try:
            value = message.get(header)
        except (ValueError, IndexError, TypeError):  # a header the parser cannot fold
            value = message.get_all(header, failobj=[None])[0]
        text = _address_text(value)
        if text:
            meta[key] = (_date(text) or text) if key == "date" else text
    return meta


def _body(message: EmailMessage) -> str:
    """The plain-text body, or the HTML body as text."""
    try:
        part = message.get_body(preferencelist=("plain", "html"))
    except (KeyError, LookupError):
        part = None
    if part is None:
        return ""
    text = _part_text(part)
    if part.get_content_subtype() == "html":
        return html_text(text.encode("utf-8"))
    return text


def _part_text(part: Any) -> str:
    try:
        return part.get_content()
    except (LookupError, ValueError, AssertionError):  # unknown charset, broken encoding
        payload = part.get_payload(decode=True) or b""
        return payload.decode("utf-8", errors="replace")


def safe_attachment_name(name: str | None, n: int, taken: set[str]) -> str:
    """A member name for an attachment: its base name, unique within the message."""
    base = _UNSAFE.sub("_", posixpath.basename((name or "").replace("\\", "/"))).strip(". ")
    base = base or f"attachment-{n}"
    stem, dot, ext = base.rpartition(".")
    candidate, k = base, 2
    while candidate in taken:
        candidate = f"{stem}-{k}.{ext}" if dot else f"{base}-{k}"
        k += 1
    taken.add(candidate)
    return candidate


def _attachments(message: EmailMessage) -> list[tuple[str | None, bytes]]:
    out = []
    for part in message.iter_attachments():
        if part.get_content_type() == "message/rfc822":
            inner = part.get_payload()
            data = inner[0].as_bytes() if isinstance(inner, list) and inner else b""
            out.append(((part.get_filename() or "message") + ".eml", data))
            continue
        out.append((part.get_filename(), part.get_payload(decode=True) or b""))
    return out


def _emit_all(
    files: list[tuple[str | None, bytes]], sink: Sink, budget: Budget, sent: int | None = None
) -> list[Member]:
    """The attachments as members, dated with the message's sent date."""
    members, taken = [], set()
    for n, (name, data) in enumerate(files, 1):
        if not budget.take():
            break  # the tree's member budget is spent: the rest is cut
        member = Member(safe_attachment_name(name, n, taken), len(data), sent)
        out = sink(member)
        if out is not None:
            with out:
                out.write(data)
        members.append(member)
    return members


def _email_doc(
    subject: str | None, body: str, meta: dict[str, Any], members: list[Member], budget: Budget
) -> Extracted:
    if members:
        meta["attachments"] = [m.name for m in members]
    if budget.cut:
        meta["cut"] = True
    header_lines = [
        f"{k.replace('_', ' ').title()}: {v}" for k, v in meta.items() if k in ("from", "to", "cc")
    ]
    content = "\n".join([*header_lines, "", body]) if header_lines else body
    return Extracted(type="email", content=content, title=clean_str(subject or "") or None, metadata=meta)


def unpack_eml(
    path: str, settings: ExtractionSettings, sink: Sink, budget: Budget
) -> tuple[Extracted, list[Member]]:
    """An RFC 822 message: headers as metadata, body as content, attachments as members."""
    if os.path.getsize(path) > budget.bytes:
        raise ExtractionError("Message is too large")
    with open(path, "rb") as f:
        message = BytesParser(policy=policy.default).parse(f)
    if not message.keys():
        raise ExtractionError("Not a valid e-mail message")
    meta = _metadata(message)
    members = _emit_all(_attachments(message), sink, budget, sent_at(meta))
    subject = _address_text(message.get("subject")) or None
    return _email_doc(subject, _body(message), meta, members, budget), members


def unpack_msg(
    path: str, settings: ExtractionSettings, sink: Sink, budget: Budget
) -> tuple[Extracted, list[Member]]:
    """An Outlook .msg message, read with extract-msg."""
    import extract_msg

    try:
        message = extract_msg.openMsg(path, delayAttachments=False)
    except Exception as exc:  # noqa: BLE001 - the library raises many kinds on bad files
        raise ExtractionError("Not a valid Outlook message") from exc
    try:
        meta: dict[str, Any] = {}
        for key, attr in (("from", "sender"), ("to", "to"), ("cc", "cc"), ("message_id", "messageId")):
            text = _address_text(getattr(message, attr, None))
            if text:
                meta[key] = text
        if getattr(message, "date", None):
            date = message.date
            meta["date"] = (date if date.tzinfo else date.replace(tzinfo=UTC)).isoformat()
        body = message.body or ""
        if not body.strip() and message.htmlBody:
            body = html_text(message.htmlBody)
        files = [
            (
                getattr(a, "longFilename", None) or getattr(a, "shortFilename", None),
                a.data if isinstance(a.data, bytes) else b"",
            )
            for a in message.attachments
        ]
        members = _emit_all(files, sink, budget, sent_at(meta))
        return _email_doc(message.subject, body, meta, members, budget), members
    finally:
        message.close()


def _mbox_messages(f: IO[bytes]):
    """Yield each message's lines of an mbox file, one message at a time."""
    lines: list[bytes] = []
    previous_blank = True
    for line in f:
        if line.startswith(b"From ") and previous_blank:
            if lines:
                yield lines
            lines = []
        elif lines or line.strip():
            lines.append(line[1:] if line.startswith(b">From ") else line)
        previous_blank = not line.strip()
    if lines:
        yield lines


def unpack_mbox(
    path: str, settings: ExtractionSettings, sink: Sink, budget: Budget
) -> tuple[Extracted, list[Member]]:
    """Each message of the mailbox is a member `message-N.eml`; the content lists subjects.
    Messages past the tree's member budget (MAILBOX_MAX_MEMBERS for a mailbox file) are cut."""
    members, listing = [], []
    parse_headers = BytesParser(policy=policy.default).parsebytes
    with open(path, "rb") as f:
        for n, lines in enumerate(_mbox_messages(f), 1):
            if not budget.take():
                break
            data = b"".join(lines)
            head = data.split(b"\n\n", 1)[0]
            try:
                headers = parse_headers(head, headersonly=True)
                subject = _address_text(headers.get("subject"))
                sent = _parsed_date(headers.get("date")) if headers.get("date") else None
            except Exception:  # noqa: BLE001 - a broken header fails nothing but its subject
                subject, sent = "", None
            member = Member(f"message-{n}.eml", len(data), _epoch(sent))
            listing.append(f"{member.name} {subject}".rstrip())
            out = sink(member)
            if out is not None:
                with out:
                    out.write(data)
            members.append(member)
    if not members:
        raise ExtractionError("Not a valid mailbox (no messages)")
    meta: dict[str, Any] = {"format": "mbox", "message_count": len(members)}
    if budget.cut:
        meta["cut"] = True
    doc = Extracted(type="archive", content="\n".join(listing), metadata=meta)
    return doc, members


def _only_document(unpack):
    def extract(path: str, settings: ExtractionSettings) -> Extracted:
        return unpack(path, settings, lambda member: None, Budget.start(settings, path))[0]

    return extract


EMAIL = ExtractorSpec(
    type="email",
    extract=_only_document(unpack_eml),
    extensions=("eml",),
    heavy_modules=("lxml.html",),
    unpack=unpack_eml,
)
OUTLOOK = ExtractorSpec(
    type="email",
    extract=_only_document(unpack_msg),
    extensions=("msg",),
    heavy_modules=("extract_msg",),
    unpack=unpack_msg,
)
MBOX = ExtractorSpec(
    type="archive",
    extract=_only_document(unpack_mbox),
    extensions=base.MAILBOX_EXTENSIONS,
    unpack=unpack_mbox,
)
