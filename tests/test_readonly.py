"""Read-only guarantee: scanning, previewing and downloading never change a file, and the
service works over a tree it may only read (read-only modes, another owner, a read-only mount)."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CORPUS
from tests.workers import Worker, finished, poll_status, records

PER_TYPE = 3  # corpus files copied per type folder


def _fill(root: Path) -> None:
    """A few real files of every type (when the corpus is there) plus generated ones of several
    formats, a symlink and a hidden file, so the tree is worth scanning on a bare clone too."""
    real = CORPUS / "real"
    _generated(root / "made")
    if real.is_dir():
        for folder in sorted(p for p in real.iterdir() if p.is_dir()):
            for src in sorted(folder.iterdir())[:PER_TYPE]:
                (root / folder.name).mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, root / folder.name / src.name)
    (root / "own").mkdir(parents=True, exist_ok=True)
    (root / "own" / "plain.txt").write_text("readonly guarantee plain text")
    (root / "own" / "page.md").write_text("---\ntitle: Front\n---\nreadonly markdown")
    (root / "own" / ".hidden.txt").write_text("readonly hidden")
    (root / "own" / "link.txt").symlink_to("plain.txt")
    os.utime(root / "own" / "plain.txt", ns=(1_000_000_000, 1_500_000_000_000_000_000))


def _generated(folder: Path) -> None:
    """Files of other formats made here: a PDF, a PNG, HTML, CSV and JSON."""
    import pymupdf
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "generated portable document")
    pdf.save(folder / "made.pdf")
    Image.new("RGB", (32, 24), (200, 40, 40)).save(folder / "made.png")
    (folder / "made.html").write_text("<html><title>Made</title><body>generated page</body></html>")
    (folder / "made.csv").write_text("name,count\ngenerated,3\n")
    (folder / "made.json").write_text('{"generated": true}')


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry below root: type, mode, owner, size, mtime, ctime, and content hash or target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as fh:
                    extra = hashlib.file_digest(fh, "sha256").hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                extra = os.readlink(path)
            else:
                extra = sorted(os.listdir(path))
            out[path] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns, extra)
    return out


def _lock_down(root: Path, owner: tuple[int, int] | None) -> None:
    """chmod a-w everything (and hand it to another owner) so it is readable only."""
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o444)
            if owner:
                os.lchown(path, *owner)
        os.chmod(dirpath, 0o555)
        if owner:
            os.lchown(dirpath, *owner)


def _unlock(root: Path) -> None:
    for dirpath, _dirnames, _filenames in os.walk(root):
        os.chmod(dirpath, 0o755)


def _ro_bind_mount(src: Path, dst: Path) -> bool:
    """Mount src read-only at dst; False when this machine does not allow it."""
    dst.mkdir()
    steps = [["mount", "--bind", str(src), str(dst)], ["mount", "-o", "remount,bind,ro", str(dst)]]
    for i, cmd in enumerate(steps):
        if shutil.which(cmd[0]) is None or subprocess.run(cmd, capture_output=True).returncode:
            if i:
                subprocess.run(["umount", str(dst)], capture_output=True)
            return False
    return True


def _scan_and_use(app, client, auth, make_source, root: Path, sid: str) -> dict:
    """Scan with a real worker, then preview and download every document."""
    make_source(root, id=sid)
    assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    with Worker(app):
        status = poll_status(client, auth, sid, finished, timeout=120)
    assert status["last_run"]["state"] == "finished", status["last_run"]
    recs = records(app, sid)
    for path in recs:
        from webapp.indexing.scanner import doc_id

        did = doc_id(sid, path)
        preview = client.get(f"/api/documents/{did}/preview", headers=auth)
        # 422: an image the preview refuses (damaged, too large); never a 500
        assert preview.status_code in (200, 404, 422), (path, preview.get_json())
        if path.endswith("made.png"):
            assert preview.status_code == 200, preview.get_json()
        link = client.post(f"/api/documents/{did}/download-link", headers=auth).get_json()
        assert client.get(link["url"]).status_code == 200
    hits = client.post(
        "/api/search", headers=auth, json={"q": "readonly plain", "matching_strategy": "all"}
    ).get_json()
    # the link and its target hold one text: listed once, the other named among its copies
    assert [r["basename"] for r in hits["results"]] == ["link.txt"]
    assert [c["path"].rsplit("/", 1)[-1] for c in hits["results"][0]["copies"]] == ["plain.txt"]
    return status


def _no_write_errors(status: dict) -> None:
    for err in status["last_run"]["errors"]:
        assert "Read-only" not in err["error"] and "Permission" not in err["error"], err


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["writable", "read-only-other-owner", "read-only-mount"])
def test_scanning_changes_no_file(app, client, auth, roots, make_source, mode, tmp_path):
    tree = roots / "tree"
    _fill(tree)
    root = tree
    mounted = False
    if mode == "read-only-other-owner":
        _lock_down(tree, (65534, 65534) if os.geteuid() == 0 else None)
    elif mode == "read-only-mount":
        root = roots / "mounted"
        mounted = _ro_bind_mount(tree, root)
        if not mounted:
            pytest.skip("read-only bind mounts are not permitted here")
    try:
        before = snapshot(root)
        assert len(before) > 5
        status = _scan_and_use(app, client, auth, make_source, root, "ro")
        _no_write_errors(status)
        assert snapshot(root) == before
        if mode == "read-only-mount":  # the mount really is read-only
            with pytest.raises(OSError):
                (root / "own" / "plain.txt").write_text("x")
        assert status["total_files"] == len(records(app, "ro")) > 5
    finally:
        if mounted:
            subprocess.run(["umount", str(root)], check=False)
        if mode == "read-only-other-owner":
            _unlock(tree)


@pytest.mark.slow
def test_full_rebuild_and_delete_change_no_file(app, client, auth, roots, make_source):
    tree = roots / "tree"
    _fill(tree)
    before = snapshot(tree)
    _scan_and_use(app, client, auth, make_source, tree, "ro")
    client.post("/api/sources/ro/reindex?full=true", headers=auth)
    with Worker(app):
        poll_status(
            client, auth, "ro", lambda s: finished(s) and s["last_run"]["modified_files"], timeout=120
        )
    assert client.post("/api/sources/ro/clear-stale", headers=auth).status_code == 200
    assert client.delete("/api/sources/ro", headers=auth).status_code == 204
    assert snapshot(tree) == before
