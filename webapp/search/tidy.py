"""Snippet text without markup: Markdown's marks and metadata summaries turned into words."""

from __future__ import annotations

import re

# Types whose text is `Key: value` lines of metadata (extractors' summaries of tags).
METADATA_KINDS = frozenset({"image", "raw_image", "media", "comic"})
# Keys of those lines that say nothing a reader looks for (their values are dropped).
TECHNICAL_KEYS = frozenset(
    k.casefold()
    for k in (
        "Format Mode Frames Width Height Orientation ExposureTime FNumber ISOSpeedRatings "
        "PhotographicSensitivity FocalLength FocalLengthIn35mmFilm Software DateTime "
        "DateTimeOriginal DateTimeDigitized ResolutionUnit XResolution YResolution "
        "YCbCrPositioning ExifImageWidth ExifImageHeight ColorSpace Flash WhiteBalance "
        "MeteringMode ExposureProgram ExposureMode ExposureBiasValue SceneCaptureType "
        "SubsecTime SubsecTimeOriginal SubsecTimeDigitized MaxApertureValue ApertureValue "
        "ShutterSpeedValue BrightnessValue SensingMethod CustomRendered DigitalZoomRatio "
        "Contrast Saturation Sharpness GainControl LightSource BitsPerSample Compression "
        "PhotometricInterpretation SamplesPerPixel PlanarConfiguration Duration Bitrate "
        "Channels Codec Endianness Producer Files"
    ).split()
) | {
    "mime type",
    "bit rate",
    "sample rate",
    "image width",
    "image height",
    "frame rate",
    "compression rate",
    "bits/sample",
    "pixel format",
    "creation date",
    "last modification",
    "compression",
    "comment",
}
DESCRIPTIVE_KEYS = frozenset({"title", "album", "artist", "series", "headline", "caption", "objectname"})
_META_LINE = re.compile(r"\s*([A-Za-z][\w .()/-]{0,40}?)\s*:(?:\s+(.*))?\s*$")
_MARKDOWN = (
    (re.compile(r"\A---\n.*?\n---\s*\n", re.S), ""),  # front matter
    (re.compile(r"^\s*(```|~~~).*$", re.M), ""),  # code fences
    (re.compile(r"!\[([^\]\n]*)\]\([^)\n]*\)"), r"\1"),  # images: their alt text
    (re.compile(r"\[([^\]\n]+)\]\([^)\n]*\)"), r"\1"),  # links: their text
    (re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]"), r"\1"),  # reference links
    (re.compile(r"^\s{0,3}\[[^\]\n]+\]:\s*\S.*$", re.M), ""),  # link definitions
    (re.compile(r"<(https?://[^>\s]+)>"), r"\1"),  # autolinks
    (re.compile(r"</?[A-Za-z][^>\n]{0,200}>|<!--.*?-->", re.S), " "),  # HTML tags, comments
    (re.compile(r"^\s{0,3}#{1,6}\s+|\s+#+\s*$", re.M), ""),  # headings
    (re.compile(r"^\s{0,3}(?:>\s?)+", re.M), ""),  # quotes
    (re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(?:\[[ xX]\]\s+)?", re.M), ""),  # list items
    (re.compile(r"^\s{0,3}(?:[-*_=]\s*){3,}$", re.M), ""),  # rules, setext underlines
    (re.compile(r"^\s*\|?(?:\s*:?-{3,}:?\s*\|?)+\s*$", re.M), ""),  # table rules
    (re.compile(r"[ \t]*\|[ \t]*"), " "),  # table cells
    (re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1"), r"\2"),  # bold
    (re.compile(r"(?<![\w*])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])"), r"\1"),  # *italic*
    (re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])"), r"\1"),  # _italic_
    (re.compile(r"~~(.+?)~~"), r"\1"),  # struck through
    (re.compile(r"`+([^`\n]+)`+"), r"\1"),  # code spans
)


def tidy(text: str, kind: str | None) -> str:
    """The words of a piece of a document's text for a snippet: Markdown without its markup,
    metadata lines as their telling values (`Canon · EOS 5D`), other text as it is."""
    if kind == "markdown":
        for pattern, repl in _MARKDOWN:
            text = pattern.sub(repl, text)
        return text
    if kind in METADATA_KINDS:
        return _metadata_words(text)
    return text


def _metadata_words(text: str) -> str:
    """`Key: value` lines as the values a reader looks for, joined by ` · `; the technical
    ones (sizes, exposure, codecs, dates) and numbers left out; other lines kept."""
    out: list[str] = []
    values: list[str] = []
    for line in text.split("\n"):
        m = _META_LINE.fullmatch(line)
        if m is None:
            if values:
                out.append(" · ".join(values))
                values = []
            out.append(line)
            continue
        key, value = m.group(1).casefold(), (m.group(2) or "").strip()
        if not value or key in TECHNICAL_KEYS:
            continue
        if value[0].isdigit() and key not in DESCRIPTIVE_KEYS:
            continue
        if value not in values:
            values.append(value)
    if values:
        out.append(" · ".join(values))
    return "\n".join(out)
