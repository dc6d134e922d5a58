"""Extractor registry and formats, driven by the shared corpus (../shared/corpus/MANIFEST.tsv)."""

from __future__ import annotations

import csv
import datetime
import json
import re
import time
import zipfile
from pathlib import Path

import pytest

from tests.bounded import child_output
from tests.conftest import CORPUS_SKIP, corpus_dir, require_corpus
from webapp.indexing.extractors import (
    DOC_TYPES,
    Extracted,
    ExtractionError,
    ExtractionSettings,
    ExtractorSpec,
    detect_type,
    extract,
)
from webapp.indexing.isolation import Extractor

PASSWORD_NOTE = re.compile(r"user password required|ENCRYPTED \(OLE2")
KEY_VALUE = re.compile(r"^[A-Za-z][\w -]*=")


def manifest_rows(prefix: str) -> list[dict]:
    """Manifest rows whose path starts with prefix (empty when the corpus is absent)."""
    corpus = corpus_dir()
    if corpus is None:
        return []
    with open(corpus / "MANIFEST.tsv", encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return [r for r in rows if r["path"].startswith(prefix)]


def corpus_params(prefix: str) -> list:
    rows = manifest_rows(prefix)
    if not rows:
        return [pytest.param(None, marks=pytest.mark.skip(reason=CORPUS_SKIP))]
    return [pytest.param(r, id=r["path"]) for r in rows]


def normalize(text: str) -> str:
    """Case-folded, whitespace-collapsed, quote-free text for probe matching."""
    return " ".join(re.sub(r"[\"'`]", "", text).casefold().split())


def haystack(doc) -> str:
    """Everything searchable about a document: content, title, metadata keys and values."""
    parts = [doc.content, doc.title or ""]

    def walk(value, key=""):
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        else:
            parts.extend([str(value), f"{key}: {value}", f"{key}={value}"])

    walk(doc.metadata)
    return normalize("\n".join(parts))


def probe_found(probe: str, doc) -> bool:
    """A probe is found as is, or (Key=Value form) by its value."""
    text = haystack(doc)
    if normalize(probe) in text:
        return True
    return bool(KEY_VALUE.match(probe)) and normalize(probe.split("=", 1)[1]) in text


@pytest.fixture(scope="module")
def extractor():
    with Extractor(ExtractionSettings()) as ex:
        yield ex


@pytest.mark.parametrize("row", corpus_params("real/"))
def test_real_file_type_and_probe(extractor, row):
    path = str(corpus_dir() / row["path"])
    result = extractor.run(path)
    assert result.doc.type == row["type"]
    if PASSWORD_NOTE.search(row["notes"]):
        assert result.status == "failed"
        assert result.error_message in ("PDF is password protected", "Document is password protected")
        return
    assert result.status == "success", result.error_message
    json.dumps(result.doc.metadata)  # metadata must be JSON-safe
    if row["probe"]:
        assert probe_found(row["probe"], result.doc), (row["probe"], result.doc.content[:500])


@pytest.mark.parametrize("row", corpus_params("hostile/"))
def test_hostile_file_is_contained(extractor, row):
    path = str(corpus_dir() / row["path"])
    settings = extractor.settings
    started = time.monotonic()
    result = extractor.run(path)
    elapsed = time.monotonic() - started
    assert elapsed < settings.timeout_for(detect_type(path)) + 2
    assert result.status in ("success", "failed")
    if result.status == "failed":
        assert result.error_message and len(result.error_message) < 120
    json.dumps(result.doc.metadata)
    assert result.doc.type in DOC_TYPES
    after = extractor.run(str(corpus_dir() / "real/text/exiftool-Text2.txt"))
    assert after.status == "success" and "Latin1" in after.doc.content


def test_hostile_xml_entities_never_expand(extractor):
    corpus = require_corpus()
    for name in (
        "defusedxml-xmlbomb.xml",
        "defusedxml-quadratic.xml",
        "tika-testXXE.xml",
        "defusedxml-external_file.xml",
    ):
        path = corpus / "hostile/config" / name
        result = extractor.run(str(path))
        assert len(result.doc.content) <= path.stat().st_size
        assert "root:x:0:0" not in result.doc.content


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("notes.TXT", "text"),
        ("README.md", "markdown"),
        ("main.rs", "code"),
        ("Makefile", "code"),
        (".env", "config"),
        ("project-coveragerc", "config"),
        ("settings.yaml", "config"),
        ("paper.pdf", "pdf"),
        ("book.epub", "epub"),
        ("clip.webm", "media"),
        ("IMG_0001.CR3", "raw_image"),
        ("photo.heic", "image"),
        ("issue.cbr", "comic"),
        ("movie.srt", "subtitle"),
        ("data.bin", "file"),
        ("noextension", "file"),
    ],
)
def test_detect_type(name, expected):
    assert detect_type(f"/srv/files/{name}") == expected


def test_unknown_type_is_metadata_only_file(tmp_path):
    path = tmp_path / "blob.xyz"
    path.write_bytes(b"\x00\x01 secret words")
    doc = extract(str(path), ExtractionSettings())
    assert (doc.type, doc.content) == ("file", "")


def test_content_is_capped_and_cut_recorded(tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("word " * 1000, encoding="utf-8")
    doc = extract(str(path), ExtractionSettings(max_content_chars=100))
    assert len(doc.content) == 100
    assert doc.metadata["truncated"] is True
    assert doc.metadata["truncated_at_chars"] == 100


def _careless(path: str, settings: ExtractionSettings) -> Extracted:
    """A plug-in that only extracts: long text with a NUL, metadata json cannot encode."""
    return Extracted(
        type="text",
        content="a\x00b " * 500,
        title="  T\x00itle  ",
        metadata={
            "when": datetime.date(2026, 1, 2),
            "ratio": float("nan"),
            "raw": b"bytes",
            "tags": {"x", "y"} - {"y"},
        },
    )


def test_the_registry_enforces_the_contract_for_every_extractor(tmp_path):
    path = tmp_path / "file.careless"
    path.write_text("whatever", encoding="utf-8")
    plugin = ExtractorSpec(type="text", extract=_careless, extensions=("careless",))
    doc = extract(str(path), ExtractionSettings(max_content_chars=50), extra=(plugin,))
    assert len(doc.content) == 50 and "\x00" not in doc.content and doc.title == "Title"
    assert doc.metadata["truncated"] is True and doc.metadata["original_chars"] == 1500
    assert json.loads(json.dumps(doc.metadata, allow_nan=False)) == {
        "when": "2026-01-02",
        "ratio": None,
        "raw": "bytes",
        "tags": ["x"],
        "original_chars": 1500,
        "truncated": True,
        "truncated_at_chars": 50,
    }


def test_text_encodings_detected(tmp_path):
    cases = {
        "latin.txt": ("Café crème brûlée à la façon de ma grand-mère".encode("cp1252"), "cp1252"),
        "utf16.txt": ("\ufeffGrüße aus Köln".encode("utf-16-le"), "utf-16-le-bom"),
        "plain.txt": ("naïve résumé".encode(), "utf-8"),
    }
    for name, (data, encoding) in cases.items():
        (tmp_path / name).write_bytes(data)
        doc = extract(str(tmp_path / name), ExtractionSettings())
        assert doc.metadata["encoding"] == encoding
        assert data.decode(encoding.replace("-bom", "")).lstrip("\ufeff") == doc.content


def test_markdown_front_matter(tmp_path):
    path = tmp_path / "post.md"
    path.write_text("---\ntitle: Hello Trawl\ntags: [search, files]\n---\n# Heading\nBody text\n")
    doc = extract(str(path), ExtractionSettings())
    assert doc.title == "Hello Trawl"
    assert doc.metadata["front_matter"]["tags"] == ["search", "files"]
    assert doc.content.startswith("# Heading") and "title:" not in doc.content


def test_markdown_yaml_aliases_are_refused(tmp_path):
    path = tmp_path / "lol.md"
    bomb = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(8)
    )
    path.write_text(f"---\n{bomb}---\nbody\n")
    doc = extract(str(path), ExtractionSettings())
    assert "front_matter_error" in doc.metadata
    assert len(json.dumps(doc.metadata)) < 10_000


def test_markdown_front_matter_reads_the_same_with_and_without_an_alias_check(tmp_path):
    # without a `*` no alias can occur and libyaml reads it; with one, the checking loader does
    plain, starred = tmp_path / "plain.md", tmp_path / "starred.md"
    plain.write_text("---\ntitle: Notes\nbase: &b {x: 1}\ntags: [a, b]\n---\nbody\n")
    starred.write_text("---\ntitle: Notes\nbase: &b {x: 1}\ntags: [a, b]\nnote: '*'\n---\nbody\n")
    fast = extract(str(plain), ExtractionSettings()).metadata["front_matter"]
    checked = extract(str(starred), ExtractionSettings()).metadata["front_matter"]
    assert fast == {"title": "Notes", "base": {"x": 1}, "tags": ["a", "b"]}
    assert checked == {**fast, "note": "*"}


# Files built so that a regex of their extractor backtracks: each took seconds to minutes
# (blanks after `# Puffin`: cubic; the others quadratic), so the file was killed at the
# extraction timeout and never indexed. (name, text, the title it must give)
_BLANK_HEADING = "Puffin" + " " * 5_000 + "notes"
HOSTILE_FOR_PATTERNS = {
    "markdown heading with a run of blanks": (
        "notes.md",
        f"# {_BLANK_HEADING} ##\n\npuffin\n",
        _BLANK_HEADING,
    ),
    "markdown of empty lines": ("notes.md", "\n" * 300_000 + "Puffin\n======\npuffin\n", "Puffin"),
    "subtitle line of tag openers": (
        "movie.srt",
        "1\n00:00:01,000 --> 00:00:02,000\n" + "<" * 200_000 + " puffin\n",
        None,
    ),
    "subtitle dialogue of override openers": (
        "movie.ass",
        "[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n"
        "Dialogue: 0,0:00:01.00,0:00:02.00,Default,,0,0,0,,{\\i1}" + "{" * 400_000 + " puffin\n",
        None,
    ),
    "rtf title of blanks": (
        "letter.rtf",
        "{\\rtf1{\\info{\\title" + " " * 150_000 + "{\\b x}}}Dear puffin}",
        None,
    ),
    "xlsx number format of brackets": ("book.xlsx", "[" * 400_000 + "0", None),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_FOR_PATTERNS))
def test_a_file_built_to_make_a_pattern_backtrack_is_indexed_not_timed_out(tmp_path, name):
    """Every extractor pattern runs in time linear in the file: the bound is far above the
    fraction of a second these take, and far below what backtracking would need."""
    filename, text, title = HOSTILE_FOR_PATTERNS[name]
    path = tmp_path / filename
    if filename.endswith(".xlsx"):  # `text` is the number format of the cell under `puffin`
        from openpyxl import Workbook

        book = Workbook()
        book.active.append(["puffin"])
        book.active.append([12])
        book.active["A2"].number_format = text
        book.save(path)
    else:
        path.write_text(text, encoding="utf-8")
    child = (
        "import json, sys; from webapp.indexing.extractors import ExtractionSettings, extract;"
        "doc = extract(sys.argv[1], ExtractionSettings()); print(json.dumps([doc.title, doc.content]))"
    )
    found_title, content = json.loads(child_output(child, str(path), what=f"extracting {name!r}"))
    assert "puffin" in content
    assert found_title == title


def _write_zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def test_zip_decompression_bomb_refused(tmp_path):
    path = tmp_path / "bomb.docx"
    _write_zip(path, {"word/document.xml": b"\0" * (20 * 1024 * 1024)})
    with pytest.raises(ExtractionError, match="decompression bomb"):
        extract(str(path), ExtractionSettings())


def test_docx_internal_entities_not_expanded(tmp_path):
    xml = (
        b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "AAAAAAAAAA">'
        b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]>'
        b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        b"<w:body><w:p><w:r><w:t>visible &c; text</w:t></w:r></w:p></w:body></w:document>"
    )
    path = tmp_path / "entities.docx"
    _write_zip(path, {"word/document.xml": xml})
    doc = extract(str(path), ExtractionSettings())
    assert "visible" in doc.content
    assert "AAAAAAAAAA" not in doc.content


def test_xlsx_row_bound_recorded(tmp_path, monkeypatch):
    from openpyxl import Workbook

    from webapp.indexing.extractors import xlsx

    book = Workbook()
    sheet = book.active
    sheet.title = "Inventory"
    for row in range(1, 31):
        sheet.append([f"item{row}", row * 2])
    book.save(tmp_path / "big.xlsx")
    monkeypatch.setattr(xlsx, "MAX_ROWS_PER_SHEET", 10)
    doc = extract(str(tmp_path / "big.xlsx"), ExtractionSettings())
    assert "item10" in doc.content and "item11" not in doc.content
    assert doc.metadata["truncated_sheets"] == ["Inventory"]


def test_gps_only_when_enabled():
    corpus = require_corpus()
    path = str(corpus / "real/image/tika-testJPEG_GEO.jpg")
    plain = extract(path, ExtractionSettings())
    assert "gps" not in haystack(plain)
    located = extract(path, ExtractionSettings(index_gps=True))
    assert located.metadata["exif"]["GPSLatitude"] == pytest.approx(12.54321)
    assert located.metadata["exif"]["GPSLongitude"] == pytest.approx(-54.1234)
    assert "GPSLatitude" in located.content


def test_password_protected_pdf_message():
    corpus = require_corpus()
    path = corpus / "real/pdf/docfetcher-encrypted-password-docfetcher.pdf"
    with pytest.raises(ExtractionError, match="^PDF is password protected$"):
        extract(str(path), ExtractionSettings())


def test_image_only_pdf_flagged():
    corpus = require_corpus()
    doc = extract(str(corpus / "real/pdf/sist2-scanned_text.pdf"), ExtractionSettings())
    assert doc.metadata["image_only"] is True
    assert doc.metadata["page_count"] == 1


def test_settings_from_config():
    settings = ExtractionSettings.from_config(
        {"MAX_CONTENT_CHARS": "1000", "EXTRACT_TIMEOUT_PDF": 12, "INDEX_GPS": "true", "UNRELATED": 1}
    )
    assert settings.max_content_chars == 1000 and settings.index_gps is True
    assert settings.timeout_for("pdf") == 12
    assert settings.timeout_for("subtitle") == 5
    assert settings.timeout_for("docx") == 30


def test_huge_text_read_only_up_to_the_cap(tmp_path):
    path = tmp_path / "huge.log"
    path.write_text("é" * 10_000, encoding="utf-8")  # 20,000 bytes
    doc = extract(str(path), ExtractionSettings(max_content_chars=1001))
    assert doc.metadata["encoding"] == "utf-8"
    assert doc.content == "é" * 1001
    assert doc.metadata["truncated"] is True
