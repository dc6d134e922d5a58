"""py7zr against libarchive (Debian's bsdtar) decompressing the same 7z archive.

`python -m bench.sevenzip` writes a 7z of 200 text files (26 MiB of random words, LZMA2) into
a temporary folder and decompresses every member twice with each: py7zr into counting writers
(as Trawl reads members), `bsdtar -xOf` to /dev/null. Needs bsdtar (libarchive-tools).
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
import time


class _Counter:
    """A py7zr writer that only counts."""

    def __init__(self) -> None:
        self.n = 0

    def write(self, data: bytes) -> int:
        self.n += len(data)
        return len(data)

    def read(self, size: int | None = None) -> bytes:
        return b""

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset

    def flush(self) -> None:
        pass

    def size(self) -> int:
        return self.n

    def close(self) -> None:
        pass


class _Factory:
    def __init__(self) -> None:
        self.writers: list[_Counter] = []

    def create(self, filename: str) -> _Counter:
        self.writers.append(_Counter())
        return self.writers[-1]


def main() -> None:
    """Print the seconds of each reader, two rounds."""
    import py7zr

    rng = random.Random(1)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
        for _ in range(5000)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.7z")
        with py7zr.SevenZipFile(path, "w") as archive:
            for i in range(200):
                text = " ".join(rng.choice(words) for _ in range(20000))
                archive.writestr(text.encode(), f"doc{i}.txt")
        print(f"7z of {os.path.getsize(path) // 1024} KiB")
        for round_ in range(2):
            started, factory = time.monotonic(), _Factory()
            with py7zr.SevenZipFile(path) as archive:
                archive.extract(factory=factory)
            ours = time.monotonic() - started
            started = time.monotonic()
            subprocess.run(["bsdtar", "-xOf", path], stdout=subprocess.DEVNULL, check=True)
            ref = time.monotonic() - started
            mib = sum(w.n for w in factory.writers) // 2**20
            print(f"round {round_ + 1}: py7zr {ours:.2f} s ({mib} MiB), bsdtar/libarchive {ref:.2f} s")


if __name__ == "__main__":
    main()
