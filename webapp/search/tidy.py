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
# Markdown's marks, each removed by one pattern. Every pattern runs in time linear in the
# text (the embedding phase tidies whole documents): no pattern can split one run of
# characters in more than one way (a table rule's dashes between required pipes, not
# `(?:-{3,})+`, which took 8 s for one line of 46 dashes followed by words); whitespace that
# may not hold a line break is `[ \t]`, not `\s` (a `^\s*` swept over every later empty line
# from each one); a run of blanks is tried from its start only (`(?<![ \t])`); and what a
# mark encloses can hold neither its own opening character nor a line break, and at most
# MARK_SPAN characters (an opening `**`, `[` or `<!--` without its end scans no further than
# the next one).
MARK_SPAN = 1_000
_N = f"{{0,{MARK_SPAN}}}"
_N1 = f"{{1,{MARK_SPAN}}}"
_MARKDOWN = (
    (re.compile(r"\A---\n.*?\n---[ \t]*\n", re.S), ""),  # front matter
    (re.compile(r"^[ \t]*(?:```|~~~).*$", re.M), ""),  # code fences
    (re.compile(rf"!\[([^\[\]\n]{_N})\]\([^()\n]{_N}\)"), r"\1"),  # images: their alt text
    (re.compile(rf"\[([^\[\]\n]{_N1})\]\([^()\n]{_N}\)"), r"\1"),  # links: their text
    (re.compile(rf"\[([^\[\]\n]{_N1})\]\[[^\[\]\n]{_N}\]"), r"\1"),  # reference links
    (re.compile(rf"^ {{0,3}}\[[^\[\]\n]{_N}\]:[ \t]*\S.*$", re.M), ""),  # link definitions
    (re.compile(rf"<(https?://[^<>\s]{_N})>"), r"\1"),  # autolinks
    (re.compile(r"</?[A-Za-z][^<>\n]{0,200}>"), " "),  # HTML tags
    (re.compile(rf"<!--(?:(?!<!--).){_N}?-->", re.S), " "),  # HTML comments
    (re.compile(r"^ {0,3}#{1,6}[ \t]+|(?<![ \t])[ \t]+#+[ \t]*$", re.M), ""),  # headings
    (re.compile(r"^ {0,3}(?:>[ \t]?)+", re.M), ""),  # quotes
    (re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?", re.M), ""),  # list items
    (re.compile(r"^ {0,3}(?:[-*_=][ \t]*){3,}$", re.M), ""),  # rules, setext underlines
    # table rules: cells of dashes (colons for alignment) between pipes
    (re.compile(r"^[ \t]*(?:\|[ \t]*)?:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*(?:\|[ \t]*)?$", re.M), ""),
    (re.compile(r"(?<![ \t])[ \t]*\|[ \t]*"), " "),  # table cells
    (re.compile(rf"\*\*(?=[^\s*])([^*\n]{_N}?)(?<=\S)\*\*"), r"\1"),  # **bold**
    (re.compile(rf"__(?=[^\s_])([^_\n]{_N}?)(?<=\S)__"), r"\1"),  # __bold__
    (re.compile(rf"(?<![\w*])\*(?=[^\s*])([^*\n]{_N}?)(?<=\S)\*(?![\w*])"), r"\1"),  # *italic*
    (re.compile(rf"(?<![\w_])_(?=[^\s_])([^_\n]{_N}?)(?<=\S)_(?![\w_])"), r"\1"),  # _italic_
    (re.compile(rf"~~([^~\n]{_N}?)~~"), r"\1"),  # struck through
    (re.compile(rf"(?<!`)`+([^`\n]{_N1})`+"), r"\1"),  # code spans
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
