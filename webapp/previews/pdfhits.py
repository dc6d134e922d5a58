"""Where a search matched on the pages of a PDF: whole words only, found by the search's own
matcher (stems, typos, accents, as the text preview marks them), never a substring of a longer
word (`radio` once painted `ratio` inside `separation`: pymupdf's search_for finds substrings).

Runs in the preview child (render.py), which opens the PDF; the boxes go to the drawn page
(render.py paints them) and to the browser's viewer (fractions of the page as it is shown).
"""

from __future__ import annotations

import time
from typing import Any

from webapp.search.query import TOKEN_RE, TermMatcher, is_cjk
from webapp.search.snippets import find_matches

MAX_PAGES_SEARCHED = 500  # pages whose words are read to find the ones holding a match
HITS_SHARE_OF_TIMEOUT = 0.6  # the search of the pages stops after this share of the timeout

Box = tuple[float, float, float, float]


def hit_rects(page: Any, matcher: TermMatcher) -> list[Box]:
    """The boxes (unrotated page space, like search_for's) of the matched parts of the page's
    words: a word box holding a matched token is cut to that token's share of its characters
    (`radio,` marks `radio`)."""
    return word_hits(page.get_text("words", sort=False), matcher)


def word_hits(words: Any, matcher: TermMatcher) -> list[Box]:
    """The boxes of the matched parts of words given as (x0, y0, x1, y1, text, ...): a PDF
    page's words, or the words OCR read on a scan (their boxes as fractions of the picture)."""
    cjk = any(is_cjk(t.text) for t in matcher.terms)
    matched = matcher.match_many({t for w in words for t in TOKEN_RE.findall(w[4])})
    if not cjk and not matched:
        return []
    boxes: list[Box] = []
    for x0, y0, x1, y1, text, *_ in words:
        if not cjk and not any(t in matched for t in TOKEN_RE.findall(text)):
            continue
        for start, end, _term in find_matches(text, matcher):
            width = (x1 - x0) / max(1, len(text))
            boxes.append((x0 + start * width, y0, x0 + end * width, y1))
    return boxes


def _shown(page: Any, boxes: list[Box]) -> list[list[float]]:
    """Boxes as fractions (0..1, 4 decimals) of the page as it is shown (rotation applied)."""
    a, b, c, d, e, f = page.rotation_matrix  # plain arithmetic: pymupdf's Rect is slow per box
    width, height = max(page.rect.width, 1e-6), max(page.rect.height, 1e-6)
    out = []
    for x0, y0, x1, y1 in boxes:
        xs = [x * a + y * c + e for x, y in ((x0, y0), (x1, y1))]
        ys = [x * b + y * d + f for x, y in ((x0, y0), (x1, y1))]
        out.append(
            [
                round(min(xs) / width, 4),
                round(min(ys) / height, 4),
                round(max(xs) / width, 4),
                round(max(ys) / height, 4),
            ]
        )
    return out


def pdf_hits(doc: Any, matcher: TermMatcher | None, seconds: float) -> dict:
    """Every page's shown size in points, and per page holding a match (1-based, as a string
    key) its hit boxes; `searched` says how many pages were read (the first MAX_PAGES_SEARCHED,
    fewer when `seconds` ran out)."""
    sizes = []
    for number in range(doc.page_count):
        rect = doc[number].rect
        sizes.append([round(rect.width, 2), round(rect.height, 2)])
    hits: dict[str, list[list[float]]] = {}
    searched = 0
    if matcher is not None and matcher.terms:
        deadline = time.monotonic() + seconds
        for number in range(min(doc.page_count, MAX_PAGES_SEARCHED)):
            if time.monotonic() > deadline:
                break
            page = doc[number]
            boxes = hit_rects(page, matcher)
            if boxes:
                hits[str(number + 1)] = _shown(page, boxes)
            searched += 1
    return {"sizes": sizes, "hits": hits, "searched": searched}


def first_match(doc: Any, matcher: TermMatcher) -> int:
    """The first page (1-based) holding a matched word; 1 when none of the first
    MAX_PAGES_SEARCHED does."""
    for number in range(min(doc.page_count, MAX_PAGES_SEARCHED)):
        if hit_rects(doc[number], matcher):
            return number + 1
    return 1
