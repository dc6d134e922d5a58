"""Outlook .msg files for the tests, written from MS-OXMSG: the message's properties as
streams of a Compound File, which extract-msg's own OLE writer lays out (MS-CFB)."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path

from extract_msg.ole_writer import OleWriter

PT_LONG, PT_SYSTIME, PT_UNICODE, PT_BINARY = 0x0003, 0x0040, 0x001F, 0x0102
READABLE_WRITABLE = 0x6
# property ids (MS-OXPROPS)
MESSAGE_CLASS, SUBJECT, HEADERS = 0x001A, 0x0037, 0x007D
CLIENT_SUBMIT_TIME, DELIVERY_TIME = 0x0039, 0x0E06
DISPLAY_TO, DISPLAY_CC, SENDER_NAME, SENDER_EMAIL = 0x0E04, 0x0E03, 0x0C1A, 0x0C1F
BODY, HTML, MESSAGE_ID = 0x1000, 0x1013, 0x1035
ATTACH_DATA, ATTACH_FILENAME, ATTACH_LONG_FILENAME, ATTACH_METHOD = 0x3701, 0x3704, 0x3707, 0x3705
STORE_SUPPORT_MASK, UNICODE_STORE = 0x340D, 0x00040000
ATTACH_BY_VALUE = 1


def _filetime(when: datetime) -> int:
    """100-nanosecond intervals since 1601-01-01 UTC."""
    return int((when - datetime(1601, 1, 1, tzinfo=UTC)).total_seconds() * 10_000_000)


def _stream(prop: int, kind: int) -> str:
    return f"__substg1.0_{prop:04X}{kind:04X}"


class _Properties:
    """One object's properties: its `__substg1.0_` streams and its property stream's entries."""

    def __init__(self) -> None:
        self.streams: dict[str, bytes] = {}
        self.entries: list[bytes] = []

    def text(self, prop: int, value: str) -> None:
        data = value.encode("utf-16-le")
        self.streams[_stream(prop, PT_UNICODE)] = data
        self._entry(prop, PT_UNICODE, struct.pack("<II", len(data) + 2, 0))

    def binary(self, prop: int, value: bytes) -> None:
        self.streams[_stream(prop, PT_BINARY)] = value
        self._entry(prop, PT_BINARY, struct.pack("<II", len(value), 0))

    def long(self, prop: int, value: int) -> None:
        self._entry(prop, PT_LONG, struct.pack("<iI", value, 0))

    def time(self, prop: int, when: datetime) -> None:
        self._entry(prop, PT_SYSTIME, struct.pack("<Q", _filetime(when)))

    def _entry(self, prop: int, kind: int, value: bytes) -> None:
        self.entries.append(struct.pack("<II", (prop << 16) | kind, READABLE_WRITABLE) + value)

    def write(self, ole: OleWriter, folder: list[str], header: bytes) -> None:
        ole.addEntry([*folder, "__properties_version1.0"], header + b"".join(self.entries))
        for name, data in self.streams.items():
            ole.addEntry([*folder, name], data)


def write_msg(
    path: Path,
    *,
    subject: str,
    sender: str = "",
    sender_email: str = "",
    to: str = "",
    cc: str = "",
    body: str | None = None,
    html: str | None = None,
    message_id: str = "",
    date: datetime | None = None,
    attachments: dict[str, bytes] | None = None,
) -> Path:
    """A plain Outlook message (IPM.Note) with Unicode strings; `date` is when it was sent.
    To, Cc, From, Date and Message-ID are in its transport headers too, as a received
    message has them (extract-msg reads the addresses from there)."""
    date = date or datetime(2024, 3, 5, 14, 30, tzinfo=UTC)
    attachments = attachments or {}
    top = _Properties()
    top.text(MESSAGE_CLASS, "IPM.Note")
    top.text(SUBJECT, subject)
    top.long(STORE_SUPPORT_MASK, UNICODE_STORE)
    top.time(CLIENT_SUBMIT_TIME, date)
    top.time(DELIVERY_TIME, date)
    headers = [f"Subject: {subject}", f"Date: {date.strftime('%a, %d %b %Y %H:%M:%S +0000')}"]
    if sender or sender_email:
        top.text(SENDER_NAME, sender or sender_email)
        top.text(SENDER_EMAIL, sender_email or sender)
        headers.append(f"From: {sender} <{sender_email}>" if sender_email else f"From: {sender}")
    if to:
        top.text(DISPLAY_TO, to)
        headers.append(f"To: {to}")
    if cc:
        top.text(DISPLAY_CC, cc)
        headers.append(f"Cc: {cc}")
    if message_id:
        top.text(MESSAGE_ID, message_id)
        headers.append(f"Message-ID: {message_id}")
    top.text(HEADERS, "\r\n".join(headers) + "\r\n\r\n")
    if body is not None:
        top.text(BODY, body)
    if html is not None:
        top.binary(HTML, html.encode("utf-8"))
    ole = OleWriter()
    # top-level header: 8 reserved, next recipient id, next attachment id, recipient count,
    # attachment count, 8 reserved
    top.write(ole, [], struct.pack("<8xIIII8x", 0, len(attachments), 0, len(attachments)))
    # the named-property map (none used here, but every Outlook message carries the storage)
    ole.addEntry(["__nameid_version1.0"], storage=True)
    for stream in ("00020102", "00030102", "00040102"):  # GUIDs, entries, names
        ole.addEntry(["__nameid_version1.0", f"__substg1.0_{stream}"], b"")
    for n, (name, data) in enumerate(attachments.items()):
        folder = [f"__attach_version1.0_#{n:08X}"]
        ole.addEntry(folder, storage=True)
        att = _Properties()
        att.long(ATTACH_METHOD, ATTACH_BY_VALUE)
        att.text(ATTACH_LONG_FILENAME, name)
        att.text(ATTACH_FILENAME, name[:12])
        att.binary(ATTACH_DATA, data)
        att.write(ole, folder, bytes(8))  # an attachment's header: 8 reserved
    ole.write(str(path))
    return path
