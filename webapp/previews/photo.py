"""A photo's facts for the document page: the EXIF fields a person reads (camera, lens, when
taken, exposure, place), once, in their own words, with a map link for GPS.

Pure: the image extractor's metadata in, labelled rows out (dates stay as written: the page's
`meta_value` shows them in its language, ui/metadata.py). The remaining tags are listed once
under them ("All fields"), never a second time in the metadata table or the text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from flask_babel import lazy_gettext as _l

# EXIF writes dates as `2021:01:13 14:12:00` (the camera's clock, no zone)
_EXIF_DATE = re.compile(r"(\d{4})[:-](\d{2})[:-](\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?")
MAP_URL = "https://www.openstreetmap.org/?mlat={lat}&mlon={lon}#map=15/{lat}/{lon}"
# the top-level copies of EXIF fields that search uses (facets, `camera:`): not shown again
SHOWN_ELSEWHERE = {"camera_make", "camera_model", "date_taken", "exif", "format", "width", "height", "mode"}
# EXIF tags the compact table shows (in its own words): not listed again under "All fields"
IN_TABLE = {
    "Make",
    "Model",
    "LensModel",
    "DateTimeOriginal",
    "ExposureTime",
    "FNumber",
    "ISOSpeedRatings",
    "PhotographicSensitivity",
    "FocalLength",
    "GPSLatitude",
    "GPSLongitude",
    "GPSAltitude",
    "lens",
}


@dataclass(frozen=True)
class Fact:
    """One row of the table: its label, its value, and for a place a link to a map."""

    key: str
    label: Any
    value: Any
    map_url: str | None = None


def exif_date(value: Any) -> datetime | None:
    """An EXIF date (`2021:01:13 14:12:00`, also with dashes or a T) as a naive datetime."""
    match = _EXIF_DATE.match(str(value or "").strip())
    if match is None:
        return None
    try:
        return datetime(*(int(part or 0) for part in match.groups()))
    except ValueError:  # 0000:00:00 00:00:00, written by cameras without a clock
        return None


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _exposure(exif: Mapping[str, Any]) -> str | None:
    """`1/1600 s · f/5.6 · ISO 400 · 194 mm` from the fields the camera wrote."""
    parts = []
    if exif.get("ExposureTime"):
        parts.append(f"{exif['ExposureTime']} s")
    f_number = _number(exif.get("FNumber"))
    if f_number:
        parts.append(f"f/{f_number:g}")
    iso = exif.get("ISOSpeedRatings") or exif.get("PhotographicSensitivity")
    if iso:
        parts.append(f"ISO {iso}")
    focal = _number(exif.get("FocalLength"))
    if focal:
        parts.append(f"{focal:g} mm")
    return " · ".join(parts) or None


def _place(meta: Mapping[str, Any], exif: Mapping[str, Any]) -> Fact | None:
    """The GPS position (kept only where the source indexes GPS) with a link to a map."""
    lat = _number(exif.get("GPSLatitude", meta.get("GPSLatitude")))
    lon = _number(exif.get("GPSLongitude", meta.get("GPSLongitude")))
    if lat is None or lon is None or not (-90 <= lat <= 90 and -180 <= lon <= 180):
        return None
    value = f"{lat:.6f}, {lon:.6f}"
    altitude = _number(exif.get("GPSAltitude"))
    if altitude is not None:
        value += f" ({altitude:g} m)"
    return Fact("gps", _l("Place"), value, map_url=MAP_URL.format(lat=f"{lat:.6f}", lon=f"{lon:.6f}"))


def _camera(meta: Mapping[str, Any], exif: Mapping[str, Any]) -> str | None:
    make = str(meta.get("camera_make") or exif.get("Make") or "").strip()
    model = str(meta.get("camera_model") or exif.get("Model") or "").strip()
    return (model if make and model.lower().startswith(make.lower()) else f"{make} {model}").strip() or None


def photo_facts(meta: Mapping[str, Any]) -> list[Fact]:
    """The compact table of a photo: size, camera, lens, when taken, exposure, place."""
    exif = meta.get("exif") if isinstance(meta.get("exif"), Mapping) else {}
    facts: list[Fact] = []
    if meta.get("width") and meta.get("height"):
        size = f"{meta['width']} × {meta['height']} px"
        facts.append(Fact("size", _l("Picture"), f"{meta.get('format') or ''} {size}".strip()))
    camera = _camera(meta, exif)
    if camera:
        facts.append(Fact("camera", _l("Camera"), camera))
    lens = exif.get("LensModel") or meta.get("lens")
    if lens:
        facts.append(Fact("lens", _l("Lens"), lens))
    taken = meta.get("date_taken") or exif.get("DateTimeOriginal")
    if exif_date(taken) is not None:  # a camera without a clock writes 0000:00:00 00:00:00
        facts.append(Fact("taken", _l("Taken"), str(taken)))
    exposure = _exposure(exif)
    if exposure:
        facts.append(Fact("exposure", _l("Exposure"), exposure))
    place = _place(meta, exif)
    if place is not None:
        facts.append(place)
    return facts


def other_fields(meta: Mapping[str, Any]) -> list[Fact]:
    """Every other field (EXIF tags by name, XMP, IPTC), OCR's note aside."""
    exif = meta.get("exif") if isinstance(meta.get("exif"), Mapping) else {}
    rows = {**{k: v for k, v in meta.items() if k not in SHOWN_ELSEWHERE and k != "ocr"}, **exif}
    rows = {k: v for k, v in rows.items() if k not in IN_TABLE}
    return [Fact(key, key, rows[key]) for key in sorted(rows)]
