"""HTML snippets: a window around the best passage with matched words in <em>, all else escaped."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache
from html import escape

from webapp.search.query import CJK_RE, TOKEN_RE, TermMatcher, is_cjk
from webapp.search.tidy import tidy

ELLIPSIS = "…"
_DIGIT_RE = re.compile(r"\d")
_LETTER_RE = re.compile(r"[^\W\d_]")
# Passages are found by the query's words and the words earlier results matched, when few.
MAX_FORMS = 16
# Past this many matches, a text still lacking a term skips ahead to that term's forms.
MAX_SPANS = 200
MAX_CHUNK = 256_000  # a text is lower-cased and searched this many characters at a time
# Every word of this head of a text is read while a missing term has matched nothing yet.
HEAD_CHARS = 4_000
HEAD_READS = 3  # heads read word by word for a term before it is taken to be elsewhere
# How far (in characters) a window edge may move to avoid cutting a word in half.
_WORD_SNAP = 20

Span = tuple[int, int, int]  # start, end, index of the query term matched
# Bidi embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI FSI PDI): a window cut
# out of a text loses the ones that close them, and one left open (an RLO) turns the rest of
# the snippet around; the page isolates each snippet, and a snippet reads in logical order.
_BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069]")


@lru_cache(maxsize=8192)  # called for every candidate match: a dict hit beats two regexes
def _char_class(char: str) -> str:
    """Tokenizer class of a character: 'd' digit, 'c' CJK letter, 'l' letter, '' separator."""
    if _DIGIT_RE.match(char):
        return "d"
    if CJK_RE.match(char):
        return "c"
    return "l" if _LETTER_RE.match(char) else ""


def _is_whole_token(text: str, start: int, end: int) -> bool:
    """True when text[start:end] is a complete token, not a piece of a longer one."""
    if start > 0 and _char_class(text[start - 1]) == _char_class(text[start]):
        return False
    return end >= len(text) or _char_class(text[end]) != _char_class(text[end - 1])


def find_matches(text: str, matcher: TermMatcher) -> list[Span]:
    """Character spans of every word in `text` that the matcher accepts, in text order."""
    return _with_cjk(text, matcher, _spans_of(text, matcher.match_many(set(TOKEN_RE.findall(text)))))


def _with_cjk(text: str, matcher: TermMatcher, spans: list[Span]) -> list[Span]:
    """The spans plus every occurrence of the query's CJK runs, also inside longer runs
    (`说明书` in `募集说明书`: CJK text has no spaces between words); overlaps dropped."""
    cjk = [(i, t.text) for i, t in enumerate(matcher.terms) if is_cjk(t.text)]
    if not cjk:
        return spans
    found = set(spans)
    for index, run in cjk:
        at = text.find(run)
        while at >= 0:
            found.add((at, at + len(run), index))
            at = text.find(run, at + len(run))
    out: list[Span] = []
    for span in sorted(found):
        if not out or span[0] >= out[-1][1]:
            out.append(span)
    return out


def _spans_of(text: str, matched: dict[str, int]) -> list[Span]:
    """Spans of whole-token occurrences of these surface words (word -> term index)."""
    spans = []
    for word, term in matched.items():
        at = text.find(word)
        while at >= 0:
            if _is_whole_token(text, at, at + len(word)):
                spans.append((at, at + len(word), term))
            at = text.find(word, at + 1)
    return sorted(spans)


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


def _window(text: str, spans: list[Span], length: int) -> tuple[int, int]:
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
    return start, end


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
    """Normalize to NFC, drop the bidi controls and collapse whitespace runs so windows hold
    words, not blanks."""
    return " ".join(_BIDI_CONTROLS.sub("", unicodedata.normalize("NFC", text)).split())


def _cut(text: str, matcher: TermMatcher, length: int, cut_before: bool, cut_after: bool) -> str:
    """Snippet of one cleaned text, with `…` marks where it (or its source) was cut. The
    passage is chosen by the known forms; every match inside it is marked."""
    if len(text) <= length and not (cut_before or cut_after):
        start, end = 0, len(text)
    else:
        # (every word is read only when too many forms left the region's match out)
        spans = _with_cjk(text, matcher, _known_form_matches(text, matcher, None)) or find_matches(
            text, matcher
        )
        budget = max(1, length - 2)  # room for the two ellipses
        start, end = _window(text, spans, budget) if spans else (0, _snap_end(text, budget))
    body = _render(text, start, end, _matches_in(text, start, end, matcher))
    before = ELLIPSIS if start > 0 or cut_before else ""
    return before + body + (ELLIPSIS if end < len(text) or cut_after else "")


def _scanned_matches(text: str, matcher: TermMatcher, length: int, short: bool) -> list[Span]:
    """Matches to choose the passage from: the query's known forms anywhere in `text`, plus
    every word of the head of `text` when a term is missing and has matched no word yet (or
    the text is a `short` one: a title, a file name).

    Tokenizing and matching every word of a long document for each result is what made
    snippets slow. Known forms are the query's own words and the surface words earlier
    results matched; finding them is a plain-text search in C. Reading word by word is
    how a term's other forms (typos, accents) are learnt: it is done on the first
    HEAD_CHARS characters, for terms that can have forms the known ones miss (typo forms, or
    accented letters in a head that is not plain ASCII), and only until that term has
    matched a word in some text
    (after that, a text without any known form of it most likely matched by its name) or
    HEAD_READS heads have not shown it (a long question holds words most texts lack).
    """
    spans = _with_cjk(text, matcher, _known_form_matches(text, matcher, stop_after=length))
    missing = set(range(len(matcher.terms))) - {s[2] for s in spans}
    head_text = text[: _cut_at_space(text, 0, HEAD_CHARS)]
    if not short and head_text.isascii():  # only typos teach forms that known ones miss
        missing = {i for i in missing if matcher.terms[i].typos}
    if missing and (short or missing - matcher.seen_terms() - matcher.unseen_terms(HEAD_READS)):
        head = find_matches(head_text, matcher)
        spans = sorted(set(spans).union(head))
        if not short:
            matcher.note_unseen(missing - {s[2] for s in spans})
    return spans


def _known_form_matches(text: str, matcher: TermMatcher, stop_after: int | None) -> list[Span]:
    """Whole-token matches that start with a known form, read in growing chunks; with
    `stop_after`, reading ends that many characters after every term has been seen."""
    forms, wanted, whole = matcher.known_forms(), len(matcher.terms), matcher.whole_words()
    if not forms:
        return []
    if len(forms) > MAX_FORMS:  # each form is one more pass: keep the query's own words
        forms = frozenset(t.text for t in matcher.terms if t.text)
    spans: list[Span] = []
    seen: set[int] = set()
    stop, start, size = len(text), 0, 4_000
    while start < stop:
        end = _cut_at_space(text, start, start + size)
        for s in _form_starts(forms, text, start, end, whole):
            if s >= stop:
                break
            word = TOKEN_RE.match(text, s).group()  # the whole token from this start
            term = matcher.match(word)
            if term is None:
                continue
            spans.append((s, s + len(word), term))
            if term not in seen:
                seen.add(term)
                if stop_after is not None and len(seen) == wanted:
                    stop = min(stop, s + len(word) + stop_after)
        start, size = end, min(size * 4, MAX_CHUNK)
        if stop_after is not None and len(spans) >= MAX_SPANS and len(seen) < wanted:
            # Many matches and a term still missing: jump to the next form of a missing term
            # (its neighbourhood is then read with every form, for a passage holding both).
            missing = frozenset(f for f in forms if matcher.match(f) not in seen)
            at = _next_form_start(missing, text, start, whole)
            if at is None:
                break
            start, size = max(start, _cut_at_space(text, start, at - stop_after)), 4_000
    return spans


def _next_form_start(
    forms: frozenset[str], text: str, start: int, whole: frozenset[str] = frozenset()
) -> int | None:
    """The first position from `start` where a token starts with one of the forms."""
    while forms and start < len(text):
        end = _cut_at_space(text, start, start + MAX_CHUNK)
        found = _form_starts(forms, text, start, end, whole)
        if found:
            return found[0]
        start = end
    return None


def _form_starts(
    forms: frozenset[str], text: str, start: int, end: int, whole: frozenset[str] = frozenset()
) -> list[int]:
    """Positions in text[start:end], in order, where a token starts with one of the forms
    (substring search in C; the forms are lower case and none begins another), or is one of
    the `whole` forms."""
    chunk = text[start:end]
    if chunk.isascii() or not all(f.isascii() for f in forms):
        lowered = chunk.lower()
        if len(lowered) != len(chunk):  # U+0130 is the one letter whose lower case is longer
            lowered = chunk.replace("\u0130", "I").lower()
        found = sorted(at for at, _ in _find_forms(lowered, {f: f for f in forms}, whole))
    else:
        # Lower-casing a text that holds any non-ASCII letter took 9 times as long as an
        # ASCII one (most of a long snippet's time): ASCII forms are found in the text's
        # UTF-8 bytes instead, whose ASCII letters bytes.lower() lowers at C speed.
        raw = chunk.encode("utf-8", "surrogatepass").lower()
        hits = sorted(_find_forms(raw, {f.encode(): f for f in forms}, whole))
        found = _char_offsets(raw, hits)
        found = [
            at
            for at, (_, form) in zip(found, hits, strict=True)
            if form not in whole or _is_whole_token(chunk, at, at + len(form))
        ]
    return [
        start + at
        for at in found
        if start + at == 0 or _char_class(text[start + at - 1]) != _char_class(chunk[at])
    ]


def _find_forms(haystack: str | bytes, forms: dict, whole: frozenset[str]) -> list:
    """(offset, form) of every occurrence in `haystack` of the forms (keys: the forms as
    `haystack` holds them, str or bytes; values: the forms), the `whole` ones as tokens."""
    found = []
    for needle, form in forms.items():
        if form in whole:
            found.extend(
                (m.start(), form) for m in _whole_token(form, type(haystack) is bytes).finditer(haystack)
            )
            continue
        at = haystack.find(needle)
        while at >= 0:
            found.append((at, form))
            at = haystack.find(needle, at + len(needle))
    return found


def _char_offsets(raw: bytes, hits: list[tuple[int, str]]) -> list[int]:
    """Character offsets of sorted byte offsets (each at the start of an ASCII character)."""
    out, byte, char = [], 0, 0
    for at, _ in hits:
        char += len(raw[byte:at].decode("utf-8", "surrogatepass"))
        byte = at
        out.append(char)
    return out


@lru_cache(maxsize=256)
def _whole_token(word: str, binary: bool = False) -> re.Pattern:
    """A regex for `word` as a whole token (letters or digits, as the tokenizer splits):
    the word first, its surroundings checked after, which lets the search run at C speed.
    (`binary`: for UTF-8 bytes, where only ASCII letters are told apart.)"""
    run = r"\d" if word.isdigit() else r"[^\W\d_]"
    pattern = f"{re.escape(word)}(?<!{run}.{{{len(word)}}})(?!{run})"
    return re.compile(pattern.encode() if binary else pattern)


def _cut_at_space(text: str, start: int, n: int) -> int:
    """End of a piece near n, on a space so no word is split (or n when there is none)."""
    if n >= len(text):
        return len(text)
    end = text.rfind(" ", start + (n - start) // 2, n)
    return end if end > start else n


def _matches_in(text: str, start: int, end: int, matcher: TermMatcher) -> list[Span]:
    """Every matching whole token inside text[start:end] (a word cut by an edge is none)."""
    return [
        (a + start, b + start, t)
        for a, b, t in find_matches(text[start:end], matcher)
        if _is_whole_token(text, a + start, b + start) or _char_class(text[a + start]) == "c"
    ]


def _region(text: str, matcher: TermMatcher, length: int, short: bool) -> tuple[str, int, int] | None:
    """The raw slice around the best passage (with margin), so only it needs cleaning."""
    spans = _scanned_matches(text, matcher, length, short)
    if not spans:
        return None
    i, j = _best_window(spans, length)
    margin = 2 * length  # whitespace collapsing shrinks text; keep enough around
    lo, hi = max(0, spans[i][0] - margin), min(len(text), spans[j - 1][1] + margin)
    return text[lo:hi], lo, hi


def build_snippet(
    text: str | None,
    matcher: TermMatcher,
    length: int = 300,
    fallbacks: Sequence[str | None] = (),
    kind: str | None = None,
) -> str:
    """HTML snippet of about `length` visible chars around the best match in `text`.

    When `text` has no match, the first fallback (title, basename, ...) that has one is used;
    when nothing matches, the start of `text` (or of the first non-empty fallback) is shown.
    The text of a document of type `kind` is tidied first (tidy()): a snippet shows words,
    not Markdown markup or `Width: 800` metadata lines; a text only of those shows none.
    """
    candidates = [t for t in (text, *fallbacks) if t and not t.isspace()]
    for candidate in candidates:
        region = _region(candidate, matcher, length, short=candidate is not text)
        if region is not None:
            raw, lo, hi = region
            cleaned = _clean(tidy(raw, kind) if candidate is text else raw)
            if cleaned:
                return _cut(cleaned, matcher, length, lo > 0, hi < len(candidate))
    if not candidates:
        return ""
    head = candidates[0][: 4 * length]
    cleaned = _clean(tidy(head, kind) if candidates[0] is text else head)
    return _cut(cleaned, matcher, length, False, len(head) < len(candidates[0])) if cleaned else ""


def highlight_all(text: str, matcher: TermMatcher) -> str:
    """The whole text HTML-escaped with every matched word wrapped in <em> (for previews)."""
    return _render(text, 0, len(text), find_matches(text, matcher))
