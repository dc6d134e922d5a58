"""A document's metadata as the page shows it: its keys in the page's language and its dates as
dates of that language (`2021:01:13 14:12:00` -> `13.01.2021, 14:12:00`)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from flask import Flask
from flask_babel import format_date, format_datetime
from flask_babel import lazy_gettext as _l
from markupsafe import Markup, escape

from webapp.ui.tag_labels import TAG_LABELS, tag_value

# the extractors' keys (webapp/indexing/extractors), as the page names them
LABELS = {
    "album": _l("Album"),
    "albumartist": _l("Album artist"),
    "application": _l("Application"),
    "archive_format": _l("Archive format"),
    "artist": _l("Performer"),
    "attachments": _l("Attachments"),
    "author": _l("Author"),
    "bitrate": _l("Bit rate"),
    "bits_per_sample": _l("Bits per sample"),
    "camera_make": _l("Camera maker"),
    "camera_model": _l("Camera model"),
    "category": _l("Category"),
    "cc": _l("Cc"),
    "channels": _l("Channels"),
    "chapter_count": _l("Chapters"),
    "codec": _l("Codec"),
    "codec_description": _l("Codec description"),
    "comet": _l("CoMet"),
    "comicbookinfo": _l("ComicBookInfo"),
    "comicinfo": _l("ComicInfo"),
    "comment": _l("Comment"),
    "comments": _l("Comments"),
    "company": _l("Company"),
    "composer": _l("Composer"),
    "contributor": _l("Contributor"),
    "copyright": _l("Copyright"),
    "created": _l("Created"),
    "creator": _l("Creator"),
    "cue_count": _l("Cues"),
    "custom_properties": _l("Custom properties"),
    "date": _l("Date"),
    "date_taken": _l("Taken"),
    "description": _l("Description"),
    "details": _l("Details"),
    "discnumber": _l("Disc"),
    "duration_seconds": _l("Duration (seconds)"),
    "encoder": _l("Encoder"),
    "encoding": _l("Encoding"),
    "encrypted_members": _l("Encrypted members"),
    "encryption": _l("Encryption"),
    "exif": _l("EXIF"),
    "file_count": _l("Files"),
    "format": _l("Format"),
    "frames": _l("Frames"),
    "from": _l("From"),
    "front_matter": _l("Front matter"),
    "front_matter_error": _l("Front matter problem"),
    "front_matter_format": _l("Front matter format"),
    "genre": _l("Genre"),
    "has_text_layer": _l("Text layer"),
    "height": _l("Height"),
    "identifier": _l("Identifier"),
    "image_only": _l("Pictures only"),
    "image_only_pages": _l("Pages without text"),
    "keywords": _l("Keywords"),
    "kind": _l("Kind"),
    "language": _l("Language"),
    "last_modified_by": _l("Last modified by"),
    "length": _l("Length"),
    "lens": _l("Lens"),
    "line_count": _l("Lines"),
    "lyricist": _l("Lyricist"),
    "lyrics": _l("Lyrics"),
    "max_columns": _l("Columns read"),
    "max_rows_per_sheet": _l("Rows read per sheet"),
    "member_count": _l("Members"),
    "message_count": _l("Messages"),
    "message_id": _l("Message ID"),
    "mime_type": _l("MIME type"),
    "mode": _l("Colour mode"),
    "modified": _l("Modified"),
    "notes": _l("Notes"),
    "ocr": _l("OCR"),
    "original_chars": _l("Characters in the file"),
    "page_count": _l("Pages"),
    "pages": _l("Pages"),
    "paragraph_count": _l("Paragraphs"),
    "pdf_version": _l("PDF version"),
    "producer": _l("Produced with"),
    "publisher": _l("Publisher"),
    "raw_height": _l("Height of the raw image"),
    "raw_width": _l("Width of the raw image"),
    "rights": _l("Rights"),
    "sample_rate": _l("Sample rate"),
    "sheet_count": _l("Sheets"),
    "sheet_names": _l("Sheet names"),
    "slide_count": _l("Slides"),
    "slides": _l("Slides"),
    "slides_with_notes": _l("Slides with notes"),
    "source": _l("Taken from"),
    "subject": _l("Subject"),
    "subtitle": _l("Subtitle"),
    "tags": _l("Tags"),
    "title": _l("Title"),
    "to": _l("To"),
    "tracknumber": _l("Track"),
    "truncated": _l("Cut short"),
    "truncated_at_chars": _l("Cut after characters"),
    "truncated_sheets": _l("Sheets cut short"),
    "unpacked_bytes": _l("Unpacked size"),
    "width": _l("Width"),
    "words": _l("Words"),
}
# keys whose values Trawl writes itself (a message, said in the page's language by
# `filters.localized`), not the file's own words
MESSAGE_KEYS = frozenset({"cut", "exif_error", "kind"})
_EXIF = re.compile(r"(\d{4}):(\d{2}):(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?")
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?")


def meta_label(key: str) -> str:
    """A metadata key or a picture's tag in the page's language; one not listed (a PNG text
    chunk's own keyword) is shown as it is written."""
    label = LABELS.get(key) or TAG_LABELS.get(key)
    return key if label is None else str(label)


def _parsed(value: str) -> datetime | None:
    """The instant an EXIF or ISO 8601 date string names, or None for other text."""
    text = value.strip()
    match = _EXIF.fullmatch(text)
    try:
        if match:
            return datetime(*(int(part or 0) for part in match.groups()))
        if _ISO.fullmatch(text):
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:  # 2021:13:45 ...: text after all
        return None
    return None


def meta_date(value: object) -> Markup | None:
    """A metadata date in the page's language, or None when `value` is not one. A time with a
    zone becomes a <time> the browser shows in the reader's zone; one without (a camera's
    clock) stays the time it says; a day alone is a day."""
    when = _parsed(value) if isinstance(value, str) else None
    if when is None:
        return None
    if when.tzinfo is not None:
        utc = when.astimezone(UTC).replace(tzinfo=None)
        iso = utc.isoformat() + "Z"
        text = format_datetime(utc, "medium")
        return Markup('<time datetime="%s" data-local title="%s">%s</time>') % (iso, value, text)
    if len(value.strip()) == 10:
        return escape(format_date(when, "medium"))
    return escape(format_datetime(when, "medium"))


def init_app(app: Flask) -> None:
    """Register the filters."""
    app.add_template_filter(meta_label)
    app.add_template_filter(tag_value)
    app.add_template_test(MESSAGE_KEYS.__contains__, "trawl_message")
    app.add_template_filter(meta_date)
