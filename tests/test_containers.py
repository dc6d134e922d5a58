"""Archives and e-mail: members searchable and downloadable, nesting, bombs failing alone,
passwords, changed and deleted containers. Every container is generated here."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from datetime import UTC, datetime
from email.message import EmailMessage

import py7zr
import pytest
from ui_helpers import login

from tests import samples
from tests.conftest import require_corpus
from tests.msgfile import write_msg

SECRET = "hunter2-correct-horse"


def _tar(members: dict[str, bytes], mode: str = "w:gz", links: dict[str, str] = {}) -> bytes:  # noqa: B006
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            archive.addfile(info, io.BytesIO(data))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            archive.addfile(info)
    return buf.getvalue()


def _7z(members: dict[str, bytes], password: str | None = None) -> bytes:
    buf = io.BytesIO()
    with py7zr.SevenZipFile(buf, "w", password=password) as archive:
        for name, data in members.items():
            archive.writestr(data, name)
    return buf.getvalue()


def _rar(members: dict[str, bytes], password: str | None = None) -> bytes:
    """A RAR 4 archive of stored members (no tool can make one here: `rar` is not free),
    encrypted with `password` as WinRAR 2.9-4 encrypts (see _rar3_block)."""
    return _rar3_archive(
        [
            _rar3_block(name, data, len(data), zlib.crc32(data), 0x30, 0, password)
            for name, data in members.items()
        ]
    )


def _rar3_archive(blocks: list[bytes]) -> bytes:
    return (
        b"Rar!\x1a\x07\x00"
        + _rar3_head(0x73, 0, b"\0" * 6)
        + b"".join(blocks)
        + bytes.fromhex("c43d7b00400700")
    )  # end of archive


def _rar3_head(head_type: int, flags: int, body: bytes, data: bytes = b"") -> bytes:
    head = struct.pack("<BHH", head_type, flags, 7 + len(body)) + body
    return struct.pack("<H", zlib.crc32(head) & 0xFFFF) + head + data


def _rar3_block(
    name: str,
    packed: bytes,
    size: int,
    crc: int,
    method: int,
    dict_bits: int,
    password: str | None,
    version: int = 29,
) -> bytes:
    """A file block of `packed` data (stored, or compressed by `method`); with a password its
    data is encrypted with AES-128-CBC under the RAR 3 key (2**18 SHA-1 rounds over the
    UTF-16 password and an 8-byte salt; the IV from the digests along the way)."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    flags, salt, version = 0x8000 | dict_bits, b"", version if password else 20
    if password:
        salt = os.urandom(8)
        seed, sha, iv = password.encode("utf-16-le") + salt, hashlib.sha1(), bytearray()
        for i in range(0x40000):
            sha.update(seed + struct.pack("<I", i)[:3])
            if i % 0x4000 == 0:
                iv.append(sha.copy().digest()[19])
        key = struct.pack("<4I", *struct.unpack(">4I", sha.digest()[:16]))
        encryptor = Cipher(algorithms.AES(key), modes.CBC(bytes(iv))).encryptor()
        packed = encryptor.update(packed + b"\0" * (-len(packed) % 16)) + encryptor.finalize()
        flags |= 0x04 | 0x400  # encrypted, salt follows the name
    raw = name.encode()
    body = (
        struct.pack(
            "<IIBIIBBHI", len(packed), size, 3, crc, 0x5A210000, version, method, len(raw), 0o100644 << 16
        )
        + raw
        + salt
    )
    return _rar3_head(0x74, flags, body, packed)


def _aes_zip(members: dict[str, bytes], password: str) -> bytes:
    """A zip of deflated members encrypted with WinZip AES-256 (as WinZip and 7-Zip write)."""
    import pyzipper

    buf = io.BytesIO()
    with pyzipper.AESZipFile(
        buf, "w", compression=pyzipper.ZIP_DEFLATED, encryption=pyzipper.WZ_AES
    ) as archive:
        archive.setpassword(password.encode())
        for name, data in members.items():
            archive.writestr(name, data)
    return buf.getvalue()


def _rar5(members: dict[str, bytes], password: str, kdf_log2: int = 4) -> bytes:
    """A RAR 5 archive of stored members encrypted as WinRAR encrypts them: AES-256-CBC with a
    key from PBKDF2-HMAC-SHA256 (2**kdf_log2 rounds here: tests stay fast), and the password
    check value that lets a reader refuse a wrong password at once."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    def vint(n: int) -> bytes:
        out = bytearray()
        while True:
            out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
            n >>= 7
            if not n:
                return bytes(out)

    def block(kind: int, body: bytes, extra: bytes = b"", data: bytes | None = None) -> bytes:
        flags = (0x01 if extra else 0) | (0x02 if data is not None else 0)
        fields = vint(kind) + vint(flags) + (vint(len(extra)) if extra else b"")
        fields += (vint(len(data)) if data is not None else b"") + body + extra
        head = vint(len(fields)) + fields
        return struct.pack("<I", zlib.crc32(head)) + head + (data or b"")

    out = b"Rar!\x1a\x07\x01\x00" + block(1, vint(0))
    for name, data in members.items():
        salt, iv = os.urandom(16), os.urandom(16)
        key = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, 1 << kdf_log2)
        fold = bytearray(8)
        check = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, (1 << kdf_log2) + 32)
        for i, byte in enumerate(check):
            fold[i % 8] ^= byte
        # AES-256, a check value follows; rounds; salt; IV; check value and its checksum
        crypt = (
            vint(0)
            + vint(0x01)
            + bytes([kdf_log2])
            + salt
            + iv
            + bytes(fold)
            + hashlib.sha256(bytes(fold)).digest()[:4]
        )
        extra = vint(len(vint(1) + crypt)) + vint(1) + crypt  # record 1: file encryption
        encryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).encryptor()
        packed = encryptor.update(data + b"\0" * (-len(data) % 16)) + encryptor.finalize()
        raw = name.encode()
        body = (
            vint(0x04)
            + vint(len(data))
            + vint(0o100644)
            + struct.pack("<I", zlib.crc32(data))
            + vint(0)
            + vint(1)
            + vint(len(raw))
            + raw
        )  # CRC32 given; stored; Unix
        out += block(2, body, extra, packed)
    return out + block(5, vint(0))


def _eml(subject: str, body: str, html: str | None = None, attachments: dict[str, bytes] = {}) -> bytes:  # noqa: B006
    msg = EmailMessage()
    msg["Subject"], msg["From"] = subject, "Ada Lovelace <ada@example.org>"
    msg["To"], msg["Cc"] = "charles@example.org", "mary@example.org"
    msg["Date"], msg["Message-ID"] = "Tue, 03 Oct 2023 10:00:00 +0000", "<m1@example.org>"
    msg.set_content(body)
    if html:
        msg.add_alternative(html, subtype="html")
    for name, data in attachments.items():
        msg.add_attachment(data, maintype="application", subtype="octet-stream", filename=name)
    return bytes(msg)


def _html_only_eml() -> bytes:
    msg = EmailMessage()
    msg["Subject"], msg["From"] = "Newsletter", "news@example.org"
    msg.set_content(
        "<html><style>p {color: red}</style><body><p>The <b>sanderling</b> "
        "season</p><script>var x = 1;</script></body></html>",
        subtype="html",
    )
    return bytes(msg)


def _mbox(count: int, broken_at: int | None = None) -> bytes:
    out = io.BytesIO()
    for n in range(1, count + 1):
        out.write(b"From sender@example.org Mon Jan  1 00:00:00 2024\n")
        if n == broken_at:
            out.write(b"\n\x00\x01 not a message at all\n\n")
            continue
        out.write(
            f"Subject: note {n} kestrel{n}\nFrom: a@example.org\nTo: b@example.org\n"
            f"\nbody of message {n}\n>From the archive\n\n".encode()
        )
    return out.getvalue()


def _encrypt_member(data: bytes, name: str) -> bytes:
    """Mark one member of a zip as encrypted (flag bit 0) as a password-protected member is."""
    raw = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        info = archive.getinfo(name)
    raw[info.header_offset + 6] |= 1  # local header flags
    pos = raw.find(b"PK\x01\x02")
    while pos != -1:
        name_len = int.from_bytes(raw[pos + 28 : pos + 30], "little")
        if raw[pos + 46 : pos + 46 + name_len] == name.encode():
            raw[pos + 8] |= 1  # central directory flags
        pos = raw.find(b"PK\x01\x02", pos + 4)
    return bytes(raw)


def _zipcrypto(name: str, data: bytes, password: str) -> bytes:
    """A zip of one stored member under the traditional PKWARE cipher (ZipCrypto), which
    Python reads but cannot write: the cipher and the headers written here."""
    crc = zlib.crc32(data)
    keys = [0x12345678, 0x23456789, 0x34567890]

    def crc_byte(value: int, byte: int) -> int:  # one step of the CRC-32 register
        return ~zlib.crc32(bytes([byte]), ~value & 0xFFFFFFFF) & 0xFFFFFFFF

    def update(byte: int) -> None:
        keys[0] = crc_byte(keys[0], byte)
        keys[1] = ((keys[1] + (keys[0] & 0xFF)) * 134775813 + 1) & 0xFFFFFFFF
        keys[2] = crc_byte(keys[2], keys[1] >> 24)

    def encrypt(plain: bytes) -> bytes:
        out = bytearray()
        for byte in plain:
            t = (keys[2] | 2) & 0xFFFF
            out.append(byte ^ (((t * (t ^ 1)) >> 8) & 0xFF))
            update(byte)
        return bytes(out)

    for byte in password.encode():
        update(byte)
    body = encrypt(os.urandom(11) + bytes([crc >> 24])) + encrypt(data)
    raw_name, date = name.encode(), (2024 - 1980) << 9 | 1 << 5 | 1
    local = (
        struct.pack(
            "<4sHHHHHLLLHH", b"PK\x03\x04", 20, 1, 0, 0, date, crc, len(body), len(data), len(raw_name), 0
        )
        + raw_name
        + body
    )
    central = (
        struct.pack(
            "<4sHHHHHHLLLHHHHHLL",
            b"PK\x01\x02",
            20,
            20,
            1,
            0,
            0,
            date,
            crc,
            len(body),
            len(data),
            len(raw_name),
            0,
            0,
            0,
            0,
            0,
            0,
        )
        + raw_name
    )
    end = struct.pack("<4sHHHHLLH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local), 0)
    return local + central + end


def _pdf(text: str, password: str | None = None) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), text)
    if password:
        data = doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=password, owner_pw=password + "!")
    else:
        data = doc.tobytes()
    doc.close()
    return data


def _encrypted_docx(text: str, password: str) -> bytes:
    import docx
    from msoffcrypto.format.ooxml import OOXMLFile

    plain, out = io.BytesIO(), io.BytesIO()
    document = docx.Document()
    document.add_paragraph(text)
    document.save(plain)
    plain.seek(0)
    OOXMLFile(plain).encrypt(password, out)
    return out.getvalue()


BINARY = os.urandom(50_000)
ATTACHMENT = b"%PDF-like bytes \x00\xff" + os.urandom(2000)


def _good_files() -> dict[str, bytes]:
    inner = samples.archive({"c.txt": b"deep puffin inside two archives"})
    return {
        "a.zip": samples.archive(
            {"docs/readme.txt": b"hello walrus archive member", "b.zip": inner, "data.bin": BINARY}
        ),
        "t.tar.gz": _tar({"x/notes.md": b"# Otter\ntar member otter notes", "x/blob.bin": BINARY}),
        "t.tar.bz2": _tar({"y.txt": b"bzip heron text"}, "w:bz2"),
        "t.tar.xz": _tar({"z.txt": b"xz flamingo text"}, "w:xz"),
        "s.7z": _7z({"h.txt": b"seven zip pelican text", "bin.dat": BINARY}),
        "r.rar": _rar({"dir/r.txt": b"rar stored sandpiper text", "rar.bin": BINARY}),
        "mail.eml": _eml(
            "Quarterly ostrich report",
            "plain body",
            "<p>html <b>ostrich</b></p>",
            {
                "report.bin": ATTACHMENT,
                "inner.zip": samples.archive({"deep.txt": b"attachment zip cormorant"}),
            },
        ),
        "box.mbox": _mbox(5, broken_at=3),
        "news.eml": _html_only_eml(),
        "plain.txt": b"a plain file beside the archives",
    }


@pytest.fixture
def scanned(client, auth, make_tree, make_source, run_jobs):
    root = make_tree("arch", _good_files())
    src = make_source(root)
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    return root, src


def _hits(client, auth, q: str) -> list[dict]:
    body = client.post("/api/search", headers=auth, json={"q": q, "limit": 50}).get_json()
    return body["results"]


def _one(client, auth, q: str) -> dict:
    """The one hit that is not an archive (whose member list names everything in it)."""
    hits = [h for h in _hits(client, auth, q) if h["type"] != "archive"]
    assert len(hits) == 1, [h["path"] for h in hits]
    return hits[0]


def _download(client, auth, doc_id: str):
    link = client.post(f"/api/documents/{doc_id}/download-link", headers=auth).get_json()
    return client.get(link["url"])


def test_members_of_every_container_are_documents(client, auth, scanned):
    root, _ = scanned
    cases = {
        "walrus": "a.zip!/docs/readme.txt",
        "puffin": "a.zip!/b.zip!/c.txt",
        "otter": "t.tar.gz!/x/notes.md",
        "heron": "t.tar.bz2!/y.txt",
        "flamingo": "t.tar.xz!/z.txt",
        "pelican": "s.7z!/h.txt",
        "sandpiper": "r.rar!/dir/r.txt",
        "cormorant": "mail.eml!/inner.zip!/deep.txt",
        '"kestrel4"': "box.mbox!/message-4.eml",
    }
    for word, inner in cases.items():
        hit = _one(client, auth, word)
        assert hit["path"] == f"{root}/{inner}", word
        parent = hit["path"].rpartition("!/")[0]
        container = client.get(f"/api/documents/{hit['container_id']}", headers=auth).get_json()
        assert container["path"] == parent and container["container_id"] in (None, container["container_id"])
    archive = client.get(
        f"/api/documents/{_one(client, auth, 'walrus')['container_id']}", headers=auth
    ).get_json()
    assert archive["type"] == "archive" and "docs/readme.txt" in archive["content"]
    assert archive["container_id"] is None
    plain = _one(client, auth, "beside")
    assert plain["container_id"] is None


def test_email_fields_and_mbox_messages(client, auth, scanned):
    root, _ = scanned
    mail = client.get(f"/api/documents/{_one(client, auth, 'ostrich')['id']}", headers=auth).get_json()
    assert mail["type"] == "email" and mail["title"] == "Quarterly ostrich report"
    meta = mail["metadata"]
    assert meta["from"] == "Ada Lovelace <ada@example.org>" and meta["to"] == "charles@example.org"
    assert meta["cc"] == "mary@example.org" and meta["message_id"] == "<m1@example.org>"
    assert meta["date"].startswith("2023-10-03T10:00:00")
    assert "plain body" in mail["content"]
    news = client.get(f"/api/documents/{_one(client, auth, 'sanderling')['id']}", headers=auth).get_json()
    assert "The sanderling season" in news["content"]  # an HTML body, as text
    assert "<" not in news["content"] and "color" not in news["content"]
    assert "var x" not in news["content"]
    message = _one(client, auth, '"kestrel5"')
    assert message["type"] == "email" and message["path"].endswith("box.mbox!/message-5.eml")
    full = client.get(f"/api/documents/{message['id']}", headers=auth).get_json()
    assert full["title"] == "note 5 kestrel5" and "From the archive" in full["content"]
    # the broken message fails alone: its neighbours are indexed, the scan finished
    status = client.get("/api/status", headers=auth).get_json()
    errors = {e["path"]: e["error"] for s in status["sources"] for e in s.get("errors", [])}
    assert _hits(client, auth, '"kestrel2"') and _hits(client, auth, '"kestrel4"')
    assert errors.get(f"{root}/box.mbox!/message-3.eml") == "Not a valid e-mail message" or not _hits(
        client, auth, '"kestrel3"'
    )


def test_outlook_messages_fields_bodies_and_attachments(
    client, auth, make_tree, make_source, run_jobs, tmp_path
):
    sent = datetime(2024, 3, 5, 14, 30, tzinfo=UTC)
    report = write_msg(
        tmp_path / "report.msg",
        subject="Grebe census figures",
        sender="Ann Lee",
        sender_email="ann@example.org",
        to="Bob Stone <bob@example.org>",
        cc="cy@example.org",
        body="The wintering grebes were counted twice.",
        date=sent,
        message_id="<census-7@example.org>",
        attachments={
            "tally.txt": b"avocet tally sheet",
            "inner.zip": samples.archive({"deep.txt": b"attached zip godwit"}),
        },
    )
    html = write_msg(
        tmp_path / "html.msg",
        subject="Dawn walk",
        html="<html><style>p {color: red}</style><body><p>A <b>bittern</b> boomed</p></body></html>",
    )
    root = make_tree(
        "outlook",
        {
            "report.msg": report.read_bytes(),
            "html.msg": html.read_bytes(),
            "broken.msg": report.read_bytes()[:1500],
            "plain.txt": b"a plain curlew file",
        },
    )
    src = make_source(root)
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    mail = client.get(f"/api/documents/{_one(client, auth, 'grebes')['id']}", headers=auth).get_json()
    assert mail["type"] == "email" and mail["title"] == "Grebe census figures"
    assert mail["path"] == f"{root}/report.msg"
    meta = mail["metadata"]
    assert meta["from"] == "Ann Lee <ann@example.org>" and meta["to"] == "Bob Stone <bob@example.org>"
    assert meta["cc"] == "cy@example.org" and meta["message_id"] == "<census-7@example.org>"
    assert meta["date"].startswith("2024-03-05T14:30:00")
    # attachments are members, extracted like files, nested containers included
    assert _one(client, auth, "avocet")["path"] == f"{root}/report.msg!/tally.txt"
    assert _one(client, auth, "godwit")["path"] == f"{root}/report.msg!/inner.zip!/deep.txt"
    dawn = client.get(f"/api/documents/{_one(client, auth, 'bittern')['id']}", headers=auth).get_json()
    assert "A bittern boomed" in dawn["content"]  # an HTML-only body, as text
    assert "<" not in dawn["content"] and "color" not in dawn["content"]
    # the cut-off message fails alone, with a clear message; its neighbours are indexed
    status = client.get(f"/api/status/{src['id']}", headers=auth).get_json()
    failed = {f["path"]: f["error"] for f in status["failed_files"]}
    assert failed == {f"{root}/broken.msg": "Not a valid Outlook message"}
    assert _one(client, auth, "curlew")["path"] == f"{root}/plain.txt"


def test_member_downloads_are_the_original_bytes(client, auth, scanned):
    root, _ = scanned
    for word, expected in (("puffin", b"deep puffin inside two archives"),):
        resp = _download(client, auth, _one(client, auth, word)["id"])
        assert resp.status_code == 200 and resp.data == expected
    for container in ("a.zip", "t.tar.gz", "s.7z", "r.rar"):
        hits = [
            h
            for h in _hits(client, auth, "bin")
            if h["path"].startswith(f"{root}/{container}!/")
            and h["basename"] in ("data.bin", "blob.bin", "bin.dat", "rar.bin")
        ]
        assert hits, container
        resp = _download(client, auth, hits[0]["id"])
        assert resp.status_code == 200 and resp.data == BINARY, container
        assert "attachment" in resp.headers["Content-Disposition"]
    report = [h for h in _hits(client, auth, "report") if h["basename"] == "report.bin"][0]
    assert _download(client, auth, report["id"]).data == ATTACHMENT


@pytest.mark.pg
def test_member_of_changed_or_deleted_container(client, auth, scanned, run_jobs):
    root, src = scanned
    walrus = _one(client, auth, "walrus")
    otter = _one(client, auth, "otter")
    assert client.get(f"/api/documents/{walrus['id']}/preview", headers=auth).status_code == 200
    (root / "a.zip").write_bytes(samples.archive({"docs/other.txt": b"new dolphin member"}))
    os.utime(root / "a.zip", (1_800_000_000, 1_800_000_000))
    (root / "t.tar.gz").unlink()
    for doc in (walrus, otter):  # before a rescan: the member is not served from a new file
        resp = _download(client, auth, doc["id"])
        assert resp.status_code == 404 and resp.get_json()["detail"] == "File no longer exists"
    resp = client.get(f"/api/documents/{walrus['id']}/preview", headers=auth)
    assert resp.status_code == 404
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    assert _hits(client, auth, '"walrus"') == [] and _hits(client, auth, '"puffin"') == []
    assert _hits(client, auth, '"otter"') == []
    assert _one(client, auth, "dolphin")["path"] == f"{root}/a.zip!/docs/other.txt"
    assert _download(client, auth, _one(client, auth, "dolphin")["id"]).data == b"new dolphin member"


def _bombs() -> dict[str, bytes]:
    zeros = b"\0" * (24 * 1024 * 1024)
    bomb = samples.archive({"zeros.txt": zeros})
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w", zipfile.ZIP_STORED) as archive:
        for n in range(100_000):
            archive.writestr(f"f{n}.txt", b"")
    truncated = _tar({"a.txt": b"truncated gannet " * 5000, "b.txt": os.urandom(20000)})
    return {
        "bomb.zip": bomb,
        "bomb.7z": _7z({"zeros.txt": zeros}),
        "bomb.tar.gz": _tar({"zeros.txt": zeros}),
        "nested.zip": samples.archive({"ok.txt": b"nested shell", "inner.zip": bomb}),
        "escape.zip": samples.archive({"../evil.txt": b"escape tern"}),
        "absolute.tar": _tar({"/etc/evil.txt": b"absolute tern"}, "w"),
        "link.tar": _tar({"ok.txt": b"link tern"}, "w", links={"passwd": "/etc/passwd"}),
        "many.zip": many.getvalue(),
        "cut.tar.gz": truncated[: len(truncated) // 2],
        "good.txt": b"the healthy albatross",
    }


def test_hostile_containers_fail_alone(app, client, auth, make_tree, make_source, run_jobs, data_dir, roots):
    root = make_tree("hostile", _bombs())
    before = sorted(p.relative_to(roots) for p in roots.rglob("*"))
    tmp_before = set(os.listdir(tempfile.gettempdir()))
    src = make_source(root)
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    status = client.get(f"/api/status/{src['id']}", headers=auth).get_json()
    assert status["last_run"]["state"] == "finished", status
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import IndexedFile

        records = {r.path.removeprefix(f"{root}/"): r for r in db.session.query(IndexedFile)}
    expected = {
        "bomb.zip": "Archive looks like a decompression bomb",
        "bomb.7z": "Archive looks like a decompression bomb",
        "bomb.tar.gz": "Archive looks like a decompression bomb",
        "nested.zip": "Archive looks like a decompression bomb",
        "escape.zip": "Archive has an unsafe member name: ../evil.txt",
        "absolute.tar": "Archive has an unsafe member name: /etc/evil.txt",
        "link.tar": "Archive has a link member: passwd",
        "many.zip": "Archive has more than 10,000 members",
        "cut.tar.gz": "Not a valid tar archive (it may be truncated)",
    }
    for name, message in expected.items():
        assert records[name].status == "failed", name
        assert records[name].error_message.startswith(message), (name, records[name].error_message)
    assert "(in inner.zip)" in records["nested.zip"].error_message
    assert not [p for p in records if "!/" in p]  # no member of a failed container is kept
    assert records["good.txt"].status == "success"
    assert _one(client, auth, "albatross")["basename"] == "good.txt"
    assert _hits(client, auth, "tern") == []
    # nothing was written beside the files, the spool is empty, no temp files were left
    assert sorted(p.relative_to(roots) for p in roots.rglob("*")) == before
    spool = data_dir / "tmp" / "unpack"
    assert not spool.exists() or list(spool.iterdir()) == []
    assert not [n for n in set(os.listdir(tempfile.gettempdir())) - tmp_before if n.startswith("unpack-")]
    assert client.get("/api/health").get_json()["status"] == "ok"


@pytest.fixture
def with_passwords(app_config, tmp_path):
    path = tmp_path / "passwords.txt"
    path.write_text(f"wrong-one\n{SECRET}\n")
    app_config["EXTRACT_PASSWORDS_FILE"] = str(path)
    return path


def _protected() -> dict[str, bytes]:
    plain = samples.archive({"open.txt": b"open grebe text", "locked.txt": b"locked grebe text"})
    return {
        "locked.7z": _7z({"l.txt": b"sealed avocet text"}, password=SECRET),
        "mixed.zip": _encrypt_member(plain, "locked.txt"),
        "secret.pdf": _pdf("confidential bittern memo", password=SECRET),
        "secret.docx": _encrypted_docx("confidential godwit letter", SECRET),
        "crypto.zip": _zipcrypto("z.txt", b"zipcrypto curlew text", SECRET),
        "locked.rar": _rar5({"r.txt": b"sealed ruddy turnstone text"}, SECRET),
        "aes.zip": _aes_zip({"w.txt": b"winzip aes dunlin text"}, SECRET),
        "locked3.rar": _rar({"q.txt": b"sealed whimbrel text"}, SECRET),
    }


def test_compressed_rar_members_are_read(client, auth, make_tree, make_source, run_jobs):
    """RAR 3 and RAR 5 archives of compressed members (real files from the corpus, as no tool
    here can make one): each member is a document, and downloads with the size and CRC its
    archive records (through rarfile, bsdtar was handed a pipe and every member failed)."""
    import rarfile

    comics = require_corpus() / "real" / "comic"
    files = {
        name.replace(".cbr", ".rar"): (comics / name).read_bytes()
        for name in ("rartest-testfile.rar3.cbr", "rartest-testfile.rar5.cbr")
    }
    root = _scan(client, auth, make_tree, make_source, run_jobs, files, name="rars")
    by_path = {h["path"]: h for h in _hits(client, auth, "testfile")}
    for archive in files:
        with rarfile.RarFile(os.path.join(root, archive)) as listing:
            infos = [i for i in listing.infolist() if not i.is_dir()]
        assert infos and any(i.compress_type != rarfile.RAR_M0 for i in infos)  # compressed
        for info in infos:
            hit = by_path[f"{root}/{archive}!/{info.filename}"]
            data = _download(client, auth, hit["id"]).data
            assert len(data) == info.file_size and zlib.crc32(data) == info.CRC, info.filename


def _scan(client, auth, make_tree, make_source, run_jobs, files, name="prot"):
    root = make_tree(name, files)
    src = make_source(root, name=name)
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    return root


def test_encrypted_members_fail_and_the_rest_is_indexed(app, client, auth, make_tree, make_source, run_jobs):
    root = _scan(client, auth, make_tree, make_source, run_jobs, _protected())
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import IndexedFile

        records = {r.path.removeprefix(f"{root}/"): r for r in db.session.query(IndexedFile)}
    for name in ("mixed.zip!/locked.txt", "locked.7z!/l.txt"):
        assert records[name].status == "failed"
        assert records[name].error_message == "Archive is password protected"
    assert records["mixed.zip"].status == "success" and records["locked.7z"].status == "success"
    assert records["secret.pdf"].error_message == "PDF is password protected"
    assert records["secret.docx"].error_message == "Document is password protected"
    assert _one(client, auth, "open grebe")["basename"] == "open.txt"
    assert _hits(client, auth, "avocet") == [] and _hits(client, auth, "bittern") == []
    assert _hits(client, auth, "godwit") == []
    assert records["crypto.zip!/z.txt"].error_message == "Archive is password protected"
    assert records["locked.rar!/r.txt"].error_message == "Archive is password protected"
    assert records["aes.zip!/w.txt"].error_message == "Archive is password protected"
    assert records["locked3.rar!/q.txt"].error_message == "Archive is password protected"


def test_passwords_file_opens_encrypted_files(
    with_passwords, client, auth, make_tree, make_source, run_jobs, caplog
):
    _scan(client, auth, make_tree, make_source, run_jobs, _protected())
    assert _one(client, auth, "avocet")["basename"] == "l.txt"
    assert _one(client, auth, "bittern")["basename"] == "secret.pdf"
    assert _one(client, auth, "godwit")["basename"] == "secret.docx"
    curlew = _one(client, auth, "curlew")
    assert curlew["basename"] == "z.txt"
    assert _download(client, auth, curlew["id"]).data == b"zipcrypto curlew text"
    dunlin = _one(client, auth, "dunlin")  # WinZip AES, through pyzipper
    assert _download(client, auth, dunlin["id"]).data == b"winzip aes dunlin text"
    whimbrel = _one(client, auth, "whimbrel")  # RAR 3, decrypted in the extraction child
    assert _download(client, auth, whimbrel["id"]).data == b"sealed whimbrel text"
    member = _one(client, auth, "avocet")
    assert _download(client, auth, member["id"]).data == b"sealed avocet text"
    assert SECRET not in caplog.text
    config = client.get("/api/status", headers=auth).get_data(as_text=True)
    assert SECRET not in config


def test_passwords_file_opens_an_encrypted_rar_member(
    with_passwords, client, auth, make_tree, make_source, run_jobs
):
    """RAR 5 members encrypted with a password of the file are decrypted by unar (or unrar),
    which `make` installs; bsdtar, which reads the other RAR members, cannot decrypt."""
    if not (shutil.which("unar") or shutil.which("unrar")):
        pytest.skip("neither unar nor unrar is installed (make rartool installs unar as root)")
    _scan(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {"locked.rar": _rar5({"r.txt": b"sealed ruddy turnstone text"}, SECRET)},
    )
    member = _one(client, auth, "turnstone")
    assert member["basename"] == "r.txt"
    assert _download(client, auth, member["id"]).data == b"sealed ruddy turnstone text"


def test_passwords_file_opens_a_compressed_rar3_member(
    with_passwords, client, auth, make_tree, make_source, run_jobs
):
    """A compressed member of a real RAR 3 archive (from the corpus), encrypted here as
    WinRAR 2.9-4 encrypts: decrypted in the extraction child, unpacked by bsdtar."""
    import rarfile

    source = require_corpus() / "real" / "comic" / "rartest-testfile.rar3.cbr"
    with rarfile.RarFile(source) as listing:
        info = next(i for i in listing.infolist() if i.compress_type != rarfile.RAR_M0)
    with open(source, "rb") as f:
        f.seek(info.data_offset)
        packed = f.read(info.compress_size)
    locked = _rar3_archive(
        [
            _rar3_block(
                info.filename,
                packed,
                info.file_size,
                info.CRC,
                info.compress_type,
                info.flags & 0xE0,
                SECRET,
                info.extract_version,
            )
        ]
    )
    root = _scan(client, auth, make_tree, make_source, run_jobs, {"locked.rar": locked})
    member = f"{root}/locked.rar!/{info.filename}"
    hits = [h for h in _hits(client, auth, "testfile") if h["path"] == member]
    assert hits, _hits(client, auth, "testfile")
    data = _download(client, auth, hits[0]["id"]).data
    assert len(data) == info.file_size and zlib.crc32(data) == info.CRC


def test_without_a_decrypting_tool_an_encrypted_rar_member_says_what_it_needs(
    with_passwords, app, client, auth, make_tree, make_source, run_jobs, monkeypatch
):
    import rarfile

    for tool in ("UNRAR_TOOL", "UNAR_TOOL", "SEVENZIP_TOOL", "SEVENZIP2_TOOL"):
        monkeypatch.setattr(rarfile, tool, "no-such-tool-here")
    monkeypatch.setattr(rarfile, "CURRENT_SETUP", None)  # bsdtar is left: it cannot decrypt
    if not shutil.which("bsdtar"):
        pytest.skip("bsdtar is not installed (make rartool installs libarchive-tools as root)")
    root = _scan(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {"locked.rar": _rar5({"r.txt": b"sealed ruddy turnstone text"}, SECRET)},
    )
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import IndexedFile

        record = db.session.query(IndexedFile).filter_by(path=f"{root}/locked.rar!/r.txt").one()
    assert record.status == "failed"
    assert record.error_message == (
        "Archive is password protected; decrypting a rar member needs unar or unrar"
    )


def test_document_page_and_results_link_the_container(client, auth, scanned):
    root, _ = scanned
    hit = _one(client, auth, "puffin")
    login(client)
    page = client.get(f"/documents/{hit['id']}").get_data(as_text=True)
    assert f'href="/documents/{hit["container_id"]}' in page
    assert "c.txt" in page and f"{root}/a.zip!/b.zip" in page
    results = client.get("/?q=puffin").get_data(as_text=True)
    assert f"/documents/{hit['container_id']}" in results


def test_a_large_mbox_is_split_into_messages(client, auth, make_tree, make_source, run_jobs):
    # 3,000 keeps the suite fast; the split streams, so the count changes nothing but time
    root = _scan(client, auth, make_tree, make_source, run_jobs, {"big.mbox": _mbox(3_000)}, name="mbox")
    body = client.post("/api/search", headers=auth, json={"q": "type:email", "limit": 1}).get_json()
    assert body["total"] == 3_000
    assert _one(client, auth, '"kestrel2999"')["path"] == f"{root}/big.mbox!/message-2999.eml"
    # members are written in chunks as they come; a smaller mailbox replaces every one of them
    (root / "big.mbox").write_bytes(_mbox(600))
    os.utime(root / "big.mbox", (1_800_000_000, 1_800_000_000))
    src = client.get("/api/sources", headers=auth).get_json()[0]
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    body = client.post("/api/search", headers=auth, json={"q": "type:email", "limit": 1}).get_json()
    assert body["total"] == 600 and _hits(client, auth, '"kestrel2999"') == []


def test_every_generated_container_is_recognised():
    from webapp.indexing.extractors import detect_type

    for name, kind in (
        ("a.zip", "archive"),
        ("a.tar", "archive"),
        ("a.tar.gz", "archive"),
        ("a.tgz", "archive"),
        ("a.tar.bz2", "archive"),
        ("a.tar.xz", "archive"),
        ("a.7z", "archive"),
        ("a.rar", "archive"),
        ("a.mbox", "archive"),
        ("a.eml", "email"),
        ("a.msg", "email"),
        ("a.gz", "file"),
    ):
        assert detect_type(name) == kind, name


def test_verify_finds_members_in_their_containers(app, scanned):
    _, src = scanned
    with app.app_context():
        from webapp.indexing.verify import verify_source

        report = verify_source(src["id"], repair=False)
    assert report["problems"] == 0, report
    assert report["records"] > report["files_on_disk"]  # the members have records of their own


def test_nesting_stops_at_three_levels(tmp_path):
    from webapp.indexing.extractors import ExtractionSettings
    from webapp.indexing.isolation import Extractor

    level4 = samples.archive({"e.txt": b"too deep"})
    level3 = samples.archive({"d.zip": level4, "c.txt": b"third level"})
    level2 = samples.archive({"c.zip": level3})
    (tmp_path / "a.zip").write_bytes(samples.archive({"b.zip": level2}))
    spool = tmp_path / "data" / "tmp" / "unpack"
    with Extractor(ExtractionSettings(spool_dir=str(spool))) as extractor:
        result = extractor.run(str(tmp_path / "a.zip"))
    found = {m.inner: m for m in result.members}
    assert set(found) == {"b.zip", "b.zip!/c.zip", "b.zip!/c.zip!/c.txt", "b.zip!/c.zip!/d.zip"}
    assert found["b.zip!/c.zip!/c.txt"].result.doc.content == "third level"
    assert found["b.zip!/c.zip!/c.txt"].parent == "b.zip!/c.zip"
    deepest = found["b.zip!/c.zip!/d.zip"].result  # listed, not opened
    assert deepest.doc.type == "archive" and deepest.doc.content == "e.txt"
    assert list(spool.iterdir()) == []


def test_spool_folders_of_dead_workers_are_removed(tmp_path):
    from webapp.indexing.extractors import ExtractionSettings
    from webapp.indexing.isolation import Extractor

    spool = tmp_path / "tmp" / "unpack"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = spool / f"unpack-{dead.pid}-x1"  # a worker killed while it unpacked
    stale.mkdir(parents=True)
    (stale / "member.txt").write_text("left behind")
    live = spool / f"unpack-{os.getpid()}-x2"
    live.mkdir()
    with Extractor(ExtractionSettings(spool_dir=str(spool))):
        pass
    assert not stale.exists() and live.exists()


def _zip_tree(per_level: int, levels: int, leaf: bytes = b"tiny tern") -> bytes:
    """A zip of zips: `per_level` members at each of `levels` levels, text files at the last."""
    if levels == 1:
        return samples.archive({f"t{n}.txt": leaf for n in range(per_level)})
    inner = _zip_tree(per_level, levels - 1, leaf)
    return samples.archive({f"z{n}.zip": inner for n in range(per_level)})


def _member_records(app, root) -> tuple[dict, list]:
    """(the records of files on disk by name, the paths of member records)."""
    with app.app_context():
        from webapp.extensions import db
        from webapp.models import IndexedFile

        rows = db.session.query(IndexedFile).all()
        outer = {r.path.removeprefix(f"{root}/"): r for r in rows if "!/" not in r.path}
        return outer, [r.path for r in rows if "!/" in r.path]


def test_one_member_budget_for_the_whole_tree_of_a_file(
    app, app_config, client, auth, make_tree, make_source, run_jobs
):
    """A zip of zips shares ARCHIVE_MAX_MEMBERS over all its levels (else it would be
    6 + 36 + 216 documents here, n + n² + n³ in general) and its record says where it was cut;
    a mailbox of many tiny messages stops at MAILBOX_MAX_MEMBERS the same way."""
    app.config.update(ARCHIVE_MAX_MEMBERS=50, MAILBOX_MAX_MEMBERS=20)
    root = _scan(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {"nest.zip": _zip_tree(6, 4), "box.mbox": _mbox(100), "small.zip": _zip_tree(3, 2)},
        name="budget",
    )
    outer, members = _member_records(app, root)
    nest = [p for p in members if p.startswith(f"{root}/nest.zip!/")]
    assert len(nest) == 50  # 6 + 6 + 36 + 2: the second inner zip is where the budget ran out
    assert outer["nest.zip"].status == "success"
    assert outer["nest.zip"].error_message == (
        "Cut at 50 members (ARCHIVE_MAX_MEMBERS, for this file and everything inside it): "
        "indexing stopped in z1.zip; what comes after it was not indexed"
    )
    doc = _hits(client, auth, "nest.zip")[0]
    assert (
        client.get(f"/api/documents/{doc['id']}", headers=auth).get_json()["metadata"]["cut"]
        == outer["nest.zip"].error_message
    )
    box = [p for p in members if p.startswith(f"{root}/box.mbox!/")]
    assert len(box) == 20
    assert outer["box.mbox"].error_message == (
        "Cut at 20 members (MAILBOX_MAX_MEMBERS, for this file and everything inside it): "
        "indexing stopped in the file itself; what comes after it was not indexed"
    )
    assert _hits(client, auth, '"kestrel20"') and not _hits(client, auth, '"kestrel21"')
    # a tree within its budget is whole and says nothing
    assert len([p for p in members if p.startswith(f"{root}/small.zip!/")]) == 3 + 9
    assert outer["small.zip"].error_message is None


def test_an_encrypted_zip_of_many_members_is_indexed_with_a_passwords_file(
    app, tmp_path, client, auth, make_tree, make_source, run_jobs
):
    """The password that opened a member is tried first on the next and the archive is opened
    once: before, each of 1,500 members read the file and tried 40 wrong passwords first,
    pyzipper parsing the whole archive again for each try (the scan timed out)."""
    passwords = tmp_path / "passwords.txt"
    passwords.write_text("".join(f"wrong-{n}\n" for n in range(40)) + f"{SECRET}\n")
    app.config["EXTRACT_PASSWORDS_FILE"] = str(passwords)
    members = {f"notes/n{n}.txt": f"sealed sandpiper{n} note".encode() for n in range(1_500)}
    root = _scan(
        client, auth, make_tree, make_source, run_jobs, {"many.zip": _aes_zip(members, SECRET)}, name="sealed"
    )
    outer, inside = _member_records(app, root)
    assert outer["many.zip"].status == "success", outer["many.zip"].error_message
    assert len(inside) == 1_500
    assert _one(client, auth, '"sandpiper1499"')["path"] == f"{root}/many.zip!/notes/n1499.txt"


def test_members_at_any_depth_are_read_out_together(tmp_path):
    """What the OCR phase reads scans inside containers with: the wanted members of a tar.gz
    holding messages with attachments, each written whole; one it does not hold is left out."""
    from webapp.indexing.extractors import ExtractionSettings, read_out

    messages = {
        f"mail/m{n}.eml": _eml(f"m{n}", "see attached", attachments={f"scan{n}.png": bytes([n]) * 300})
        for n in range(3)
    }
    path = tmp_path / "box.tar.gz"
    path.write_bytes(_tar({**messages, "notes.txt": b"plain notes"}))
    folder = tmp_path / "out"
    folder.mkdir()
    settings = ExtractionSettings(spool_dir=str(tmp_path / "spool"))
    wanted = [["mail/m0.eml", "scan0.png"], ["mail/m2.eml", "scan2.png"], ["notes.txt"], ["gone.txt"]]
    files = read_out(str(path), wanted, str(folder), settings)
    assert set(files) == {("mail/m0.eml", "scan0.png"), ("mail/m2.eml", "scan2.png"), ("notes.txt",)}
    assert open(files[("mail/m2.eml", "scan2.png")], "rb").read() == bytes([2]) * 300
    assert open(files[("notes.txt",)], "rb").read() == b"plain notes"
    assert all(str(f).startswith(str(folder)) for f in files.values())
