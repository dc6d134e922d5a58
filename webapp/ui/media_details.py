"""The technical details of an audio or video file as the page shows them: the media extractor
keeps hachoir's `Key: value` lines in English (they are searched as written); the page says
each key by its label and the words hachoir writes in values (units, channels, byte order) in
its language. A line of a key not listed is shown as hachoir wrote it."""

from __future__ import annotations

import re

from flask import Flask
from flask_babel import gettext
from flask_babel import lazy_gettext as _l


def N_(message: str) -> str:  # noqa: N802  (the marker pybabel extracts by default)
    """Mark a word for the catalogue without translating it here."""
    return message


# hachoir's names of its metadata (hachoir/metadata/register.py), as the page says them
DETAIL_LABELS = {
    "Title": _l("Title"),
    "Artist": _l("Performer"),
    "Author": _l("Author"),
    "Music composer": _l("Composer"),
    "Album": _l("Album"),
    "Duration": _l("Duration"),
    "Nb page": _l("Pages"),
    "Music genre": _l("Genre"),
    "Language": _l("Language"),
    "Track number": _l("Track"),
    "Track total": _l("Tracks"),
    "Organization": _l("Organisation"),
    "Version": _l("Version"),
    "Image width": _l("Width"),
    "Image height": _l("Height"),
    "Channel": _l("Channels"),
    "Sample rate": _l("Sample rate"),
    "Bits/sample": _l("Bits per sample"),
    "Image orientation": _l("Orientation"),
    "Number of colors": _l("Number of colours"),
    "Bits/pixel": _l("Bits per pixel"),
    "File name": _l("File name"),
    "File size": _l("File size"),
    "Pixel format": _l("Pixel format"),
    "Compressed file size": _l("Compressed size"),
    "Compression rate": _l("Compression rate"),
    "Image DPI width": _l("Horizontal DPI"),
    "Image DPI height": _l("Vertical DPI"),
    "File attributes": _l("File attributes"),
    "File type": _l("File type"),
    "Subtitle author": _l("Subtitle author"),
    "Creation date": _l("Creation date"),
    "Last modification": _l("Last modification"),
    "Latitude": _l("Latitude"),
    "Longitude": _l("Longitude"),
    "Altitude": _l("Altitude"),
    "Location": _l("Location"),
    "City": _l("City"),
    "Country": _l("Country"),
    "Charset": _l("Character set"),
    "Font weight": _l("Font weight"),
    "Camera aperture": _l("Aperture"),
    "Camera focal": _l("Focal length"),
    "Camera exposure": _l("Exposure"),
    "Camera brightness": _l("Brightness"),
    "Camera model": _l("Camera model"),
    "Camera manufacturer": _l("Camera maker"),
    "Compression": _l("Compression"),
    "Copyright": _l("Copyright"),
    "URL": _l("Web address"),
    "Frame rate": _l("Frame rate"),
    "Bit rate": _l("Bit rate"),
    "Aspect ratio": _l("Aspect ratio"),
    "Thumbnail size": _l("Thumbnail size"),
    "ISO speed rating": _l("ISO speed"),
    "EXIF version": _l("EXIF version"),
    "Date-time original": _l("Date and time taken"),
    "Date-time digitized": _l("Date and time digitised"),
    "Compressed bits per pixel": _l("Compressed bits per pixel"),
    "Shutter speed": _l("Shutter speed"),
    "Aperture": _l("Aperture"),
    "Exposure bias": _l("Exposure compensation"),
    "Focal length": _l("Focal length"),
    "Flashpix version": _l("Flashpix version"),
    "Focal plane width": _l("Focal plane width"),
    "Focal plane height": _l("Focal plane height"),
    "Focal length in 35mm film": _l("Focal length in 35 mm film"),
    "OS": _l("Operating system"),
    "Producer": _l("Produced with"),
    "Comment": _l("Comment"),
    "Format version": _l("Format version"),
    "MIME type": _l("MIME type"),
    "Endianness": _l("Byte order"),
}
# words hachoir writes in values: durations (`1 hours 46 min 42 sec`), sizes, channels, byte order
VALUE_WORDS = (
    N_("sec"),
    N_("hours"),
    N_("days"),
    N_("years"),
    N_("pixels"),
    N_("bits"),
    N_("stereo"),
    N_("mono"),
    N_("Big endian"),
    N_("Little endian"),
    N_("Play speed"),
    N_("User volume"),
)
_WORDS = re.compile(r"\b(" + "|".join(re.escape(word) for word in VALUE_WORDS) + r")\b")


def media_detail(line: str) -> str:
    """One of hachoir's lines in the page's language: 'Duration: 36 sec' -> 'Dauer: 36 s'."""
    key, sep, value = str(line).partition(": ")
    label = DETAIL_LABELS.get(key)
    if label is None or not sep:
        return str(line)
    return f"{label}: {_WORDS.sub(lambda match: gettext(match.group(0)), value)}"


def init_app(app: Flask) -> None:
    """Register the filter."""
    app.add_template_filter(media_detail)
