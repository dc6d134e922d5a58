"""Audio and video: tags and technical metadata via mutagen, container summaries via hachoir."""

from __future__ import annotations

from typing import Any

from ._util import clean_str, summary_lines
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec, extension

# ID3 frames and MP4 atoms mapped to the names Vorbis comments already use.
TAG_NAMES = {
    "TIT2": "title",
    "TPE1": "artist",
    "TALB": "album",
    "TPE2": "albumartist",
    "TDRC": "date",
    "TYER": "date",
    "TCON": "genre",
    "TRCK": "tracknumber",
    "TPOS": "discnumber",
    "TCOM": "composer",
    "COMM": "comment",
    "TIT3": "subtitle",
    "TPUB": "publisher",
    "USLT": "lyrics",
    "TEXT": "lyricist",
    "TCOP": "copyright",
    "\xa9nam": "title",
    "\xa9ART": "artist",
    "\xa9alb": "album",
    "aART": "albumartist",
    "\xa9day": "date",
    "\xa9gen": "genre",
    "trkn": "tracknumber",
    "disk": "discnumber",
    "\xa9wrt": "composer",
    "\xa9cmt": "comment",
    "\xa9too": "encoder",
    "\xa9lyr": "lyrics",
}
BINARY_TAGS = ("APIC", "covr", "metadata_block_picture", "coverart", "PRIV", "GEOB", "MCDI")
SUMMARY_TAGS = (
    "title",
    "artist",
    "album",
    "albumartist",
    "date",
    "genre",
    "tracknumber",
    "composer",
    "comment",
)
VIDEO_EXTENSIONS = ("mp4", "m4v", "mkv", "webm", "mov", "avi", "wmv", "mpg", "mpeg", "3gp")
MAX_TAG_CHARS = 4000


def _tag_text(value: Any) -> str | None:
    if hasattr(value, "text") and not isinstance(value, str):
        value = value.text
    if isinstance(value, list | tuple):
        parts = [_tag_text(v) for v in value]
        return "; ".join(p for p in parts if p) or None
    if isinstance(value, bytes):
        return None
    text = clean_str(str(value)).strip()
    return text[:MAX_TAG_CHARS] or None


def _mutagen(path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(technical info, tags) from mutagen; empty dicts when it does not know the file."""
    import mutagen

    try:
        audio = mutagen.File(path)
    except (mutagen.MutagenError, OSError, ValueError, EOFError, KeyError, IndexError):
        return {}, {}
    if audio is None:
        return {}, {}
    info: dict[str, Any] = {}
    for name in (
        "length",
        "bitrate",
        "sample_rate",
        "channels",
        "bits_per_sample",
        "codec",
        "codec_description",
    ):
        value = getattr(audio.info, name, None)
        if value not in (None, "", 0):
            info["duration_seconds" if name == "length" else name] = (
                round(value, 3) if isinstance(value, float) else value
            )
    if audio.mime:
        info["mime_type"] = audio.mime[0]
    tags: dict[str, Any] = {}
    for key, value in (audio.tags or {}).items():
        base = str(key).split(":", 1)[0]
        if base in BINARY_TAGS or base.lower() in BINARY_TAGS:
            continue
        text = _tag_text(value)
        if text:
            name = TAG_NAMES.get(base, base.lower() if base.isupper() else base)
            tags.setdefault(clean_str(name), text)
    return info, tags


def _hachoir(path: str) -> list[str]:
    """Readable `Key: value` summary lines from hachoir (durations, codecs, sizes, producer)."""
    from hachoir.core import config as hachoir_config
    from hachoir.metadata import extractMetadata
    from hachoir.parser import createParser

    hachoir_config.quiet = True
    try:
        parser = createParser(path)
        if parser is None:
            return []
        with parser:
            metadata = extractMetadata(parser)
    except Exception:  # hachoir raises many types on damaged containers
        return []
    if metadata is None:
        return []
    lines = []
    for line in metadata.exportPlaintext() or []:
        line = clean_str(line).strip()
        if line.startswith("- "):
            lines.append(line[2:])
    return lines[:200]


def extract_media(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract tags and technical metadata of an audio or video file."""
    info, tags = _mutagen(path)
    details = _hachoir(path)
    if not info and not tags and not details:
        raise ExtractionError("Not a valid media file")
    ext = extension(path)
    meta: dict[str, Any] = dict(info)
    meta["kind"] = "video" if ext in VIDEO_EXTENSIONS else "audio"
    if tags:
        meta["tags"] = tags
        meta.update({k: tags[k] for k in SUMMARY_TAGS if k in tags})
    if details:
        meta["details"] = details
    first = summary_lines((k.capitalize(), tags.get(k)) for k in SUMMARY_TAGS)
    other = summary_lines((k, v) for k, v in tags.items() if k not in SUMMARY_TAGS)
    content = "\n".join(p for p in (first, other, "\n".join(details)) if p)
    title = tags.get("title") if isinstance(tags.get("title"), str) else None
    return Extracted(type="media", content=content, title=title, metadata=meta)


MEDIA = ExtractorSpec(
    type="media",
    extract=extract_media,
    extensions=(
        "mp3",
        "flac",
        "ogg",
        "oga",
        "opus",
        "m4a",
        "m4b",
        "aac",
        "wav",
        "aiff",
        "aif",
        "wma",
        "ape",
        "wv",
        "mpc",
        "dsf",
    )
    + VIDEO_EXTENSIONS,
    heavy_modules=(
        "mutagen",
        "mutagen.mp3",
        "mutagen.mp4",
        "mutagen.flac",
        "mutagen.oggvorbis",
        "hachoir.parser",
        "hachoir.metadata",
    ),
)
