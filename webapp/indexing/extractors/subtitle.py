"""Subtitles: SRT, WebVTT and ASS/SSA dialogue text with cue counts."""

from __future__ import annotations

import re

from ._util import clean_str, decode_text, read_text_bytes
from .base import Extracted, ExtractionSettings, ExtractorSpec, extension

# A tag and an override block are removed with `.sub(r"\1", ...)`. An opening with no closing
# after it is kept with the rest of its line (the second alternative, group 1), which no later
# opening can close either: else the regex read to the end of the line again from each later
# opening (quadratic: 5.5 s for a line of 100,000 `{`).
_TAG = re.compile(r"<[^>\n]*+>|(<[^>\n]*+)")
_ASS_OVERRIDE = re.compile(r"\{[^}]*+\}|(\{[^}]*+)")
_VTT_BLOCKS = ("NOTE", "STYLE", "REGION")


def _srt_vtt(text: str) -> tuple[list[str], int]:
    """Cue texts of SRT or WebVTT: the lines after each timing line up to a blank line."""
    lines, cues, in_cue = [], 0, False
    skip_block = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            in_cue = skip_block = False
            continue
        if "-->" in line:
            cues += 1
            in_cue, skip_block = True, False
            continue
        if not in_cue:
            skip_block = skip_block or line.split(" ", 1)[0] in _VTT_BLOCKS
            continue
        if not skip_block:
            cleaned = _ASS_OVERRIDE.sub(r"\1", _TAG.sub(r"\1", line)).strip()
            if cleaned:
                lines.append(cleaned)
    return lines, cues


def _ass(text: str) -> tuple[list[str], int, str | None]:
    """Dialogue texts of ASS/SSA from the [Events] section, plus the script title."""
    section, fields, lines, cues, title = "", [], [], 0, None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line.lower()
            continue
        if section == "[script info]" and line.lower().startswith("title:"):
            title = line.split(":", 1)[1].strip() or None
        if section != "[events]" or ":" not in line:
            continue
        key, value = line.split(":", 1)
        if key == "Format":
            fields = [f.strip().lower() for f in value.split(",")]
        elif key == "Dialogue":
            cues += 1
            index = fields.index("text") if "text" in fields else 9
            parts = value.split(",", index)
            if len(parts) > index:
                cleaned = _ASS_OVERRIDE.sub(r"\1", parts[index]).replace("\\N", "\n")
                cleaned = cleaned.replace("\\n", "\n").replace("\\h", " ").strip()
                if cleaned:
                    lines.append(cleaned)
    return lines, cues, title


def extract_subtitle(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract dialogue text from a subtitle file."""
    data, cut = read_text_bytes(path, settings)
    text, encoding = decode_text(data)
    text = clean_str(text)
    ext = extension(path)
    title = None
    if ext in ("ass", "ssa") or "[Events]" in text[:1_000_000]:
        lines, cues, title = _ass(text)
        fmt = ext if ext in ("ass", "ssa") else "ass"
    else:
        lines, cues = _srt_vtt(text)
        fmt = "vtt" if ext == "vtt" or text.lstrip().startswith("WEBVTT") else "srt"
    meta: dict = {"encoding": encoding, "format": fmt, "cue_count": cues}
    if cut:
        meta["truncated"] = True
    content = "\n".join(lines)
    return Extracted(type="subtitle", content=content, title=title, metadata=meta)


SUBTITLE = ExtractorSpec(
    type="subtitle",
    extract=extract_subtitle,
    extensions=("srt", "vtt", "ass", "ssa", "sub", "sbv"),
)
