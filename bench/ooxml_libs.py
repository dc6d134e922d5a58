"""Our DOCX/XLSX/PPTX extractors against python-docx, openpyxl and python-pptx on the same files.

`python -m bench.ooxml_libs [FOLDER ...]` extracts every .docx/.xlsx/.pptx below the folders
(default: the shared corpus and the quick bench corpus) once with each method, each method and
format in a fresh process, and prints seconds, peak RSS growth and files that failed.
The libraries get the simplest complete use: every paragraph and table cell (docx), every cell
value of every sheet in read-only mode (xlsx), every text frame and table of every slide (pptx).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

FOLDERS = ("../shared/corpus/real", "bench/work/corpus-quick-v1/files")
FORMATS = ("docx", "xlsx", "pptx")


def _ours(path: str) -> int:
    from webapp.indexing.extractors import ExtractionSettings, extract

    return len(extract(path, ExtractionSettings()).content)


def _python_docx(path: str) -> int:
    import docx

    doc = docx.Document(path)
    parts = [p.text for p in doc.paragraphs]
    for table in doc.tables:
        parts += [cell.text for row in table.rows for cell in row.cells]
    return len("\n".join(parts))


def _openpyxl(path: str) -> int:
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    size = 0
    for sheet in book.worksheets:
        for row in sheet.iter_rows(values_only=True):
            size += sum(len(str(v)) for v in row if v is not None)
    book.close()
    return size


def _python_pptx(path: str) -> int:
    import pptx

    size = 0
    for slide in pptx.Presentation(path).slides:
        for shape in slide.shapes:
            if shape.has_text_frame:
                size += len(shape.text_frame.text)
            if getattr(shape, "has_table", False) and shape.has_table:
                size += sum(len(c.text) for row in shape.table.rows for c in row.cells)
    return size


METHODS = {
    "ours": {"docx": _ours, "xlsx": _ours, "pptx": _ours},
    "library": {"docx": _python_docx, "xlsx": _openpyxl, "pptx": _python_pptx},
}
IMPORTS = {
    "ours": ("webapp.indexing.extractors",),
    "library": {"docx": ("docx",), "xlsx": ("openpyxl",), "pptx": ("pptx",)},
}


def measure(method: str, fmt: str, paths: list[str]) -> dict:
    """In this process: import, then extract every file; time and peak RSS growth."""
    imports = IMPORTS[method] if method == "ours" else IMPORTS[method][fmt]
    for module in imports:
        __import__(module)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    func, failed, chars = METHODS[method][fmt], [], 0
    started = time.perf_counter()
    for path in paths:
        try:
            chars += func(path)
        except Exception as exc:  # a library refusing a file is a figure, not a crash
            failed.append(f"{Path(path).name}: {type(exc).__name__}")
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "method": method,
        "format": fmt,
        "files": len(paths),
        "seconds": round(seconds, 3),
        "peak_rss_growth_mb": round((peak - base) / 1024, 1),
        "chars": chars,
        "failed": failed,
    }


def main(folders: list[str]) -> None:
    """Run every method on every format, each in a fresh interpreter, and print a table."""
    for fmt in FORMATS:
        paths = sorted(str(p) for folder in folders for p in Path(folder).rglob(f"*.{fmt}"))
        for method in METHODS:
            out = subprocess.run(
                [sys.executable, "-m", "bench.ooxml_libs", "--one", method, fmt, json.dumps(paths)],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout)
            print(
                f"{fmt:5} {method:8} {r['files']:4} files {r['seconds']:7.3f} s "
                f"+{r['peak_rss_growth_mb']:6.1f} MB  {r['chars']:9} chars  "
                f"failed {len(r['failed'])}: {', '.join(r['failed'][:6])}"
            )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        print(json.dumps(measure(sys.argv[2], sys.argv[3], json.loads(sys.argv[4]))))
    else:
        main(sys.argv[1:] or list(FOLDERS))
