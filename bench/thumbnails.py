"""Scan-time cost of thumbnails: the extraction child over the same files, without and with them.

Usage: python bench/thumbnails.py [--rounds 2]
Generates (once, under bench/work/thumbs-v1/) 100 photos of 12 Mpx, 100 five-page PDFs, 20
EPUBs and 20 comic archives, then runs the real extraction path (indexing/isolation.Extractor,
one reused child) over every file with THUMBNAIL_PX=0 (no thumbnail) and 320, alternating
rounds so both modes share the machine's load. Prints seconds per file by type (best round)
and the thumbnails' size, and writes bench/results/thumbnails-<date>.json.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import random
import sys
import time
import zipfile
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from PIL import Image  # noqa: E402

from webapp.indexing.extractors import ExtractionSettings  # noqa: E402
from webapp.indexing.isolation import Extractor  # noqa: E402

WORK = Path(__file__).resolve().parent / "work" / "thumbs-v1"
RESULTS = Path(__file__).resolve().parent / "results"
COUNTS = {"jpg": 100, "pdf": 100, "epub": 20, "cbz": 20}
WORDS = (
    "harbour tide gull lamp keeper storm boat rope chart north light night log wind "
    "sea rock bell fog shore wave"
).split()


def _photo(rng: random.Random, size: tuple[int, int] = (4000, 3000)) -> bytes:
    """A camera-sized JPEG with some texture (a flat colour would compress to nothing)."""
    small = Image.effect_noise((size[0] // 16, size[1] // 16), 60).convert("RGB")
    img = small.resize(size, Image.BILINEAR)
    img = Image.blend(img, Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3))), 0.5)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=88)
    return buf.getvalue()


def _pdf(rng: random.Random, pages: int = 5) -> bytes:
    import pymupdf

    doc = pymupdf.open()
    for _ in range(pages):
        page = doc.new_page()
        text = "\n".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(40))
        page.insert_textbox(pymupdf.Rect(50, 50, 545, 790), text, fontsize=10)
    return doc.tobytes()


def _zip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def _epub(cover: bytes) -> bytes:
    opf = (
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata/><manifest>'
        '<item id="c" href="c.xhtml" media-type="application/xhtml+xml"/>'
        '<item id="i" href="cover.jpg" media-type="image/jpeg" properties="cover-image"/>'
        '</manifest><spine><itemref idref="c"/></spine></package>'
    )
    container = (
        '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        '<rootfile full-path="content.opf"/></rootfiles></container>'
    )
    return _zip(
        {
            "mimetype": b"application/epub+zip",
            "META-INF/container.xml": container.encode(),
            "content.opf": opf.encode(),
            "c.xhtml": b"<html><body><p>text</p></body></html>",
            "cover.jpg": cover,
        }
    )


def build() -> list[Path]:
    """The files (made once)."""
    rng = random.Random(1)
    makers = {
        "jpg": lambda: _photo(rng),
        "pdf": lambda: _pdf(rng),
        "epub": lambda: _epub(_photo(rng, (1600, 2400))),
        "cbz": lambda: _zip({f"{n:03d}.jpg": _photo(rng, (1600, 2400)) for n in range(3)}),
    }
    files = []
    for ext, count in COUNTS.items():
        for n in range(count):
            path = WORK / ext / f"{n:03d}.{ext}"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(makers[ext]())
            files.append(path)
    return files


def run(files: list[Path], thumbnail_px: int) -> tuple[dict[str, float], int, int]:
    """Seconds per type for one pass, thumbnails made, their bytes."""
    seconds: dict[str, float] = {}
    made = size = 0
    with Extractor(ExtractionSettings(thumbnail_px=thumbnail_px)) as extractor:
        extractor.run(str(files[0]))  # the child's start-up is not the files' cost
        for path in files:
            start = time.perf_counter()
            result = extractor.run(str(path))
            ext = path.suffix[1:]
            seconds[ext] = seconds.get(ext, 0.0) + time.perf_counter() - start
            if result.doc.thumbnail:
                made += 1
                size += len(result.doc.thumbnail)
    return seconds, made, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    files = build()
    best: dict[int, dict[str, float]] = {0: {}, 320: {}}
    made = size = 0
    for _ in range(args.rounds):
        for px in (0, 320):
            seconds, n, total = run(files, px)
            for ext, s in seconds.items():
                best[px][ext] = min(best[px].get(ext, s), s)
            if px:
                made, size = n, total
    rows = []
    print("| type | files | without thumbnails (ms/file) | with (ms/file) | cost (ms/file) |")
    print("|---|---:|---:|---:|---:|")
    for ext, count in COUNTS.items():
        off, on = best[0][ext] / count * 1000, best[320][ext] / count * 1000
        rows.append({"type": ext, "files": count, "off_ms": round(off, 1), "on_ms": round(on, 1)})
        print(f"| {ext} | {count} | {off:.1f} | {on:.1f} | {on - off:+.1f} |")
    total_off, total_on = sum(best[0].values()), sum(best[320].values())
    print(
        f"| all | {len(files)} | {total_off:.2f} s | {total_on:.2f} s | "
        f"{(total_on / total_off - 1) * 100:+.0f} % |"
    )
    print(f"\n{made} thumbnails, {size / max(made, 1) / 1024:.1f} KB each on average")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"thumbnails-{date.today().isoformat()}.json"
    out.write_text(
        json.dumps(
            {
                "rows": rows,
                "total_off_s": total_off,
                "total_on_s": total_on,
                "thumbnails": made,
                "thumbnail_bytes": size,
                "rounds": args.rounds,
                "machine": platform.platform(),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
