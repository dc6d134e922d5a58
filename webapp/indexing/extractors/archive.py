"""Archives (zip, tar, 7z, rar): their member list, and their members read one by one.

An archive is a container: `unpack` walks its members once, checks every name and size
against the bomb limits before a byte is written, and hands each wanted member's bytes to a
sink (the extraction child writes them to a spool folder under DATA_DIR; the web process
streams one member to a download). The archive itself is never written.
"""

from __future__ import annotations

import contextlib
import io
import shutil
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from ._util import MAX_ZIP_RATIO, RATIO_CHECK_MIN_BYTES
from .base import (
    BOMB_MESSAGE,
    PASSWORD_MESSAGE,
    Budget,
    ContainerBomb,
    Extracted,
    ExtractionError,
    ExtractionSettings,
    ExtractorSpec,
    Member,
    Sink,
)
from .tool_output import BSDTAR, rar_member

TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
RATIO_MIN_TOTAL = 16 * 1024 * 1024  # a whole archive is judged by its ratio from this size on
COPY_CHUNK = 1024 * 1024


@dataclass
class Entry:
    """One member as the archive declares it."""

    name: str
    size: int
    packed: int  # compressed size when known, else size
    mtime: int | None
    encrypted: bool = False
    is_dir: bool = False
    is_link: bool = False


def archive_kind(path: str) -> str:
    """`zip`, `tar`, `7z` or `rar`, by the file's name (what the registry matched)."""
    name = path.lower()
    if name.endswith(TAR_SUFFIXES):
        return "tar"
    return name.rsplit(".", 1)[-1]


def safe_name(name: str) -> str:
    """The member's path inside the archive, '/'-separated; a bomb when it could escape."""
    clean = name.replace("\\", "/")
    parts = clean.split("/")
    if clean.startswith("/") or (len(parts[0]) == 2 and parts[0][1] == ":") or ".." in parts:
        raise ContainerBomb(f"Archive has an unsafe member name: {name[:200]}")
    return "/".join(p for p in parts if p not in ("", "."))


class Guard:
    """The bomb limits of one container, checked entry by entry as the archive is read, and
    the budget of members its file's whole tree shares."""

    def __init__(self, settings: ExtractionSettings, container_size: int, budget: Budget) -> None:
        self.settings = settings
        self.container_size = max(container_size, 1)
        self.budget = budget  # bytes and members the whole tree of containers may still hold
        self.count = 0
        self.total = 0

    def check(self, entry: Entry) -> str | None:
        """The entry's safe name, or None when the tree's member budget is spent (the walk
        stops there: the tree is cut); raises ContainerBomb when a limit is passed."""
        name = safe_name(entry.name)
        if entry.is_link:
            raise ContainerBomb(f"Archive has a link member: {name[:200]}")
        self.count += 1
        if self.count > self.settings.archive_max_members:
            raise ContainerBomb(f"Archive has more than {self.settings.archive_max_members:,} members")
        if not self.budget.take():
            return None
        self.total += entry.size
        if self.total > self.budget.bytes:
            raise ContainerBomb(BOMB_MESSAGE + " (too large when unpacked)")
        big = entry.size > RATIO_CHECK_MIN_BYTES
        if big and entry.size > MAX_ZIP_RATIO * max(entry.packed, 1):
            raise ContainerBomb(BOMB_MESSAGE + f" ({name[:200]} is compressed too well)")
        if self.total > RATIO_MIN_TOTAL and self.total > MAX_ZIP_RATIO * self.container_size:
            raise ContainerBomb(BOMB_MESSAGE + " (compressed too well)")
        return name


def copy_bounded(src: IO[bytes], dst: IO[bytes], limit: int) -> int:
    """Copy at most `limit` bytes; more than declared is a bomb (the header lied)."""
    done = 0
    while True:
        chunk = src.read(COPY_CHUNK)
        if not chunk:
            return done
        done += len(chunk)
        if done > limit:
            raise ContainerBomb(BOMB_MESSAGE + " (a member is larger than declared)")
        dst.write(chunk)


# -- the four formats: entries, then the bytes of the members a sink wants ----------------------


def _zip_entries(archive: zipfile.ZipFile) -> Iterator[tuple[Entry, Any]]:
    for info in archive.infolist():
        mode = info.external_attr >> 16
        yield (
            Entry(
                name=info.filename,
                size=info.file_size,
                packed=info.compress_size,
                mtime=_zip_time(info),
                encrypted=bool(info.flag_bits & 1),
                is_dir=info.is_dir(),
                is_link=stat.S_ISLNK(mode),
            ),
            info,
        )


def _zip_time(info: zipfile.ZipInfo) -> int | None:
    import calendar

    try:
        return calendar.timegm((*info.date_time, 0, 0, 0))
    except (ValueError, OverflowError):
        return None


class Passwords:
    """The passwords file's lines for one archive: read once, the last one that opened a
    member tried first on the next (members of one archive mostly share their password)."""

    def __init__(self, settings: ExtractionSettings) -> None:
        self.settings = settings
        self._lines: list[str] | None = None

    def __iter__(self) -> Iterator[str]:
        if self._lines is None:
            self._lines = list(self.settings.passwords())
        return iter(list(self._lines))

    def worked(self, password: str) -> None:
        """Put the password that opened a member first."""
        if self._lines and self._lines[0] != password:
            self._lines.remove(password)
            self._lines.insert(0, password)


class _ZipReader:
    """One zip archive's members, encrypted or not, the archive opened once (a second time,
    by pyzipper, only when it holds WinZip AES members)."""

    def __init__(self, archive: zipfile.ZipFile, settings: ExtractionSettings) -> None:
        self.archive = archive
        self.passwords = Passwords(settings)
        self._aes: Any = None

    def open(self, info: zipfile.ZipInfo):
        """The member's stream, trying the passwords on an encrypted one."""
        if info.compress_type == WINZIP_AES:  # the standard library cannot decrypt it: pyzipper
            return self._try(lambda pwd: self._aes_archive().open(info.filename, pwd=pwd))
        if not info.flag_bits & 1:
            return self.archive.open(info)
        return self._try(lambda pwd: self.archive.open(info, pwd=pwd))

    def _try(self, opener: Callable[[bytes], Any]):
        for password in self.passwords:
            try:
                stream = opener(password.encode())
            except RuntimeError:  # "Bad password"
                continue
            self.passwords.worked(password)
            return stream
        raise ExtractionError(PASSWORD_MESSAGE)

    def _aes_archive(self) -> Any:
        """WinZip AES members (AES-128/192/256, as WinZip and 7-Zip write them), read by
        pyzipper over the same file."""
        if self._aes is None:
            import pyzipper

            self._aes = pyzipper.AESZipFile(self.archive.filename or self.archive.fp)
        return self._aes

    def close(self) -> None:
        if self._aes is not None:
            self._aes.close()


WINZIP_AES = 99  # the compression method a WinZip AES member records


def _walk_zip(path: str, guard: Guard, sink: Sink) -> list[Member]:
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise ExtractionError("Not a valid zip archive") from exc
    reader = _ZipReader(archive, guard.settings)
    with archive, contextlib.closing(reader):
        entries = _checked(guard, ((e, info) for e, info in _zip_entries(archive) if not e.is_dir))
        return [_emit(name, e, sink, lambda info=info: reader.open(info)) for name, e, info in entries]


def _checked(guard: Guard, entries: Iterator[tuple[Entry, Any]]) -> list[tuple[str, Entry, Any]]:
    """(name, entry, info) of the entries the guard lets through, up to the budget's cut."""
    out = []
    for entry, info in entries:
        name = guard.check(entry)
        if name is None:
            break
        out.append((name, entry, info))
    return out


def _walk_tar(path: str, guard: Guard, sink: Sink) -> list[Member]:
    members = []
    try:
        with tarfile.open(path, "r|*") as archive:  # one pass: compressed tars never seek back
            for info in archive:
                if info.isdir():
                    continue
                entry = Entry(
                    name=info.name,
                    size=info.size,
                    packed=info.size,
                    mtime=int(info.mtime),
                    is_link=info.issym() or info.islnk(),
                )
                if not info.isfile():
                    entry.is_link = entry.is_link or info.isdev() or info.isfifo()
                name = guard.check(entry)
                if name is None:
                    break
                members.append(_emit(name, entry, sink, lambda info=info: archive.extractfile(info)))
                archive.members = []  # a stream keeps no list of what it passed
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise ExtractionError("Not a valid tar archive (it may be truncated)") from exc
    return members


class _SinkWriter:
    """Where py7zr writes one member: the sink's file, refusing more than was declared."""

    def __init__(self, member: Member, out: IO[bytes], limit: int) -> None:
        self.member, self.out, self.written = member, out, 0
        self.limit = min(max(member.size, 0), limit)

    def write(self, data: bytes) -> int:
        self.written += len(data)
        if self.written > self.limit:
            raise ContainerBomb(BOMB_MESSAGE + " (a member is larger than declared)")
        return self.out.write(data)

    def read(self, size: int | None = None) -> bytes:
        return b""

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset

    def flush(self) -> None:
        self.out.flush()

    def size(self) -> int:
        return self.written

    def close(self) -> None:
        """py7zr's end of this member; the walk closes the sink's file itself."""


class _SinkFactory:
    """py7zr asks this for a writer for each member it decompresses."""

    def __init__(self, targets: dict[str, tuple[Member, IO[bytes]]], limit: int) -> None:
        self.targets = targets
        self.limit = limit

    def create(self, filename: str) -> _SinkWriter:
        member, out = self.targets[filename]
        return _SinkWriter(member, out, self.limit)


def _walk_7z(path: str, guard: Guard, sink: Sink) -> list[Member]:

    archive, locked = _open_7z(path, guard.settings.passwords())
    with archive:
        members, targets = [], {}
        for info in archive.list():
            if info.is_directory:
                continue
            entry = Entry(
                name=info.filename,
                size=info.uncompressed or 0,
                packed=info.compressed or info.uncompressed or 0,
                mtime=int(info.creationtime.timestamp()) if info.creationtime else None,
                is_link=info.is_symlink,
            )
            name = guard.check(entry)
            if name is None:
                break
            member = Member(name, entry.size, entry.mtime)
            if locked:  # no password of the list opens it: every member is recorded so
                member.error = PASSWORD_MESSAGE
            else:
                out = sink(member)
                if out is not None:
                    targets[info.filename] = (member, out)
            members.append(member)
        if targets:
            try:
                archive.extract(
                    targets=list(targets), factory=_SinkFactory(targets, guard.settings.max_file_size_bytes)
                )
            except ContainerBomb:
                raise
            except Exception as exc:  # noqa: BLE001 - py7zr raises many kinds on bad data
                raise ExtractionError("Not a valid 7z archive (it may be truncated)") from exc
            finally:
                for _, out in targets.values():
                    out.close()
        return members


def _open_7z(path: str, passwords: tuple[str, ...]) -> tuple[Any, bool]:
    """The 7z archive, opened with the first password that works when it needs one, and
    whether its members stay locked (no password worked but the list is readable)."""
    import py7zr

    try:
        archive = py7zr.SevenZipFile(path)
        if not archive.needs_password():
            return archive, False
        archive.close()
        listed = True
    except py7zr.exceptions.PasswordRequired:
        listed = False  # the member list itself is encrypted
    except Exception as exc:  # noqa: BLE001 - py7zr raises many kinds on bad data
        raise ExtractionError("Not a valid 7z archive (it may be truncated)") from exc
    for password in passwords:
        try:
            with py7zr.SevenZipFile(path, password=password) as trial:
                if trial.testzip() is not None:
                    continue
            return py7zr.SevenZipFile(path, password=password), False
        except Exception:  # noqa: BLE001, S112 - a wrong password surfaces as any decoder error
            continue
    if not listed:
        raise ExtractionError(PASSWORD_MESSAGE)
    return py7zr.SevenZipFile(path), True


def _walk_rar(path: str, guard: Guard, sink: Sink) -> list[Member]:
    import rarfile

    try:
        archive = rarfile.RarFile(path)
    except rarfile.PasswordRequired as exc:
        archive = _rar_with_password(path, guard.settings.passwords(), exc)
    except (rarfile.Error, OSError, EOFError) as exc:
        raise ExtractionError("Not a valid rar archive") from exc
    with archive:
        entries = _checked(
            guard,
            (
                (
                    Entry(
                        name=info.filename,
                        size=info.file_size,
                        packed=info.compress_size,
                        mtime=_rar_time(info),
                        encrypted=info.needs_password(),
                        is_link=info.is_symlink(),
                    ),
                    info,
                )
                for info in archive.infolist()
                if not info.is_dir()
            ),
        )
        return [
            _emit(name, e, sink, lambda info=info: _rar_open(archive, info, guard.settings))
            for name, e, info in entries
        ]


def _rar_with_password(path: str, passwords: tuple[str, ...], first: Exception) -> Any:
    import rarfile

    for password in passwords:
        try:
            archive = rarfile.RarFile(path)
            archive.setpassword(password)
            return archive
        except rarfile.Error:
            continue
    raise ExtractionError(PASSWORD_MESSAGE) from first


def _rar_time(info: Any) -> int | None:
    import calendar

    if info.mtime is not None:
        return int(info.mtime.timestamp())
    try:
        return calendar.timegm((*info.date_time, 0, 0, 0))
    except (TypeError, ValueError, OverflowError):
        return None


def _rar_open(archive: Any, info: Any, settings: ExtractionSettings):
    import rarfile

    if not info.needs_password():
        if shutil.which(BSDTAR):
            return rar_member(archive.filename, info.filename)
        try:
            return archive.open(info)
        except rarfile.RarCannotExec as exc:
            raise ExtractionError(RAR_TOOL_MESSAGE) from exc
    if isinstance(info, rarfile.Rar3Info):
        return io.BytesIO(_rar3_decrypted(archive.filename, info, settings))
    for password in settings.passwords():
        try:
            stream = archive.open(info, pwd=password)
            stream.read(1)
            return archive.open(info, pwd=password)
        except rarfile.RarCannotExec as exc:  # bsdtar alone: it cannot decrypt
            raise ExtractionError(RAR_PASSWORD_TOOL_MESSAGE) from exc
        except (rarfile.Error, OSError):
            continue
    raise ExtractionError(PASSWORD_MESSAGE)


def _rar3_decrypted(path: str, info: Any, settings: ExtractionSettings) -> bytes:
    """A RAR 3 member (WinRAR 2.9 to 4) decrypted here with the first password whose result
    has the member's CRC. Debian's unar cannot decrypt these members (docs/formats.md), so the
    AES-128 key is derived with rarfile's RAR 3 key function, the data decrypted with
    `cryptography`, and a compressed member then unpacked from an unencrypted copy by the tool
    that reads the other members."""
    import rarfile
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    if info.salt is None or info.compress_size % 16:
        raise ExtractionError(PASSWORD_MESSAGE)  # RAR 2.0 encryption: not read
    with open(path, "rb") as archive:
        archive.seek(info.data_offset)
        packed = archive.read(info.compress_size)
    rarfile.HACK_TMP_DIR = settings.spool_dir  # a compressed member's copy stays in DATA_DIR
    clear = info.flags & ~(rarfile.RAR_FILE_PASSWORD | rarfile.RAR_FILE_SALT)
    for password in settings.passwords():
        key, iv = rarfile.rar3_s2k(password, info.salt)
        decryptor = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
        plain = decryptor.update(packed) + decryptor.finalize()
        try:
            data = (
                plain[: info.file_size]
                if info.compress_type == rarfile.RAR_M0
                else rarfile.rar3_decompress(
                    info.extract_version, info.compress_type, plain, info.file_size, clear, info.CRC
                )
            )
        except rarfile.RarCannotExec as exc:
            raise ExtractionError(RAR_TOOL_MESSAGE) from exc
        except (rarfile.Error, OSError):
            continue  # the tool refused what a wrong key made of the data
        if zlib.crc32(data) == info.CRC:
            return data
    raise ExtractionError(PASSWORD_MESSAGE)


RAR_TOOL_MESSAGE = "Reading this rar member needs unrar, unar, 7z or bsdtar"
RAR_PASSWORD_TOOL_MESSAGE = "Archive is password protected; decrypting a rar member needs unar or unrar"

_WALKERS: dict[str, Callable[[str, Guard, Sink], list[Member]]] = {
    "zip": _walk_zip,
    "tar": _walk_tar,
    "7z": _walk_7z,
    "rar": _walk_rar,
}


def _emit(name: str, entry: Entry, sink: Sink, opener: Callable[[], Any]) -> Member:
    """Offer one member to the sink; copy its bytes when the sink wants them."""
    member = Member(name, entry.size, entry.mtime)
    out = sink(member)
    if out is None:
        return member
    try:
        with opener() as stream:
            copy_bounded(stream, out, max(entry.size, 0))
    except ContainerBomb:
        raise
    except ExtractionError as exc:
        member.error = str(exc)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, RuntimeError, NotImplementedError) as exc:
        member.error = "Archive member could not be read (the archive may be damaged)"
        if isinstance(exc, NotImplementedError):
            member.error = "Archive member uses a compression Trawl cannot read"
    finally:
        out.close()
    return member


def walk_archive(
    path: str, settings: ExtractionSettings, sink: Sink, budget: Budget, container_size: int
) -> list[Member]:
    """Every file member of the archive, its wanted bytes handed to `sink`."""
    walker = _WALKERS[archive_kind(path)]
    return walker(path, Guard(settings, container_size, budget), sink)


def member_list(members: list[Member]) -> str:
    """The content of an archive document: one member path per line."""
    return "\n".join(m.name for m in members)


def unpack_archive(
    path: str, settings: ExtractionSettings, sink: Sink, budget: Budget
) -> tuple[Extracted, list[Member]]:
    """The archive document (its member list) and its members."""
    import os

    members = walk_archive(path, settings, sink, budget, os.path.getsize(path))
    kind = archive_kind(path)
    meta = {
        "format": kind,
        "member_count": len(members),
        "unpacked_bytes": sum(max(m.size, 0) for m in members),
    }
    encrypted = sum(1 for m in members if m.error == PASSWORD_MESSAGE)
    if encrypted:
        meta["encrypted_members"] = encrypted
    if budget.cut:
        meta["cut"] = True  # members past the tree's budget were left out
    return Extracted(type="archive", content=member_list(members), metadata=meta), members


def extract_archive(path: str, settings: ExtractionSettings) -> Extracted:
    """The archive document alone (nothing unpacked)."""
    return unpack_archive(path, settings, lambda member: None, Budget.start(settings, path))[0]


ARCHIVE = ExtractorSpec(
    type="archive",
    extract=extract_archive,
    extensions=("zip", "tar", "tgz", "tbz2", "txz", "7z", "rar"),
    suffixes=tuple(s for s in TAR_SUFFIXES if s.count(".") == 2),  # .tar.gz, .tar.bz2 ...
    heavy_modules=("py7zr", "rarfile", "pyzipper"),
    unpack=unpack_archive,
)
