"""Include/exclude glob patterns of a source, compiled once to regular expressions.

Semantics: patterns are relative to the source root,
`/`-separated and case-sensitive. `*` and `?` never cross `/`; `**` as a whole segment matches
zero or more whole directories (a trailing `/**` matches everything below); `{a,b}`
alternation may nest; `[abc]`, `[a-z]`, `[!abc]` are character classes; `\\x` is a literal x.
A trailing `/` means "everything below this directory" (`build/` == `build/**`).

Like `.gitignore`, an exclude pattern that matches a directory prunes it: `**/build` and
`**/node_modules/**` both stop the walk at such a directory, so nothing below it is visited.
Leading dots are not special: `*` matches `.bashrc`.

Matching cannot backtrack catastrophically, whatever the pattern and the names (a
backtracking `**/**/**/**/**/*a*a*a*a*b` took 17 s per name of 250 `a`s). Between two `*` of a
segment, and between two `**` of a pattern, the pieces have a fixed length, so the leftmost
place where a piece matches is as good as any later one (the classic greedy wildcard match).
Each such piece is an atomic group `(?>...)` found lazily; only the last `*`/`**` backtracks,
over characters of one name or over whole segments, so a match costs about
(path length x pattern length) steps and patterns need no complexity limit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

DEFAULT_INCLUDE: list[str] = ["**/*"]

# Only names that are never a user's own folder of documents: "build", "dist", "target",
# "vendor", "bin" and the like are ordinary folder names, so they are left to the user.
DEFAULT_EXCLUDE: list[str] = [
    # version control
    "**/.git/**",
    "**/.hg/**",
    "**/.svn/**",
    "**/.bzr/**",
    # dependencies, caches and build by-products of tools
    "**/node_modules/**",
    "**/.venv/**",
    "**/venv/**",
    "**/__pycache__/**",
    "**/.tox/**",
    "**/.mypy_cache/**",
    "**/.pytest_cache/**",
    "**/.ruff_cache/**",
    "**/.gradle/**",
    "**/.next/**",
    "**/.nuxt/**",
    "**/*.egg-info/**",
    "**/*.pyc",
    "**/*.pyo",
    # IDE
    "**/.idea/**",
    "**/.vscode/**",
    # OS junk
    "**/.DS_Store",
    "**/._*",
    "**/Thumbs.db",
    "**/desktop.ini",
    "**/.Trash-*/**",
    "**/.Trashes/**",
    "**/@eaDir/**",
    "**/$RECYCLE.BIN/**",
    "**/.Spotlight-V100/**",
    "**/.fseventsd/**",
    "**/System Volume Information/**",
    "**/lost+found/**",
    # temporary and partial files
    "**/*.tmp",
    "**/*.swp",
    "**/*.swo",
    "**/~$*",
    "**/.~lock.*#",
    "**/*.part",
    "**/*.crdownload",
]

MAX_ALTERNATIVES = 256  # brace expansion limit per pattern, so one pattern cannot explode

_SEGMENT_ANY = "[^/]"
_ANY_SEGMENT = "[^/]++"  # one whole non-empty segment, never given back


class GlobError(ValueError):
    """A glob pattern is invalid; the message says why."""


@dataclass(frozen=True, slots=True)
class CompiledPattern:
    """One validated pattern: its brace-free alternatives, each a tuple of segments."""

    pattern: str
    alternatives: tuple[tuple[str, ...], ...]


def validate_pattern(pattern: object) -> str | None:
    """Return why `pattern` is not a valid glob, or None when it is."""
    if not isinstance(pattern, str):
        return "must be a string"
    try:
        compile_pattern(pattern)
    except GlobError as exc:
        return str(exc)
    return None


@lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> CompiledPattern:
    """Validate and split one pattern (cached); raise GlobError when it is invalid."""
    if not pattern.strip():
        raise GlobError("pattern must not be empty")
    alternatives = tuple(tuple(_split(alt, pattern)) for alt in _expand_braces(pattern))
    try:
        for segments in alternatives:
            re.compile(_segments_regex(segments))
    except re.error as exc:
        raise GlobError(f"invalid pattern '{pattern}': {exc.msg}") from None
    return CompiledPattern(pattern, alternatives)


def _split(alt: str, pattern: str) -> list[str]:
    """Split one brace-free alternative into segments, rejecting unsafe shapes."""
    if alt.startswith("/"):
        raise GlobError(f"pattern '{pattern}' must be relative to the root, not absolute")
    if alt.endswith("/"):
        alt += "**"
    segments = alt.split("/")
    for seg in segments:
        if seg == "..":
            raise GlobError(f"pattern '{pattern}' must not contain '..' segments")
        if seg in ("", "."):
            raise GlobError(f"pattern '{pattern}' has an empty or '.' path segment")
    return segments


def _segments_regex(segments: Sequence[str]) -> str:
    """Regex source for a list of segments (`**` segments span directories).

    No catastrophic backtracking: the segments between two `**` must match
    consecutive path segments, and the first place they do is as good as any later one, so
    each such group sits in an atomic group `(?>...)` found lazily; only the last group
    backtracks, over whole segments.
    """
    trailing = segments[-1] == "**"  # matches one or more whole segments
    groups: list[list[str]] = [[]]
    for seg in segments[:-1] if trailing else segments:
        if seg == "**":
            if groups[-1] or len(groups) == 1:
                groups.append([])  # `**/**` is one `**`
        else:
            groups[-1].append(seg)
    if len(groups) > 1 and not groups[-1]:
        groups.pop()  # `x/**/**` at the end: the trailing `**` covers it
    parts: list[str] = []
    for i, group in enumerate(groups):
        last = i == len(groups) - 1
        text = "/".join(_segment_regex(seg) for seg in group)
        if group and not (last and not trailing):
            text += "/"
        if i == 0:
            parts.append(text)
        elif last:
            parts.append(f"(?:{_ANY_SEGMENT}/)*{text}")
        else:
            parts.append(f"(?>(?:{_ANY_SEGMENT}/)*?{text})")
    if trailing:
        parts.append(f"{_ANY_SEGMENT}(?:/{_ANY_SEGMENT})*+")
    return "".join(parts)


def _segment_regex(seg: str) -> str:
    """Regex source for one segment: `*`, `?`, classes, escapes, literals.

    Between two `*` the pieces have fixed length, so the leftmost place of each is as good as
    any later one: each sits in an atomic group found lazily and only the last `*` backtracks.
    """
    pieces = _star_pieces(seg)
    if len(pieces) == 1:
        return pieces[0]
    middle = "".join(f"(?>{_SEGMENT_ANY}*?{piece})" for piece in pieces[1:-1] if piece)
    return f"{pieces[0]}{middle}{_SEGMENT_ANY}*{pieces[-1]}"


def _star_pieces(seg: str) -> list[str]:
    """The regex sources of the fixed-length pieces between the `*` of one segment."""
    pieces: list[str] = [""]
    i = 0
    while i < len(seg):
        c = seg[i]
        if c == "*":
            if pieces[-1] or len(pieces) == 1:
                pieces.append("")  # `**` inside a segment is one `*`
        elif c == "?":
            pieces[-1] += _SEGMENT_ANY
        elif c == "[":
            end = _class_end(seg, i)
            pieces[-1] += _class_regex(seg[i + 1 : end])
            i = end
        elif c == "\\":
            if i + 1 == len(seg):
                raise GlobError(f"segment '{seg}' ends with a lone backslash")
            i += 1
            pieces[-1] += re.escape(seg[i])
        else:
            pieces[-1] += re.escape(c)
        i += 1
    return pieces


def _class_end(text: str, start: int) -> int:
    """Index of the `]` closing the class that opens at `start`."""
    i = start + 1
    if i < len(text) and text[i] in "!^":
        i += 1
    if i < len(text) and text[i] == "]":
        i += 1  # a leading `]` is a literal member
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == "]":
            return i
        if text[i] == "/":
            raise GlobError("a character class must not contain '/'")
        i += 1
    raise GlobError(f"unbalanced '[' in '{text}'")


def _class_regex(body: str) -> str:
    """Regex class for the text between `[` and `]`; it never matches `/`."""
    negate = body[:1] in ("!", "^")
    if negate:
        body = body[1:]
    members: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            i += 1
            members.append(re.escape(body[i]))
        elif c == "-" and 0 < i < len(body) - 1:
            members.append("-")  # a range between its neighbours
        else:
            members.append(re.escape(c) if c != "-" else r"\-")
        i += 1
    # a range such as `[#-0]` spans `/`: the look-ahead keeps a class inside its segment
    return f"[^/{''.join(members)}]" if negate else f"(?!/)[{''.join(members)}]"


def _expand_braces(pattern: str) -> list[str]:
    """Expand `{a,b}` alternation (nested allowed) into brace-free alternatives."""
    results, _ = _parse_sequence(pattern, 0, 0)
    return results


def _parse_sequence(text: str, i: int, depth: int) -> tuple[list[str], int]:
    """Parse until `,`/`}` closes the current brace level (or the end at depth 0)."""
    results = [""]
    while i < len(text):
        c = text[i]
        if c in ",}" and depth > 0:
            return results, i
        if c == "}":
            raise GlobError(f"unbalanced '}}' in '{text}'")
        if c == "{":
            alternatives, i = _parse_alternatives(text, i + 1, depth + 1)
            results = [r + a for r in results for a in alternatives]
            if len(results) > MAX_ALTERNATIVES:
                raise GlobError(f"pattern '{text}' expands to too many alternatives")
            continue
        if c == "[":
            end = _class_end(text, i) + 1
        elif c == "\\":
            end = i + 2
        else:
            end = i + 1
        results = [r + text[i:end] for r in results]
        i = end
    if depth > 0:
        raise GlobError(f"unbalanced '{{' in '{text}'")
    return results, i


def _parse_alternatives(text: str, i: int, depth: int) -> tuple[list[str], int]:
    """Parse `a,b,c}` after an opening brace; return the alternatives and the next index."""
    alternatives: list[str] = []
    while True:
        sequence, i = _parse_sequence(text, i, depth)
        alternatives.extend(sequence)
        if text[i] == "}":
            return alternatives, i + 1
        i += 1  # skip the comma


class _Matcher:
    """Alternatives split into basename-only regexes (fast) and full-path regexes."""

    def __init__(self, alternatives: Sequence[Sequence[str]]) -> None:
        base = [_segment_regex(a[1]) for a in alternatives if _is_basename_only(a)]
        full = [_segments_regex(a) for a in alternatives if not _is_basename_only(a)]
        self._base = _combine(base)
        self._full = _combine(full)

    def fullmatch(self, relpath: str) -> bool:
        """True when any alternative matches the whole relative path."""
        if self._base is not None and self._base.fullmatch(relpath.rpartition("/")[2]):
            return True
        return self._full is not None and self._full.fullmatch(relpath) is not None


def _is_basename_only(segments: Sequence[str]) -> bool:
    """`**/<name glob>` depends on the last path segment only."""
    return len(segments) == 2 and segments[0] == "**" and segments[1] != "**"


def _combine(sources: Sequence[str]) -> re.Pattern[str] | None:
    """One regex that matches when any of the given regex sources matches."""
    if not sources:
        return None
    return re.compile("|".join(f"(?:{s})" for s in dict.fromkeys(sources)))


def _exclude_alternatives(patterns: Sequence[CompiledPattern]) -> tuple[list, list]:
    """Split exclude alternatives into file-level ones and directory-pruning ones.

    `P/**` excludes exactly the files below a directory matching P, so it becomes a pruning
    rule for P only; every other alternative excludes matching files and prunes matching dirs.
    """
    files: list[tuple[str, ...]] = []
    dirs: list[tuple[str, ...]] = []
    for compiled in patterns:
        for segments in compiled.alternatives:
            if len(segments) > 1 and segments[-1] == "**":
                dirs.append(segments[:-1])
            else:
                files.append(segments)
                dirs.append(segments)
    return files, dirs


class PatternSet:
    """A source's include and exclude patterns, ready for fast matching."""

    def __init__(self, include: Sequence[str] | None = None, exclude: Sequence[str] | None = None) -> None:
        self.include = list(DEFAULT_INCLUDE if include is None else include)
        self.exclude = list(DEFAULT_EXCLUDE if exclude is None else exclude)
        included = [compile_pattern(p) for p in self.include]
        files, dirs = _exclude_alternatives([compile_pattern(p) for p in self.exclude])
        self._include = _Matcher([a for c in included for a in c.alternatives])
        self._exclude = _Matcher(files)
        self._prune = _Matcher(dirs)

    def prunes_dir(self, reldir: str) -> bool:
        """True when an exclude matches this directory, so the walk must not enter it."""
        return self._prune.fullmatch(reldir)

    def matches_file(self, relpath: str, *, check_parents: bool = True) -> bool:
        """True when the file is included, not excluded and under no pruned directory.

        The walk passes check_parents=False: it has already pruned excluded directories.
        """
        if not self._include.fullmatch(relpath) or self._exclude.fullmatch(relpath):
            return False
        if check_parents:
            parts = relpath.split("/")[:-1]
            for depth in range(1, len(parts) + 1):
                if self.prunes_dir("/".join(parts[:depth])):
                    return False
        return True
