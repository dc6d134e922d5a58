"""EXIF/XMP/IPTC reading shared by the image and RAW extractors (GPS only when allowed)."""

from __future__ import annotations

from typing import Any

from ._util import clean_str, local_name, parse_xml
from .base import ExtractionError

SKIP_TAGS = {
    "MakerNote",
    "ExifOffset",
    "ExifInteroperabilityOffset",
    "GPSInfo",
    "PrintImageMatching",
    "UserComment",
    "InteropOffset",
    "JPEGInterchangeFormat",
    "JPEGInterchangeFormatLength",
    "StripOffsets",
    "StripByteCounts",
    "TileOffsets",
    "TileByteCounts",
    "SubIFDs",
    "XMLPacket",
    "IPTCNAA",
    "ImageResources",
    "InterColorProfile",
    "ComponentsConfiguration",
    "ExifVersion",
    "FlashPixVersion",
    "CFAPattern",
    "SceneType",
    "FileSource",
    "DNGPrivateData",
    "OECF",
    "SpatialFrequencyResponse",
    "ImageSourceData",
    "ColorMatrix1",
    "ColorMatrix2",
    "CameraCalibration1",
    "CameraCalibration2",
    "ForwardMatrix1",
    "ForwardMatrix2",
    "AnalogBalance",
    "AsShotNeutral",
    "BlackLevel",
}
XP_TAGS = {"XPTitle", "XPComment", "XPAuthor", "XPKeywords", "XPSubject"}
SUMMARY_ORDER = (
    "Make",
    "Model",
    "LensMake",
    "LensModel",
    "DateTimeOriginal",
    "DateTime",
    "ExposureTime",
    "FNumber",
    "ISOSpeedRatings",
    "PhotographicSensitivity",
    "FocalLength",
    "Artist",
    "Copyright",
    "ImageDescription",
    "Software",
    "Orientation",
)
IPTC_FIELDS = {
    (2, 5): "ObjectName",
    (2, 25): "Keywords",
    (2, 80): "By-line",
    (2, 90): "City",
    (2, 101): "Country",
    (2, 105): "Headline",
    (2, 110): "Credit",
    (2, 116): "CopyrightNotice",
    (2, 120): "Caption",
    (2, 95): "Province-State",
    (2, 55): "DateCreated",
}
XMP_FIELDS = {
    "title",
    "description",
    "subject",
    "creator",
    "rights",
    "Model",
    "Make",
    "LensModel",
    "Rating",
    "Label",
    "CreatorTool",
    "Headline",
    "City",
    "Country",
    "State",
}
MAX_TAG_TEXT = 2000


def tag_value(name: str, value: Any) -> Any:
    """A JSON-safe, readable value for one EXIF tag, or None to drop it."""
    if isinstance(value, bytes):
        if name in XP_TAGS:
            return clean_str(value.decode("utf-16-le", "replace")).rstrip("\x00") or None
        if len(value) > 256 or not value.strip(b"\x00"):
            return None
        return clean_str(value.decode("utf-8", "replace")).strip() or None
    if isinstance(value, str):
        return _fix_mojibake(clean_str(value)).strip()[:MAX_TAG_TEXT] or None
    if isinstance(value, tuple):
        if len(value) > 16:
            return None
        items = [tag_value(name, v) for v in value]
        return [i for i in items if i is not None] or None
    if isinstance(value, int):
        return value
    try:
        number = float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        return clean_str(str(value))[:MAX_TAG_TEXT]
    if number != number or number in (float("inf"), float("-inf")):
        return None
    if name == "ExposureTime" and 0 < number < 1:
        return f"1/{round(1 / number)}"
    return round(number, 4)


def _fix_mojibake(text: str) -> str:
    """EXIF ASCII tags often hold UTF-8 that was read as Latin-1 ('SkÃ¥ne' -> 'Skåne')."""
    if text.isascii():
        return text
    try:
        return text.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return text


def exif_tags(exif: Any, index_gps: bool) -> dict[str, Any]:
    """IFD0 and Exif sub-IFD tags by name; GPS as decimal degrees only when index_gps."""
    from PIL import ExifTags

    tags: dict[str, Any] = {}
    sources = [dict(exif.items())]
    for ifd in (ExifTags.IFD.Exif, ExifTags.IFD.Interop):
        try:
            sources.append(dict(exif.get_ifd(ifd).items()))
        except Exception:  # broken sub-IFD pointers are common in the wild
            continue
    for source in sources:
        for key, value in source.items():
            name = ExifTags.TAGS.get(key)
            if not name or name in SKIP_TAGS or name.startswith("GPS"):
                continue
            readable = tag_value(name, value)
            if readable is not None and readable != "":
                tags.setdefault(name, readable)
    if index_gps:
        tags.update(_gps(exif))
    return tags


def _gps(exif: Any) -> dict[str, Any]:
    from PIL import ExifTags

    try:
        gps = exif.get_ifd(ExifTags.IFD.GPSInfo)
        lat = _degrees(gps[2], gps.get(1, "N"))
        lon = _degrees(gps[4], gps.get(3, "E"))
    except Exception:  # missing or malformed GPS IFD
        return {}
    result = {"GPSLatitude": lat, "GPSLongitude": lon}
    try:
        result["GPSAltitude"] = round(float(gps[6]), 1)
    except Exception:
        pass
    return result


def _degrees(parts: Any, ref: Any) -> float:
    degrees, minutes, seconds = (float(p) for p in parts)
    value = degrees + minutes / 60 + seconds / 3600
    ref = ref.decode() if isinstance(ref, bytes) else str(ref)
    return round(-value if ref.strip().upper() in ("S", "W") else value, 6)


def xmp_fields(data: bytes | str | None, index_gps: bool) -> dict[str, Any]:
    """Selected Dublin Core / tiff / photoshop fields from an XMP packet."""
    if not data:
        return {}
    raw = data.encode("utf-8") if isinstance(data, str) else data
    start = raw.find(b"<x:xmpmeta")
    end = raw.rfind(b"</x:xmpmeta>")
    if start < 0 or end < 0:
        return {}
    try:
        root = parse_xml(raw[start : end + len(b"</x:xmpmeta>")])
    except ExtractionError:
        return {}
    found: dict[str, list[str]] = {}
    for element in root.iter():
        for key, value in element.attrib.items():
            _add_xmp(found, local_name(key), value, index_gps)
        name = local_name(element.tag)
        if name in XMP_FIELDS:
            texts = [t.strip() for t in element.itertext() if t.strip()]
            for text in texts:
                _add_xmp(found, name, text, index_gps)
    return {k: v[0] if len(v) == 1 else v for k, v in found.items()}


def _add_xmp(found: dict[str, list[str]], name: str, value: str, index_gps: bool) -> None:
    if name not in XMP_FIELDS or (not index_gps and "GPS" in name):
        return
    value = clean_str(value)[:MAX_TAG_TEXT]
    if value and value not in found.setdefault(name, []):
        found[name].append(value)


def iptc_fields(image: Any) -> dict[str, Any]:
    """IPTC-IIM fields (caption, keywords, by-line, place) when present."""
    from PIL import IptcImagePlugin

    try:
        info = IptcImagePlugin.getiptcinfo(image) or {}
    except Exception:  # malformed IPTC blocks
        return {}
    fields: dict[str, Any] = {}
    for key, name in IPTC_FIELDS.items():
        value = info.get(key)
        if value is None:
            continue
        values = value if isinstance(value, list) else [value]
        texts = [clean_str(v.decode("utf-8", "replace")) if isinstance(v, bytes) else str(v) for v in values]
        fields[name] = texts[0] if len(texts) == 1 else texts
    return fields


def summary(tags: dict[str, Any]) -> list[str]:
    """`Key: value` lines, well-known camera tags first."""
    ordered = [k for k in SUMMARY_ORDER if k in tags] + sorted(k for k in tags if k not in SUMMARY_ORDER)
    lines = []
    for key in ordered:
        value = tags[key]
        if isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        lines.append(f"{key}: {value}")
    return lines
