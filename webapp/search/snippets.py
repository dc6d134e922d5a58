"""HTML snippets: a window around the best passage with matched words in <em>, all else escaped."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from html import escape

from webapp.search.query import TOKEN_RE, TermMatcher

ELLIPSIS = "…"
_SPACE_RE = re.compile(r"\s+")
_DIGIT_RE = re.compile(r"\d")
_LETTER_RE = re.compile(r"[^\W\d_]")
# The fast path tries the surface words that earlier results of the query matched, when few.
MAX_KNOWN_WORDS = 64
# Every word of this head of a document is checked; past it, only the stretch around the
# first plain-text occurrence of a missing term is (this bounds the work per result).
HEAD_CHARS = 4_000
# How far (in characters) a window edge may move to avoid cutting a word in half.
_WORD_SNAP = 20

Span = tuple[int, int, int]  # start, end, index of the query term matched


def _char_class(char: str) -> str:
    """Tokenizer class of a character: 'd' digit, 'l' letter, '' separator."""
    if _DIGIT_RE.match(char):
        return "d"
    return "l" if _LETTER_RE.match(char) else ""


def _is_whole_token(text: str, start: int, end: int) -> bool:
    """True when text[start:end] is a complete token, not a piece of a longer one."""
    if start > 0 and _char_class(text[start - 1]) == _char_class(text[start]):
        return False
    return end >= len(text) or _char_class(text[end]) != _char_class(text[end - 1])


def find_matches(text: str, matcher: TermMatcher) -> list[Span]:
    """Character spans of every word in `text` that the matcher accepts, in text order."""
    return _spans_of(text, matcher.match_many(set(TOKEN_RE.findall(text))))


def _spans_of(text: str, matched: dict[str, int]) -> list[Span]:
    """Spans of whole-token occurrences of these surface words (word -> term index)."""
    if not matched:
        return []
    return [(m.start(), m.end(), matched[m.group(0)])
            for m in _word_pattern(matched).finditer(text)
            if _is_whole_token(text, m.start(), m.end())]


def _word_pattern(words) -> re.Pattern[str]:
    """A plain alternation of the words, longest first (whole-token checks are done after:
    lookarounds would cost a check at every position of the text)."""
    return re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)))


def _best_window(spans: list[Span], length: int) -> tuple[int, int]:
    """Span index range [i, j) whose matches fit in `length` chars and cover most terms."""
    best, best_key = (0, 1), (-1, -1)
    j = 0
    for i in range(len(spans)):
        j = max(j, i + 1)
        while j < len(spans) and spans[j][1] - spans[i][0] <= length:
            j += 1
        window = spans[i:j]
        key = (len({s[2] for s in window}), len(window))
        if key > best_key:
            best, best_key = (i, j), key
    return best


def _snap_start(text: str, start: int) -> int:
    """Move a cut forward to the next word start so no word is shown half."""
    if start <= 0:
        return 0
    if not text[start - 1].isalnum() or not text[start].isalnum():
        return start
    for k in range(start, min(len(text), start + _WORD_SNAP)):
        if not text[k].isalnum():
            return k + 1
    return start


def _snap_end(text: str, end: int) -> int:
    """Move a cut back to the previous word end so no word is shown half."""
    if end >= len(text):
        return len(text)
    if not text[end - 1].isalnum() or not text[end].isalnum():
        return end
    for k in range(end - 1, max(0, end - _WORD_SNAP), -1):
        if not text[k].isalnum():
            return k
    return end


def _window(text: str, spans: list[Span], length: int) -> tuple[int, int, list[Span]]:
    """Choose [start, end) of about `length` chars around the best passage."""
    i, j = _best_window(spans, length)
    first, last = spans[i][0], spans[j - 1][1]
    slack = max(0, length - (last - first))
    start = max(0, first - slack // 3)  # a little context before, more after
    end = min(len(text), start + length)
    start = max(0, min(start, end - length))
    if first < start or last > end:  # a single huge token: show its head
        start, end = first, min(len(text), first + length)
    start, end = _snap_start(text, start), _snap_end(text, end)
    if end <= start:
        end = min(len(text), start + length)
    inside = [s for s in spans if s[0] >= start and s[1] <= end]
    return start, end, inside


def _render(text: str, start: int, end: int, spans: list[Span]) -> str:
    """Escape text[start:end] and wrap the given spans in <em>."""
    out, pos = [], start
    for s, e, _ in spans:
        out.append(escape(text[pos:s]))
        out.append(f"<em>{escape(text[s:e])}</em>")
        pos = e
    out.append(escape(text[pos:end]))
    return "".join(out)


def _clean(text: str) -> str:
    """Normalize to NFC and collapse whitespace runs so windows hold words, not blanks."""
    return _SPACE_RE.sub(" ", unicodedata.normalize("NFC", text)).strip()


def _cut(text: str, spans: list[Span], length: int, cut_before: bool, cut_after: bool) -> str:
    """Snippet of one cleaned text, with `…` marks where it (or its source) was cut."""
    if len(text) <= length and not (cut_before or cut_after):
        return _render(text, 0, len(text), spans)
    budget = max(1, length - 2)  # room for the two ellipses
    if spans:
        start, end, inside = _window(text, spans, budget)
    else:
        start, end, inside = 0, _snap_end(text, budget), []
    body = _render(text, start, end, inside)
    before = ELLIPSIS if start > 0 or cut_before else ""
    return before + body + (ELLIPSIS if end < len(text) or cut_after else "")


def _scanned_matches(text: str, matcher: TermMatcher, length: int) -> list[Span]:
    """Matches in the shortest head of `text` that holds every query term, plus a look at the
    first later occurrence of a term that head lacks.

    Scanning a whole long document for every result is what makes snippets slow; most
    documents show all their terms early, so the head is read in growing pieces (each read
    once) up to HEAD_CHARS, only while terms are missing. A piece is first searched for the
    words earlier results of the same query matched (one regex pass in C); only when that
    leaves a term unseen are all its words checked. A term still missing is then looked up
    as plain text in the rest of the document, and only the stretch around it is read.
    """
    wanted = len(matcher.terms)
    spans: list[Span] = []
    start, n = 0, max(2_000, 8 * length)
    limit = min(len(text), HEAD_CHARS)
    while start < limit and len({s[2] for s in spans}) < wanted:
        end = _cut_at_space(text, start, min(n, limit))
        spans += _piece_matches(text, start, end, matcher)
        start, n = end, n * 4
    missing = set(range(wanted)) - {s[2] for s in spans}
    if missing and start < len(text):
        spans += _later_matches(text, start, missing, matcher, length)
    return spans


def _cut_at_space(text: str, start: int, n: int) -> int:
    """End of a piece near n, on a space so no word is split (or n when there is none)."""
    if n >= len(text):
        return len(text)
    end = text.rfind(" ", start + (n - start) // 2, n)
    return end if end > start else n


def _piece_matches(text: str, start: int, end: int, matcher: TermMatcher) -> list[Span]:
    """Spans in text[start:end]: the known words first, all words when that is not enough."""
    piece, known = text[start:end], matcher.known_matches()
    found: list[Span] = []
    if 0 < len(known) <= MAX_KNOWN_WORDS:
        found = _spans_of(piece, known)
    if len({s[2] for s in found}) < len(matcher.terms):
        found = find_matches(piece, matcher)
    return [(a + start, b + start, t) for a, b, t in found]


def _later_matches(text: str, start: int, missing: set[int], matcher: TermMatcher,
                   length: int) -> list[Span]:
    """Find the first plain-text occurrence past `start` of each missing term's known forms."""
    lower = text[start:].lower()
    spans: list[Span] = []
    for index in sorted(missing):
        forms = {matcher.terms[index].text} | {w.lower() for w, i in
                                                matcher.known_matches().items() if i == index}
        hits = [p for p in (lower.find(f) for f in forms) if p >= 0]
        if hits:
            lo = start + max(0, min(hits) - 2 * length)
            hi = _cut_at_space(text, lo, start + min(hits) + 2 * length)
            spans += [s for s in _piece_matches(text, lo, hi, matcher) if s not in spans]
    return sorted(spans)


def _region(text: str, matcher: TermMatcher, length: int) -> tuple[str, int, int] | None:
    """The raw slice around the best passage (with margin), so only it needs cleaning."""
    spans = _scanned_matches(text, matcher, length)
    if not spans:
        return None
    i, j = _best_window(spans, length)
    margin = 2 * length  # whitespace collapsing shrinks text; keep enough around
    lo, hi = max(0, spans[i][0] - margin), min(len(text), spans[j - 1][1] + margin)
    return text[lo:hi], lo, hi


def build_snippet(
    text: str | None, matcher: TermMatcher, length: int = 300, fallbacks: Sequence[str | None] = ()
) -> str:
    """HTML snippet of about `length` visible chars around the best match in `text`.

    When `text` has no match, the first fallback (title, basename, ...) that has one is used;
    when nothing matches, the start of `text` (or of the first non-empty fallback) is shown.
    """
    candidates = [t for t in (text, *fallbacks) if t and not t.isspace()]
    for candidate in candidates:
        region = _region(candidate, matcher, length)
        if region is not None:
            raw, lo, hi = region
            cleaned = _clean(raw)
            spans = find_matches(cleaned, matcher)
            return _cut(cleaned, spans, length, lo > 0, hi < len(candidate))
    if not candidates:
        return ""
    head = candidates[0][: 4 * length]
    return _cut(_clean(head), [], length, False, len(head) < len(candidates[0]))


def highlight_all(text: str, matcher: TermMatcher) -> str:
    """The whole text HTML-escaped with every matched word wrapped in <em> (for previews)."""
    return _render(text, 0, len(text), find_matches(text, matcher))
