"""Glob semantics of include/exclude patterns (the module docstring of webapp/indexing/globs.py)."""

from __future__ import annotations

import pytest

from webapp.indexing.globs import (
    DEFAULT_EXCLUDE,
    DEFAULT_INCLUDE,
    PatternSet,
    compile_pattern,
    validate_pattern,
)


def only(pattern: str) -> PatternSet:
    """A set that includes exactly what `pattern` matches."""
    return PatternSet(include=[pattern], exclude=[])


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.txt", "a.txt", True),
        ("*.txt", "dir/a.txt", False),  # `*` never crosses `/`
        ("docs/*", "docs/a/b.md", False),
        ("a?c", "abc", True),
        ("a?c", "a/c", False),  # `?` never matches `/`
        ("**/*.md", "readme.md", True),  # `**` matches zero directories
        ("**/*.md", "a/b/c/readme.md", True),
        ("docs/**/*.md", "docs/x.md", True),
        ("docs/**/*.md", "docs/a/b/x.md", True),
        ("docs/**/*.md", "other/docs/x.md", False),
        ("docs/**", "docs/a/b/c.txt", True),
        ("docs/**", "docsx/c.txt", False),
        ("**", "any/thing/at/all", True),
        ("a**b", "a/b", False),  # `**` inside a segment is a plain `*`
        ("a**b", "axxb", True),
        ("*.TXT", "a.txt", False),  # case-sensitive
        ("**/*.{md,txt}", "x/y.txt", True),
        ("**/*.{md,txt}", "x/y.pdf", False),
        ("{src/**/*.py,docs/*.{md,rst}}", "src/a/b.py", True),  # nested alternation with `/`
        ("{src/**/*.py,docs/*.{md,rst}}", "docs/i.rst", True),
        ("{src/**/*.py,docs/*.{md,rst}}", "docs/i.py", False),
        ("file[0-9].log", "file7.log", True),
        ("file[0-9].log", "filex.log", False),
        ("file[!0-9].log", "filex.log", True),
        ("file[!0-9].log", "file7.log", False),
        ("[]x]", "]", True),
        (r"\*.txt", "*.txt", True),
        (r"\*.txt", "a.txt", False),
        ("notes.txt", "notes.txt", True),
        ("a+b (1).txt", "a+b (1).txt", True),  # regex metacharacters are literals
        ("**/*", "dir/with\nnewline.txt", True),
        ("*", ".hidden", True),  # leading dots are not special
    ],
)
def test_pattern_matches_files(pattern: str, path: str, expected: bool) -> None:
    assert only(pattern).matches_file(path) is expected


@pytest.mark.parametrize(
    ("pattern", "fragment"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("/etc/**", "absolute"),
        ("{/etc,docs}/*", "absolute"),
        ("../secret/*", ".."),
        ("a/../../b", ".."),
        ("a/{x,..}/b", ".."),
        ("a//b", "empty"),
        ("{a,b", "unbalanced '{'"),
        ("a,b}", "unbalanced '}'"),
        ("{a,{b,c}", "unbalanced '{'"),
        ("[abc", "unbalanced '['"),
        ("[a/b]", "'/'"),
        ("[z-a]", "bad character range"),
        ("a\\", "backslash"),
    ],
)
def test_invalid_patterns_are_reported(pattern: str, fragment: str) -> None:
    message = validate_pattern(pattern)
    assert message is not None and fragment in message


def test_valid_patterns_have_no_error() -> None:
    for pattern in [*DEFAULT_INCLUDE, *DEFAULT_EXCLUDE, "docs/", "{a,{b,c}}/**/*.[ch]"]:
        assert validate_pattern(pattern) is None, pattern
    assert validate_pattern(None) == "must be a string"


def test_brace_explosion_is_refused() -> None:
    assert "too many" in validate_pattern("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")


def test_pattern_set_rejects_invalid_pattern() -> None:
    with pytest.raises(ValueError, match="absolute"):
        PatternSet(include=["/abs"], exclude=[])


def test_compiled_once() -> None:
    assert compile_pattern("**/*.md") is compile_pattern("**/*.md")


def test_exclude_overrides_include() -> None:
    patterns = PatternSet(include=["**/*.md"], exclude=["drafts/**", "**/*.bak.md"])
    assert patterns.matches_file("notes/a.md")
    assert not patterns.matches_file("drafts/a.md")
    assert not patterns.matches_file("notes/a.bak.md")
    assert not patterns.matches_file("notes/a.txt")


@pytest.mark.parametrize(
    ("exclude", "directory", "pruned"),
    [
        ("**/node_modules/**", "node_modules", True),
        ("**/node_modules/**", "a/b/node_modules", True),
        ("**/node_modules/**", "a/node_modules_x", False),
        ("**/build", "src/build", True),  # an exclude matching the directory itself
        ("build/", "build", True),  # trailing slash: everything below
        ("build/", "src/build", False),  # anchored at the root
        ("cache/*/tmp/**", "cache/x/tmp", True),
        ("cache/*/tmp/**", "cache/x/y/tmp", False),
        ("**/*.txt", "folder", False),
    ],
)
def test_excluded_directories_are_pruned(exclude: str, directory: str, pruned: bool) -> None:
    patterns = PatternSet(include=["**/*"], exclude=[exclude])
    assert patterns.prunes_dir(directory) is pruned


def test_files_below_pruned_directories_do_not_match() -> None:
    patterns = PatternSet(include=["**/*"], exclude=["**/build"])
    assert not patterns.matches_file("src/build/out.txt")
    assert patterns.matches_file("src/builder/out.txt")


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        "proj/.git/objects/ab/cdef",
        "app/node_modules/x/index.js",
        "py/__pycache__/m.cpython-311.pyc",
        ".venv/lib/site.py",
        "photos/.DS_Store",
        "share/Thumbs.db",
        "x/desktop.ini",
        ".Trash-1000/files/a.txt",
        "nas/@eaDir/a.jpg",
        "$RECYCLE.BIN/S-1-5/a.doc",
        "d/report.tmp",
        "d/.notes.md.swp",
        "d/~$report.docx",
        "d/movie.mkv.part",
        "d/setup.exe.crdownload",
        ".idea/workspace.xml",
        ".vscode/settings.json",
        "a/._photo.jpg",
    ],
)
def test_default_excludes_junk(path: str) -> None:
    assert not PatternSet().matches_file(path)


@pytest.mark.parametrize(
    "path",
    [
        "build/notes.md",
        "dist/report.pdf",
        "vendor/contract.docx",
        "target/plan.txt",
        "bin/readme.txt",
        "Documents/Tax 2025/return.pdf",
        ".bashrc",
        "lib/settings.json",
        "temp/letter.txt",
        "cache/photo.jpg",
    ],
)
def test_default_keeps_ordinary_user_folders(path: str) -> None:
    assert PatternSet().matches_file(path)


def test_none_means_defaults_and_lists_are_kept() -> None:
    patterns = PatternSet(None, None)
    assert patterns.include == DEFAULT_INCLUDE
    assert patterns.exclude == DEFAULT_EXCLUDE
    assert PatternSet(["*.md"], []).exclude == []


def test_empty_include_matches_nothing() -> None:
    assert not PatternSet(include=[], exclude=[]).matches_file("a.txt")


# -- no catastrophic backtracking -------------------------------------------------------------


def _reference(tokens: list[str], path: list[str]) -> bool:
    """Brute-force glob match of segment tokens against path segments (slow, obviously right)."""
    if not tokens:
        return not path
    head, rest = tokens[0], tokens[1:]
    if head == "**":
        if not rest:
            return len(path) >= 1
        return any(_reference(rest, path[i:]) for i in range(len(path) + 1))
    return bool(path) and _reference_segment(head, path[0]) and _reference(rest, path[1:])


def _reference_segment(glob: str, name: str) -> bool:
    if not glob:
        return not name
    if glob[0] == "*":
        return any(_reference_segment(glob[1:], name[i:]) for i in range(len(name) + 1))
    return bool(name) and glob[0] in ("?", name[0]) and _reference_segment(glob[1:], name[1:])


def test_matching_agrees_with_a_brute_force_reference() -> None:
    import random

    rng = random.Random(21)
    for _ in range(3000):
        tokens = [
            rng.choice(["**", "*", "a*", "*a*b", "?a*", "b", "*a*a*", "a?b*"])
            for _ in range(rng.randint(1, 4))
        ]
        path = ["".join(rng.choice("ab") for _ in range(rng.randint(1, 5))) for _ in range(rng.randint(1, 5))]
        pattern, relpath = "/".join(tokens), "/".join(path)
        assert only(pattern).matches_file(relpath) is _reference(tokens, path), (pattern, relpath)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("**/**/**/**/**/*a*a*a*a*b", "a" * 250),  # 17.5 s per name before
        ("**/**/**/**/**/*a*a*a*a*b", "/".join(["a" * 15] * 25)),  # 5.7 s before
        ("**/a*/**/a*/**/a*/**/a*/**/*b", "/".join(["a" * 20] * 40)),
        ("*a*a*a*a*a*a*a*a*a*a*a*a*b", "a" * 4000),
        ("**/*[a-z]?*[!b]*a*?*a*b/**", "/".join(["a" * 60] * 60)),
    ],
)
def test_hostile_names_match_in_linear_time(pattern: str, path: str) -> None:
    import time

    patterns = PatternSet(include=[pattern], exclude=[pattern])
    started = time.perf_counter()
    for _ in range(10):
        assert not patterns.matches_file(path)
        patterns.prunes_dir(path)
    assert time.perf_counter() - started < 0.5


def test_a_class_range_spanning_slash_stays_in_its_segment() -> None:
    assert not only("a[#-0]b").matches_file("a/b")
    assert only("a[#-0]b").matches_file("a$b")
