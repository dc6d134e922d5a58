"""Markdown shown as HTML: markdown-it-py (CommonMark, with tables and strikethrough) renders,
nh3 (the Rust `ammonia` sanitizer) keeps only harmless tags and attributes.

Raw HTML inside Markdown is allowed through the renderer, so READMEs that use <details> or <kbd>
read as meant, and everything dangerous (scripts, event handlers, javascript: links, styles,
iframes, forms) is removed by the sanitizer, which parses the result as a browser would.
Images become their alt text: a relative picture cannot be found from the document page and
a remote one would be fetched from another site (the CSP blocks both anyway).
Every class a document names is prefixed `md-` (markdown-it's `language-py` becomes
`md-language-py`): a file cannot borrow the site's own classes (`alert alert-error`) to draw
a notice that looks like the service's.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape
from typing import Any

MAX_MARKDOWN_CHARS = 500_000  # longer documents are shown as plain text
ALLOWED_TAGS = {
    "a",
    "abbr",
    "b",
    "blockquote",
    "br",
    "code",
    "dd",
    "del",
    "details",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "kbd",
    "li",
    "mark",
    "ol",
    "p",
    "pre",
    "s",
    "span",
    "strong",
    "sub",
    "summary",
    "sup",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "td": {"align"},
    "th": {"align"},
    "ol": {"start"},
    "code": {"class"},
    "abbr": {"title"},
    "span": {"class"},
}
CLASS_PREFIX = "md-"


def _own_classes(tag: str, attribute: str, value: str) -> str | None:
    """nh3's attribute filter: each class of the document prefixed, so none is the site's."""
    if attribute != "class":
        return value
    names = [CLASS_PREFIX + name for name in value.split() if name.isascii()]
    return " ".join(names) or None


@lru_cache(maxsize=1)
def _parser() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])

    def image_as_text(renderer, tokens, idx, options, env):  # markdown-it's rule signature
        alt = tokens[idx].content or "image"
        return f'<span class="image">[{escape(alt)}]</span>'  # md-image, once cleaned

    md.add_render_rule("image", image_as_text)
    return md


def render_markdown(text: str) -> str | None:
    """Sanitized HTML of a Markdown text; None when it is too long to render."""
    import nh3

    if len(text) > MAX_MARKDOWN_CHARS:
        return None
    html = _parser().render(text)
    return nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        attribute_filter=_own_classes,
        link_rel="noopener noreferrer nofollow",
    )
