"""Members of an archive read by an external tool (bsdtar) as a stream: RAR members that
rarfile cannot decompress itself, for archives and comic books alike."""

from __future__ import annotations

import re
import subprocess

BSDTAR = "bsdtar"
_PATTERN_CHARS = re.compile(r"([*?\[\]\\])")


def rar_member(path: str, name: str) -> _ToolOutput:
    """A member of a RAR archive (stored or compressed, RAR 3 or 5) read by bsdtar from the
    archive itself. (Through rarfile, bsdtar is handed the member on a pipe, which libarchive
    cannot read: every compressed member failed.) The name is escaped: bsdtar takes patterns."""
    return _ToolOutput([BSDTAR, "-x", "-O", "-f", path, _PATTERN_CHARS.sub(r"\\\1", name)])


class _ToolOutput:
    """The bytes a reading tool writes to stdout, as a stream; closing it ends the tool. A tool
    that fails gives an OSError at the end of its output."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
        )

    def read(self, size: int = -1) -> bytes:
        data = self.proc.stdout.read(size)
        if not data and self.proc.wait() != 0:
            raise OSError(f"{BSDTAR} could not read this member")
        return data

    def close(self) -> None:
        self.proc.stdout.close()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def __enter__(self) -> _ToolOutput:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
