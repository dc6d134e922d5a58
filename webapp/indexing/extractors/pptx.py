"""PowerPoint (.pptx): slide text in order (groups and tables included) and speaker notes."""

from __future__ import annotations

from typing import Any

from webapp import imaging

from ._util import MAX_COVER_BYTES, local_name, read_member
from .base import Extracted, ExtractionError, ExtractionSettings, ExtractorSpec
from .ooxml import open_package, package_metadata, paragraph_text, read_xml, relationships

_PRESENTATION = "ppt/presentation.xml"


def _paragraphs(root: Any) -> list[str]:
    lines = []
    for element in root.iter():
        if local_name(element.tag) == "p":
            text = paragraph_text(element)
            if text.strip():
                lines.append(text)
    return lines


def _slide_parts(archive: Any) -> list[str]:
    """Slide part names in presentation order."""
    root = read_xml(archive, _PRESENTATION)
    if root is None:
        raise ExtractionError("Not a valid PPTX file")
    rels = relationships(archive, _PRESENTATION)
    parts = []
    for element in root.iter():
        if local_name(element.tag) == "sldId":
            rid = next((v for k, v in element.attrib.items() if local_name(k) == "id" and k != "id"), None)
            rel = rels.get(rid or "")
            if rel and rel["type"] == "slide":
                parts.append(rel["target"])
    return parts


def _slide_text(archive: Any, part: str) -> tuple[list[str], list[str]]:
    root = read_xml(archive, part)
    lines = _paragraphs(root) if root is not None else []
    notes: list[str] = []
    for rel in relationships(archive, part).values():
        if rel["type"] == "notesSlide":
            notes_root = read_xml(archive, rel["target"])
            if notes_root is not None:
                notes.extend(n for n in _paragraphs(notes_root) if not n.strip().isdigit())
    return lines, notes


def extract_pptx(path: str, settings: ExtractionSettings) -> Extracted:
    """Extract a .pptx file."""
    sections: list[str] = []
    with open_package(path, "PPTX", settings) as archive:
        slides = _slide_parts(archive)
        note_count = 0
        for number, part in enumerate(slides, start=1):
            lines, notes = _slide_text(archive, part)
            block = [f"Slide {number}"] + lines
            if notes:
                note_count += 1
                block += ["Notes:"] + notes
            sections.append("\n".join(block))
        meta = package_metadata(archive)
    meta["slide_count"] = len(slides)
    meta["slides_with_notes"] = note_count
    content = "\n\n".join(sections)
    return Extracted(type="pptx", content=content, title=meta.get("title"), metadata=meta)


PICTURE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")


def _slide_pictures(archive: Any, part: str) -> list[str]:
    """The picture parts a slide shows (`a:blip r:embed`), in the order they are placed."""
    rels = relationships(archive, part)
    root = read_xml(archive, part)
    names: list[str] = []
    for element in root.iter() if root is not None else ():
        if local_name(element.tag) != "blip":
            continue
        rid = next((v for k, v in element.attrib.items() if local_name(k) == "embed"), "")
        rel = rels.get(rid)
        target = rel["target"] if rel and rel["type"] == "image" else ""
        if target.lower().endswith(PICTURE_EXTENSIONS) and target not in names:
            names.append(target)
    return names


def slide_pictures(path: str, settings: ExtractionSettings) -> list[list[str]]:
    """Each slide's pictures (part names in the package), slides in presentation order."""
    with open_package(path, "PPTX", settings) as archive:
        return [_slide_pictures(archive, part) for part in _slide_parts(archive)]


def slide_picture(path: str, number: int, settings: ExtractionSettings) -> Any:
    """The `number`th picture (1-based) of the deck, counted slide after slide, opened lazily;
    ExtractionError when there is no such picture."""
    with open_package(path, "PPTX", settings) as archive:
        names = [name for part in _slide_parts(archive) for name in _slide_pictures(archive, part)]
        if not 1 <= number <= len(names):
            raise ExtractionError(f"This presentation has no picture {number}")
        data = read_member(archive, names[number - 1], MAX_COVER_BYTES)
    return imaging.open_image(data)


PPTX = ExtractorSpec(
    type="pptx",
    extract=extract_pptx,
    extensions=("pptx", "pptm", "ppsx", "potx"),
    heavy_modules=("lxml.etree",),
)
