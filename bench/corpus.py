"""Deterministic mixed benchmark corpus from the Python standard library's sources and docstrings.

Kinds: code (stdlib modules), notes (.txt), Markdown with YAML front matter, generated PDF
(pymupdf), DOCX, XLSX and PPTX. Every file's text comes from a seeded random generator over the
same docstring pool, so two machines with the same Python version get the same corpus text.
The corpus is cached under bench/work/corpus-<scale>-v<VERSION>/ and only rebuilt when missing.
"""

from __future__ import annotations

import ast
import json
import multiprocessing
import os
import random
import re
import shutil
import sys
import sysconfig
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from functools import cache, lru_cache
from pathlib import Path

VERSION = 1  # bump when the generated files change, so caches are rebuilt
WORK = Path(__file__).resolve().parent / "work"
BASE_MTIME = 1_700_000_000  # fixed file times (2023-11-14) keep rescans comparable between runs
FIXED_DATE = datetime(2024, 1, 15, 9, 30, 0)
FILES_PER_DIR = 40

# Files per kind for each scale: ~5.4k is the 5k target corpus (800 PDFs, 800 Office files).
SCALES: dict[str, dict[str, int]] = {
    "quick": {"code": 400, "txt": 170, "md": 130, "pdf": 150, "docx": 50, "xlsx": 50, "pptx": 50},
    "5k": {"code": 2200, "txt": 900, "md": 700, "pdf": 800, "docx": 300, "xlsx": 250, "pptx": 250},
    "50k": {"code": 22000, "txt": 9000, "md": 7000, "pdf": 8000, "docx": 3000, "xlsx": 2500, "pptx": 2500},
    # A million files as a NAS holds them: mostly small code, notes and Markdown pages in a deep
    # tree, with the 50k corpus's PDFs and Office files (the 5k mix scaled ten times) among them.
    "1m": {
        "snippet": 420_000,
        "memo": 300_000,
        "page": 264_000,
        "pdf": 8000,
        "docx": 3000,
        "xlsx": 2500,
        "pptx": 2500,
    },
}
ROOTS = {
    "code": "code",
    "txt": "notes",
    "md": "wiki",
    "pdf": "papers",
    "docx": "office/letters",
    "xlsx": "office/sheets",
    "pptx": "office/slides",
    "snippet": "projects",
    "memo": "home",
    "page": "kb",
}
EXTENSIONS = {"code": "py", "txt": "txt", "md": "md", "snippet": "py", "memo": "txt", "page": "md"}
DEEP = ("snippet", "memo", "page")  # small kinds, in a tree 3 to 5 folders deep
DEEP_FANOUT = 20
WORD = re.compile(r"[a-z]{3,}")
STOP = frozenset(
    """the and for that this with are from not use was but can you all any has have
its into more one only other than then there these they which will when what where who how also
may must should would could each been being such some same used uses using return returns value
values none true false default object objects none self args kwargs""".split()
)


@dataclass(frozen=True)
class Corpus:
    """A generated corpus on disk."""

    scale: str
    root: Path
    files: int
    bytes: int
    counts: dict[str, int]


def stdlib_files() -> list[Path]:
    """The standard library's .py files (no site-packages), in a stable order."""
    top = Path(sysconfig.get_paths()["stdlib"])
    found = [p for p in top.rglob("*.py") if "site-packages" not in p.parts]
    return sorted(found, key=lambda p: p.relative_to(top).as_posix())


@lru_cache(maxsize=1)
def paragraphs() -> tuple[str, ...]:
    """Docstrings of stdlib modules, classes and functions (>= 80 characters) as paragraphs."""
    cache = WORK / f"paragraphs-v{VERSION}-py{sys.version_info[0]}{sys.version_info[1]}.json"
    if cache.exists():
        return tuple(json.loads(cache.read_text()))
    found = _docstrings()
    WORK.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(found))
    return tuple(found)


def _docstrings() -> list[str]:
    out: list[str] = []
    for path in stdlib_files():
        try:
            tree = ast.parse(path.read_bytes())
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= 80:
                    out.append(" ".join(doc.split()))
    return list(dict.fromkeys(out))


@lru_cache(maxsize=1)
def vocabulary() -> tuple[str, ...]:
    """Words for names and titles: frequent lower-case words of the docstrings."""
    counts = Counter(w for p in paragraphs() for w in WORD.findall(p.lower()) if w not in STOP)
    return tuple(sorted(w for w, c in counts.items() if c >= 5 and len(w) >= 4))


def _text(rng: random.Random, n_paragraphs: int) -> list[str]:
    pool = paragraphs()
    return [pool[rng.randrange(len(pool))] for _ in range(n_paragraphs)]


def _title(rng: random.Random, words: int = 4) -> str:
    vocab = vocabulary()
    return " ".join(vocab[rng.randrange(len(vocab))] for _ in range(words)).capitalize()


def _rel_path(kind: str, i: int, rng: random.Random) -> str:
    vocab = vocabulary()
    folder = i // FILES_PER_DIR
    stem = "-".join(vocab[rng.randrange(len(vocab))] for _ in range(2))
    ext = EXTENSIONS.get(kind, kind)
    if kind in DEEP:
        return f"{ROOTS[kind]}/{_deep_folder(kind, folder)}/{stem}-{i:06d}.{ext}"
    fold_rng = random.Random(f"{kind}-dir-{folder}")
    dirname = f"{vocab[fold_rng.randrange(len(vocab))]}-{folder:04d}"
    return f"{ROOTS[kind]}/{dirname}/{stem}-{i:05d}.{ext}"


@lru_cache(maxsize=4096)
def _deep_folder(kind: str, folder: int) -> str:
    """Folder number -> a named path of its base-20 digits (3-4 levels), one more level for
    every third folder: projects/parser-03/tokens-11/.../ as people's trees nest."""
    vocab = vocabulary()
    digits = []
    while folder or len(digits) < 3:
        folder, digit = divmod(folder, DEEP_FANOUT)
        digits.append(digit)
    parts, prefix = [], kind
    for digit in reversed(digits):
        prefix = f"{prefix}/{digit}"
        parts.append(f"{vocab[random.Random(prefix).randrange(len(vocab))]}-{digit:02d}")
    if sum(digits) % 3 == 0:
        parts.append("drafts")
    return "/".join(parts)


# -- one writer per kind ---------------------------------------------------------------------


def _write_code(path: Path, rng: random.Random, i: int) -> None:
    files = _stdlib_cache()
    source = files[i % len(files)].read_text("utf-8", errors="replace")
    if i % 2:  # every other file is a bigger module: two stdlib files glued together
        source += "\n\n" + files[(i * 7 + 3) % len(files)].read_text("utf-8", errors="replace")
    header = f'"""{_title(rng, 6)}.\n\n{_text(rng, 1)[0]}\n"""\n# bench file {i}\n'
    path.write_text(header + source, "utf-8")


@lru_cache(maxsize=1)
def _stdlib_cache() -> tuple[Path, ...]:
    return tuple(stdlib_files())


@cache
def _stdlib_lines(n: int) -> tuple[str, ...]:
    return tuple(_stdlib_cache()[n].read_text("utf-8", errors="replace").splitlines())


def _write_snippet(path: Path, rng: random.Random, i: int) -> None:
    lines = _stdlib_lines(i % len(_stdlib_cache()))
    start = rng.randrange(max(1, len(lines) - 40))
    body = "\n".join(lines[start : start + rng.randint(30, 120)])
    path.write_text(f'"""{_title(rng, 6)}.\n\n{_text(rng, 1)[0]}\n"""\n{body}\n', "utf-8")


def _write_memo(path: Path, rng: random.Random, i: int) -> None:
    parts = _text(rng, rng.randint(1, 4))
    path.write_text(f"{_title(rng)}\n\n" + "\n\n".join(parts) + "\n", "utf-8")


def _write_page(path: Path, rng: random.Random, i: int) -> None:
    lines = [
        "---",
        f"title: {_title(rng)}",
        f"date: 20{18 + i % 7}-{1 + i % 12:02d}-{1 + i % 28:02d}",
        "---",
        "",
        f"# {_title(rng)}",
        "",
    ]
    for _ in range(rng.randint(1, 3)):
        lines += [f"## {_title(rng, 3)}", ""] + [p + "\n" for p in _text(rng, rng.randint(1, 2))]
    path.write_text("\n".join(lines), "utf-8")


def _write_txt(path: Path, rng: random.Random, i: int) -> None:
    parts = _text(rng, rng.randint(10, 50))
    path.write_text(f"{_title(rng)}\n\n" + "\n\n".join(parts) + "\n", "utf-8")


def _write_md(path: Path, rng: random.Random, i: int) -> None:
    vocab = vocabulary()
    tags = ", ".join(vocab[rng.randrange(len(vocab))] for _ in range(3))
    lines = [
        "---",
        f"title: {_title(rng)}",
        f"date: 2024-{1 + i % 12:02d}-{1 + i % 28:02d}",
        f"tags: [{tags}]",
        "author: Bench Writer",
        "---",
        "",
        f"# {_title(rng)}",
        "",
    ]
    for section in range(rng.randint(3, 8)):
        lines += [f"## {_title(rng, 3)}", ""] + [p + "\n" for p in _text(rng, rng.randint(2, 5))]
        if section % 3 == 1:
            lines += ["- " + w for w in _title(rng, 4).split()] + [""]
    path.write_text("\n".join(lines), "utf-8")


def _write_pdf(path: Path, rng: random.Random, i: int) -> None:
    import pymupdf

    doc = pymupdf.open()
    for _ in range(rng.randint(4, 20)):
        page = doc.new_page()
        text = "\n\n".join(_text(rng, 6))[:4200]
        page.insert_textbox(pymupdf.Rect(50, 50, 545, 800), text, fontsize=10, fontname="helv")
    doc.set_metadata(
        {
            "title": _title(rng),
            "author": "Bench Writer",
            "creationDate": "D:20240115093000",
            "modDate": "D:20240115093000",
        }
    )
    doc.save(str(path), deflate=True, no_new_id=True)
    doc.close()


def _write_docx(path: Path, rng: random.Random, i: int) -> None:
    import docx

    document = docx.Document()
    title = _title(rng)
    document.core_properties.title = title
    document.core_properties.created = document.core_properties.modified = FIXED_DATE
    document.add_heading(title, level=1)
    for _ in range(rng.randint(2, 6)):
        document.add_heading(_title(rng, 3), level=2)
        for para in _text(rng, rng.randint(2, 5)):
            document.add_paragraph(para)
    document.save(str(path))


def _write_xlsx(path: Path, rng: random.Random, i: int) -> None:
    import openpyxl

    book = openpyxl.Workbook()
    book.properties.title = _title(rng)
    book.properties.created = book.properties.modified = FIXED_DATE
    vocab = vocabulary()
    for s in range(rng.randint(1, 3)):
        sheet = book.active if s == 0 else book.create_sheet()
        sheet.title = f"{vocab[rng.randrange(len(vocab))][:20]}{s}"
        sheet.append(["id", "name", "amount", "note"])
        for row in range(rng.randint(20, 120)):
            note = _text(rng, 1)[0][:200]
            sheet.append([row, vocab[rng.randrange(len(vocab))], rng.randint(1, 10_000), note])
    book.save(str(path))


def _write_pptx(path: Path, rng: random.Random, i: int) -> None:
    import pptx

    deck = pptx.Presentation()
    deck.core_properties.title = _title(rng)
    deck.core_properties.created = deck.core_properties.modified = FIXED_DATE
    for _ in range(rng.randint(3, 10)):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = _title(rng, 3)
        slide.placeholders[1].text = "\n".join(p[:300] for p in _text(rng, 3))
        slide.notes_slide.notes_text_frame.text = _text(rng, 1)[0]
    deck.save(str(path))


WRITERS = {
    "code": _write_code,
    "txt": _write_txt,
    "md": _write_md,
    "pdf": _write_pdf,
    "docx": _write_docx,
    "xlsx": _write_xlsx,
    "pptx": _write_pptx,
    "snippet": _write_snippet,
    "memo": _write_memo,
    "page": _write_page,
}


def _make_one(task: tuple[str, str, int]) -> int:
    root, kind, i = task
    rng = random.Random(f"v{VERSION}-{kind}-{i}")
    path = Path(root) / _rel_path(kind, i, rng)
    path.parent.mkdir(parents=True, exist_ok=True)
    WRITERS[kind](path, rng, i)
    mtime = BASE_MTIME + i * 7 + len(kind)
    os.utime(path, (mtime, mtime))
    return path.stat().st_size


def corpus_dir(scale: str) -> Path:
    """Where the corpus of a scale is cached."""
    return WORK / f"corpus-{scale}-v{VERSION}"


def build(scale: str, processes: int | None = None, log=print) -> Corpus:
    """The corpus of this scale, generated unless a complete cached copy exists."""
    root = corpus_dir(scale)
    marker = root / ".complete.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        return Corpus(scale, root / "files", info["files"], info["bytes"], info["counts"])
    if root.exists():
        shutil.rmtree(root)
    (root / "files").mkdir(parents=True)
    counts = SCALES[scale]
    tasks = [(str(root / "files"), kind, i) for kind, n in counts.items() for i in range(n)]
    log(f"Generating the {scale} corpus ({len(tasks)} files) in {root} ...")
    started = time.monotonic()
    paragraphs(), vocabulary()  # built once before forking
    with multiprocessing.get_context("fork").Pool(processes or os.cpu_count()) as pool:
        total = sum(pool.imap_unordered(_make_one, tasks, chunksize=256))
    info = {
        "files": len(tasks),
        "bytes": total,
        "counts": counts,
        "seconds": round(time.monotonic() - started, 1),
    }
    marker.write_text(json.dumps(info))
    log(f"Corpus ready: {len(tasks)} files, {total / 1e6:.1f} MB in {info['seconds']} s")
    return Corpus(scale, root / "files", len(tasks), total, counts)


def restore_mtimes(corpus: Corpus) -> None:
    """Put every file's mtime back to its generated value (after a 1% change test)."""
    for kind, n in corpus.counts.items():
        for i in range(n):
            rng = random.Random(f"v{VERSION}-{kind}-{i}")
            path = corpus.root / _rel_path(kind, i, rng)
            mtime = BASE_MTIME + i * 7 + len(kind)
            os.utime(path, (mtime, mtime))


def all_files(corpus: Corpus) -> list[Path]:
    """Every generated file, in generation order."""
    out = []
    for kind, n in corpus.counts.items():
        for i in range(n):
            out.append(corpus.root / _rel_path(kind, i, random.Random(f"v{VERSION}-{kind}-{i}")))
    return out


def queries(per_kind: int, seed: int = 8) -> dict[str, list[str]]:
    """A fixed query set: exact words, two-word queries, quoted phrases, one-typo words,
    questions of 8-12 words and a word with filters and all four facets (request bodies)."""
    rng = random.Random(seed)
    pool = paragraphs()
    counts = Counter(w for p in pool for w in set(WORD.findall(p.lower())))
    common = sorted(w for w, c in counts.items() if 20 <= c <= 2000 and w not in STOP and len(w) >= 5)
    exact = [rng.choice(common) for _ in range(per_kind)]
    two = []
    while len(two) < per_kind:
        words = [
            w for w in WORD.findall(rng.choice(pool).lower()) if w in counts and w not in STOP and len(w) >= 4
        ]
        if len(set(words)) >= 2:
            a, b = rng.sample(sorted(set(words)), 2)
            two.append(f"{a} {b}")
    phrases = []
    while len(phrases) < per_kind:
        words = rng.choice(pool).split()
        k = rng.randrange(max(1, len(words) - 2))
        pair = [re.sub(r"[^a-z]", "", w.lower()) for w in words[k : k + 2]]
        if (
            len(pair) == 2
            and all(len(w) >= 3 and w not in STOP for w in pair)
            and all(re.fullmatch(r"[A-Za-z]+", w) for w in words[k : k + 2])
        ):
            phrases.append(f'"{pair[0]} {pair[1]}"')
    long_words = [w for w in common if len(w) >= 6]
    typos = [_typo(rng.choice(long_words), rng) for _ in range(per_kind)]
    questions = [_question(rng.choice(pool), rng) for _ in range(per_kind)]
    facets = [
        {
            "q": f"{rng.choice(common)} type:{rng.choice(FILTER_TYPES)} modified:>=2023 "
            f"-{rng.choice(common)}",
            "facets": ["type", "extension", "source_id", "year"],
        }
        for _ in range(per_kind)
    ]
    return {
        "exact": exact,
        "two_word": two,
        "phrase": phrases,
        "typo": typos,
        "question": questions,
        "facets": facets,
    }


FILTER_TYPES = ("code", "text", "markdown", "pdf", "docx", "xlsx", "pptx")
OPENERS = ("how do I", "what is the", "why does the", "where can I find the", "which")


def _question(paragraph: str, rng: random.Random) -> str:
    """A natural-language question of 8-12 words built around a stretch of a paragraph."""
    opener = rng.choice(OPENERS)
    words = [w for w in re.findall(r"[A-Za-z]+", paragraph)]
    size = rng.randint(8, 12) - len(opener.split())
    start = rng.randrange(max(1, len(words) - size))
    return f"{opener} {' '.join(words[start : start + size]).lower()}?"


def _typo(word: str, rng: random.Random) -> str:
    """One edit (substitution or transposition) away from word, never in the first letter."""
    k = rng.randrange(1, len(word) - 1)
    if rng.random() < 0.5 and word[k] != word[k + 1]:
        return word[:k] + word[k + 1] + word[k] + word[k + 2 :]
    letters = [c for c in "abcdefghijklmnopqrstuvwxyz" if c != word[k]]
    return word[:k] + rng.choice(letters) + word[k + 1 :]
