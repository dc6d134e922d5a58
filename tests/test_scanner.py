"""The scanning core: walking a real tree, change detection and document ids."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from webapp.indexing.globs import PatternSet
from webapp.indexing.scanner import (
    NOT_UTF8,
    FileStat,
    RootUnavailable,
    check_root,
    covering,
    diff,
    doc_id,
    path_hash,
    walk,
    walk_paths,
)


class Errors(list):
    """Collects on_error calls as (path, message) pairs."""

    def __call__(self, path: str, message: str) -> None:
        self.append((path, message))


def make_tree(root: Path, files: dict[str, str]) -> None:
    """Create files (and their directories) below root."""
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def relpaths(root: Path, patterns: PatternSet | None = None, errors: Errors | None = None) -> list[str]:
    """Relative paths the walk yields, in walk order."""
    found = walk(str(root), patterns or PatternSet(), errors if errors is not None else Errors())
    return [f.relpath for f in found]


def test_walk_yields_selected_files_with_stats(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            "b.txt": "bb",
            "a.md": "a",
            "sub/c.md": "ccc",
            "sub/deep/d.md": "",
            ".git/HEAD": "ref",
            "node_modules/x/i.js": "1",
            "sub/t.tmp": "t",
        },
    )
    os.utime(tmp_path / "a.md", ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    found = {f.relpath: f for f in walk(str(tmp_path), PatternSet(), Errors())}
    assert sorted(found) == ["a.md", "b.txt", "sub/c.md", "sub/deep/d.md"]
    a = found["a.md"]
    assert a.path == str(tmp_path / "a.md")
    assert (a.size, a.mtime_ns) == (1, 1_700_000_000_123_456_789)
    assert found["sub/c.md"].size == 3


def test_walk_order_is_files_then_subdirectories_by_name(tmp_path: Path) -> None:
    make_tree(tmp_path, {"z.txt": "", "a/2.txt": "", "a/1.txt": "", "b/x.txt": "", "m.txt": ""})
    assert relpaths(tmp_path) == ["m.txt", "z.txt", "a/1.txt", "a/2.txt", "b/x.txt"]


def test_include_and_exclude_patterns_apply(tmp_path: Path) -> None:
    make_tree(tmp_path, {"docs/a.md": "", "docs/b.txt": "", "docs/drafts/c.md": "", "x.md": ""})
    patterns = PatternSet(include=["docs/**/*.md"], exclude=["**/drafts/**"])
    assert relpaths(tmp_path, patterns) == ["docs/a.md"]


def test_excluded_directory_is_never_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tree(tmp_path, {"keep/a.txt": "", "node_modules/pkg/index.js": ""})
    for i in range(200):
        make_tree(tmp_path, {f"node_modules/pkg{i}/lib/m.js": ""})
    listed: list[str] = []
    real_scandir = os.scandir

    def spy(path: str = ".") -> Iterator[os.DirEntry[str]]:
        listed.append(os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    assert relpaths(tmp_path) == ["keep/a.txt"]
    assert not [p for p in listed if "node_modules" in p]
    assert str(tmp_path / "keep") in listed


def test_directory_matching_exclude_without_globstar_is_pruned(tmp_path: Path) -> None:
    make_tree(tmp_path, {"src/build/out.txt": "", "src/main.txt": "", "build.txt": ""})
    patterns = PatternSet(include=["**/*"], exclude=["**/build"])
    assert relpaths(tmp_path, patterns) == ["build.txt", "src/main.txt"]


def test_symlinked_directories_are_not_followed(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a/file.txt": "x"})
    (tmp_path / "a" / "loop").symlink_to(tmp_path)  # a cycle back to the root
    (tmp_path / "a" / "self").symlink_to(tmp_path / "a")
    outside = Path(tempfile.mkdtemp())
    try:
        (outside / "secret.txt").write_text("outside")
        (tmp_path / "escape").symlink_to(outside)
        errors = Errors()
        assert relpaths(tmp_path, errors=errors) == ["a/file.txt"]
        assert errors == []
    finally:
        shutil.rmtree(outside)


def test_symlinked_files_only_inside_the_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make_tree(root, {"real/data.txt": "12345"})
    (tmp_path / "outside.txt").write_text("secret")
    (root / "inside-link.txt").symlink_to(root / "real" / "data.txt")
    (root / "relative-link.txt").symlink_to("real/data.txt")
    (root / "outside-link.txt").symlink_to(tmp_path / "outside.txt")
    (root / "dotdot-link.txt").symlink_to("../outside.txt")
    (root / "dangling.txt").symlink_to(root / "missing.txt")
    errors = Errors()
    found = {f.relpath: f for f in walk(str(root), PatternSet(), errors)}
    assert sorted(found) == ["inside-link.txt", "real/data.txt", "relative-link.txt"]
    assert found["inside-link.txt"].size == 5  # the target's size, under the link's own path
    assert found["inside-link.txt"].path == str(root / "inside-link.txt")
    assert errors == []


def test_vanished_directory_is_reported_and_skipped(tmp_path: Path) -> None:
    make_tree(tmp_path, {"first.txt": "", "gone/x.txt": "", "kept/y.txt": ""})
    errors = Errors()
    walker = walk(str(tmp_path), PatternSet(), errors)
    assert next(walker).relpath == "first.txt"
    shutil.rmtree(tmp_path / "gone")  # deleted after its parent was listed
    assert [f.relpath for f in walker] == ["kept/y.txt"]
    assert errors == [(str(tmp_path / "gone"), "Directory vanished during the scan")]


def test_directory_replaced_by_file_is_reported(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.txt": "", "b/x.txt": ""})
    errors = Errors()
    walker = walk(str(tmp_path), PatternSet(), errors)
    next(walker)
    shutil.rmtree(tmp_path / "b")
    (tmp_path / "b").write_text("now a file")
    assert list(walker) == []
    assert errors[0][0] == str(tmp_path / "b")
    assert errors[0][1].startswith("Directory cannot be read")


def _walk_as_nobody(root: str) -> dict:
    """Walk `root` in a child process running as user nobody (root ignores chmod 000)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        status = 1
        try:
            os.close(read_fd)
            os.setgid(65534)
            os.setuid(65534)
            errors = Errors()
            files = [f.relpath for f in walk(root, PatternSet(), errors)]
            os.write(write_fd, json.dumps({"files": files, "errors": errors}).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, "child walk failed"
    return json.loads(data)


def test_unreadable_directory_is_reported_and_skipped() -> None:
    base = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        base.chmod(0o755)
        make_tree(base, {"open/a.txt": "", "secret/b.txt": "", "z.txt": ""})
        (base / "secret").chmod(0o000)
        if os.geteuid() == 0:
            result = _walk_as_nobody(str(base))
        else:
            errors = Errors()
            result = {"files": relpaths(base, errors=errors), "errors": errors}
        assert result["files"] == ["z.txt", "open/a.txt"]
        assert [tuple(e) for e in result["errors"]] == [
            (str(base / "secret"), "Permission denied: directory is not readable")
        ]
    finally:
        (base / "secret").chmod(0o755)
        shutil.rmtree(base)


def test_missing_or_unusable_root_raises(tmp_path: Path) -> None:
    assert check_root(str(tmp_path)) is None
    with pytest.raises(RootUnavailable, match="does not exist"):
        list(walk(str(tmp_path / "nope"), PatternSet(), Errors()))
    (tmp_path / "file").write_text("")
    assert "not a directory" in check_root(str(tmp_path / "file"))


def test_deep_tree(tmp_path: Path) -> None:
    deep = tmp_path
    for i in range(200):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "bottom.txt").write_text("found me")
    found = list(walk(str(tmp_path), PatternSet(), Errors()))
    assert len(found) == 1
    assert found[0].relpath.count("/") == 200
    assert found[0].relpath.endswith("d199/bottom.txt")


def test_odd_but_valid_names(tmp_path: Path) -> None:
    names = [
        "line\nbreak.txt",
        "tab\tname.txt",
        " lead space.txt",
        "日本語.txt",
        "é-nfc.txt",
        "e\u0301-nfd.txt",
        "[x]{y}*?.txt",
        "back\\slash.txt",
    ]
    for name in names:
        (tmp_path / name).write_text("x")
    assert sorted(relpaths(tmp_path)) == sorted(names)


def test_invalid_utf8_names_are_reported_and_skipped(tmp_path: Path) -> None:
    root = os.fsencode(tmp_path)
    os.mkdir(root + b"/bad\xffdir")
    with open(root + b"/bad\xffdir/inner.txt", "wb") as handle:
        handle.write(b"x")
    with open(root + b"/latin1-caf\xe9.txt", "wb") as handle:
        handle.write(b"x")
    (tmp_path / "good.txt").write_text("x")
    errors = Errors()
    assert relpaths(tmp_path, errors=errors) == ["good.txt"]
    assert sorted(errors) == [
        (f"{tmp_path}/bad\ufffddir", NOT_UTF8),
        (f"{tmp_path}/latin1-caf\ufffd.txt", NOT_UTF8),
    ]
    json.dumps(errors)  # reported paths are storable


def test_special_files_are_skipped_silently(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.txt")
    (tmp_path / "real.txt").write_text("x")
    errors = Errors()
    assert relpaths(tmp_path, errors=errors) == ["real.txt"]
    assert errors == []


def test_walk_finds_every_one_of_many_files(tmp_path: Path) -> None:
    """(Its speed is measured by the benchmark's unchanged rescan, not asserted here.)"""
    for d in range(40):
        sub = tmp_path / f"dir{d}"
        sub.mkdir()
        for i in range(250):
            (sub / f"file{i}.txt").touch()
    found = [f.relpath for f in walk(str(tmp_path), PatternSet(), Errors())]
    assert len(found) == len(set(found)) == 10_000


def stat(path: str, size: int = 1, mtime_ns: int = 1000) -> FileStat:
    """A FileStat for change-detection tests."""
    return FileStat(path, len(path) - len(path.lstrip("/")), size, mtime_ns)


def test_diff_classifies_every_file() -> None:
    records = {"/r/same": (1, 1000), "/r/bigger": (1, 1000), "/r/touched": (1, 1000), "/r/gone": (1, 1000)}
    disk = [stat("/r/same"), stat("/r/bigger", size=2), stat("/r/touched", mtime_ns=1001), stat("/r/fresh")]
    changes = diff(disk, records)
    assert [f.path for f in changes.new] == ["/r/fresh"]
    assert sorted(f.path for f in changes.modified) == ["/r/bigger", "/r/touched"]
    assert changes.unchanged == 1 and changes.scanned == 4
    assert changes.deleted == ["/r/gone"]
    assert records == {}  # consumed: a million-file rescan keeps no second copy
    assert [f.path for f in changes.to_index] == ["/r/fresh", "/r/bigger", "/r/touched"]


def test_diff_full_rebuilds_known_files() -> None:
    changes = diff([stat("/r/a"), stat("/r/b")], {"/r/a": (1, 1000), "/r/c": (1, 1000)}, full=True)
    assert [f.path for f in changes.new] == ["/r/b"]
    assert [f.path for f in changes.modified] == ["/r/a"]
    assert changes.unchanged == 0
    assert changes.deleted == ["/r/c"]


def test_diff_retries_listed_paths_even_when_unchanged() -> None:
    records = {"/r/vanished-then-back": (1, 1000), "/r/fine": (1, 1000)}
    changes = diff(
        [stat("/r/vanished-then-back"), stat("/r/fine"), stat("/r/new")],
        records,
        retry={"/r/vanished-then-back", "/r/gone-for-good"},
    )
    assert [f.path for f in changes.modified] == ["/r/vanished-then-back"]
    assert changes.unchanged == 1 and [f.path for f in changes.new] == ["/r/new"]
    assert changes.deleted == []


def test_incremental_runs_on_a_real_tree(tmp_path: Path) -> None:
    make_tree(tmp_path, {"a.txt": "a", "b.txt": "b", "logs/c.log": "c"})

    def scan(patterns: PatternSet, records: dict) -> tuple:
        """One run: the records afterwards are what is on disk now (as the pipeline keeps)."""
        changes = diff(walk(str(tmp_path), patterns, Errors()), dict(records))
        gone = set(changes.deleted)
        records = {p: r for p, r in records.items() if p not in gone}
        records.update({f.path: (f.size, f.mtime_ns) for f in changes.to_index})
        return changes, records

    everything = PatternSet()
    first, records = scan(everything, {})
    assert len(first.new) == 3
    second, records = scan(everything, records)
    assert (len(second.new), len(second.modified), second.unchanged) == (0, 0, 3)
    st = (tmp_path / "a.txt").stat()
    os.utime(tmp_path / "a.txt", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    (tmp_path / "b.txt").unlink()
    third, records = scan(everything, records)
    assert [f.relpath for f in third.modified] == ["a.txt"]
    assert third.deleted == [str(tmp_path / "b.txt")]
    fourth, records = scan(PatternSet(exclude=["logs/**"]), records)
    assert fourth.deleted == [str(tmp_path / "logs" / "c.log")]  # newly excluded
    assert (fourth.unchanged, fourth.scanned) == (1, 1)


def test_diff_classifies_a_large_tree_exactly() -> None:
    n = 200_000
    disk = (FileStat(f"/r/{i}", 3, i, i) for i in range(n))  # streamed, as the walk is
    records = {f"/r/{i}": (i, i if i % 10 else i + 1) for i in range(n // 2, n + n // 2)}
    changes = diff(disk, records)
    assert len(changes.new) == n // 2 and len(changes.deleted) == n // 2
    assert len(changes.modified) == n // 20 and changes.unchanged == n // 2 - n // 20
    assert changes.deleted[0] == f"/r/{n}" and changes.scanned == n


def test_document_id_and_path_hash() -> None:
    digest = "e14389f8828bbd1b5680ae5c46f1a342959606ad93c076886332018e80339adb"
    assert path_hash("/data/docs/report.pdf") == digest  # printf ... | sha256sum
    assert doc_id("docs", "/data/docs/report.pdf") == "docs--e14389f8828b"
    assert doc_id("docs", "/data/docs/other.pdf") != doc_id("docs", "/data/docs/report.pdf")
    assert doc_id("x", "/data/日本.txt").startswith("x--") and len(doc_id("x", "/a")) == 15


# -- path-limited walks (live updates) -----------------------------------------------------------


def test_covering_keeps_the_outermost_paths():
    paths = ["/r/a", "/r/a/b/c.txt", "/r/a-b/x", "/r/ab", "/r/a/", "/r/z.txt"]
    assert covering(paths) == ["/r/a", "/r/a-b/x", "/r/ab", "/r/z.txt"]


def test_walk_paths_is_the_walk_limited_to_those_paths(tmp_path):
    make_tree(
        tmp_path,
        {
            "a/1.txt": "1",
            "a/sub/2.txt": "2",
            "b/3.txt": "3",
            "c.txt": "c",
            "a/node_modules/x.js": "x",
            "tmp.swp": "s",
            "b/keep.md": "k",
        },
    )
    (tmp_path / "link").symlink_to(tmp_path / "a", target_is_directory=True)
    patterns = PatternSet(None, None)
    full = {f.path: f for f in walk(str(tmp_path), patterns, Errors())}
    asked = [
        str(tmp_path / p)
        for p in (
            "a",
            "b/3.txt",
            "c.txt",
            "gone.txt",
            "tmp.swp",
            "a/node_modules/x.js",
            "link/1.txt",
            "a/sub/2.txt",
        )
    ]
    limited = {f.path: f for f in walk_paths(str(tmp_path), asked, patterns, Errors())}
    expected = {p for p in full if not p.endswith("keep.md")}
    assert set(limited) == expected  # excluded, vanished and symlinked-folder paths: nothing
    assert all(limited[p] == full[p] for p in limited)  # the same stat and relpath
    assert [f.relpath for f in walk_paths(str(tmp_path), [str(tmp_path)], patterns, Errors())] == [
        f.relpath for f in full.values()
    ]
