"""Markdown: YAML/TOML/JSON front matter into metadata, title from it or the first heading."""

from __future__ import annotations

import functools
import json
import re
import tomllib
from typing import Any

from ._util import clean_str, decode_text, json_safe, read_text_bytes
from .base import Extracted, ExtractionSettings, ExtractorSpec

_FENCES = {"---": "yaml", "+++": "toml"}
# A heading's line is found here and its closing `#`s are cut off in _atx_title: a lazy
# `(.+?)\s*#*\s*$` tried its tail at every character, and the two `\s*` split every run of
# blanks both ways (cubic: 1 s for one line of 1,000 blanks).
_ATX = re.compile(r"^\s{0,3}#{1,6}\s+(.+)$", re.MULTILINE)
# "not a blank line" looks at its own line only: `(?!\s*$)` read on over every blank line
# after it, from each of them (quadratic: 11 s for 100,000 empty lines).
_SETEXT = re.compile(r"^(?![^\S\n]*$)(.+)\n(=+|-+)\s*$", re.MULTILINE)


def has_front_matter(text: str) -> bool:
    """True when the text opens with a closed YAML or TOML front matter block."""
    return _split_front_matter(text)[0] is not None


def _split_front_matter(text: str) -> tuple[str | None, str | None, str]:
    """Return (format, raw front matter, body); format is None when there is none."""
    lines = text.split("\n")
    first = lines[0].rstrip("\r").strip() if lines else ""
    if first in _FENCES:
        for index in range(1, min(len(lines), 2000)):
            line = lines[index].rstrip("\r").strip()
            if line == first or (first == "---" and line == "..."):
                raw = "\n".join(lines[1:index])
                return _FENCES[first], raw, "\n".join(lines[index + 1 :])
    elif first == "{":
        for index in range(1, min(len(lines), 2000)):
            if lines[index].rstrip("\r") == "}":
                return "json", "\n".join(lines[: index + 1]), "\n".join(lines[index + 1 :])
    return None, None, text


def _parse_front_matter(fmt: str, raw: str) -> dict[str, Any]:
    if fmt == "toml":
        data = tomllib.loads(raw)
    elif fmt == "json":
        data = json.loads(raw)
    else:
        data = _load_yaml(raw)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError("front matter is not a mapping")
    return json_safe(data)


def _load_yaml(raw: str) -> Any:
    import yaml

    if "*" not in raw and yaml.__with_libyaml__:  # no alias possible: libyaml, ten times faster
        return yaml.load(raw, Loader=yaml.CSafeLoader)  # noqa: S506 - the safe loader
    return yaml.load(raw, Loader=_no_alias_loader())  # noqa: S506 - SafeLoader subclass


@functools.cache
def _no_alias_loader() -> type:
    import yaml

    class NoAliasLoader(yaml.SafeLoader):
        """Safe loader that refuses aliases (no billion-laughs expansion)."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.events.AliasEvent):
                raise ValueError("YAML aliases are not allowed in front matter")
            return super().compose_node(parent, index)

    return NoAliasLoader


def _atx_title(line: str) -> str:
    """An ATX heading's text without its closing sequence (`Title ##` -> `Title`), never empty."""
    return line.rstrip().rstrip("#").rstrip() or line[:1]


def _first_heading(body: str) -> str | None:
    candidates = []
    atx = _ATX.search(body)
    if atx:
        candidates.append((atx.start(), _atx_title(atx.group(1))))
    setext = _SETEXT.search(body)
    if setext and not setext.group(1).lstrip().startswith(("#", "|", "-", "*", ">")):
        candidates.append((setext.start(), setext.group(1).strip()))
    return min(candidates)[1] if candidates else None


def from_text(text: str, metadata: dict[str, Any], settings: ExtractionSettings) -> Extracted:
    """Build a markdown document from decoded text (front matter split off)."""
    fmt, raw, body = _split_front_matter(text)
    title = None
    if fmt is not None:
        try:
            front = _parse_front_matter(fmt, raw or "")
        except Exception as exc:  # any parser error: keep the text, record why
            metadata["front_matter_error"] = clean_str(str(exc))[:200]
            body = text
        else:
            metadata["front_matter"] = front
            metadata["front_matter_format"] = fmt
            if isinstance(front.get("title"), str) and front["title"].strip():
                title = front["title"].strip()
    title = title or _first_heading(body)
    content = body.lstrip("\r\n")
    return Extracted(type="markdown", content=content, title=title, metadata=metadata)


def extract_markdown(path: str, settings: ExtractionSettings) -> Extracted:
    """Read a markdown file."""
    data, cut = read_text_bytes(path, settings)
    text, encoding = decode_text(data)
    text = clean_str(text)
    line_count = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    metadata: dict[str, Any] = {"encoding": encoding, "line_count": line_count}
    if cut:
        metadata["truncated"] = True
    return from_text(text, metadata, settings)


MARKDOWN = ExtractorSpec(
    type="markdown",
    extract=extract_markdown,
    extensions=("md", "markdown", "mdown", "mkd", "mkdn", "mdwn", "mdx", "rmd"),
    heavy_modules=("yaml",),
)
