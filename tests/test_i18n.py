"""The UI's languages: German from Accept-Language or the account's switch, a complete German
catalogue that keeps up with the templates, numbers in the page's language, an English API."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

from tests.conftest import require_corpus
from tests.ui_helpers import ADMIN, csrf, post, setup_admin

ROOT = Path(__file__).resolve().parent.parent
PO = ROOT / "translations" / "de" / "LC_MESSAGES" / "messages.po"
MO = PO.with_suffix(".mo")
DE = {"Accept-Language": "de-DE,de;q=0.9,en;q=0.5"}
EN = {"Accept-Language": "en-GB,en;q=0.8"}


@pytest.fixture
def ui(client):
    setup_admin(client)
    return client


def _html(resp) -> str:
    return resp.get_data(as_text=True)


def test_login_page_follows_accept_language(ui):
    post(ui, "/logout")
    german = _html(ui.get("/login", headers=DE))
    assert '<html lang="de">' in german
    assert "<h1>Anmelden</h1>" in german and "Benutzername" in german and "Passwort" in german
    english = _html(ui.get("/login", headers=EN))
    assert '<html lang="en">' in english and "<h1>Log in</h1>" in english
    # no header, or only languages Trawl does not have: English
    assert "<h1>Log in</h1>" in _html(ui.get("/login"))
    assert "<h1>Log in</h1>" in _html(ui.get("/login", headers={"Accept-Language": "fr, ja;q=0.5"}))
    # a wrong password is said in German too
    bad = ui.post(
        "/login", headers=DE, data={"csrf_token": csrf(ui), "username": "admin", "password": "nope"}
    )
    assert bad.status_code == 401 and "Benutzername oder Passwort ist falsch" in _html(bad)
    # the error page, heading and message
    missing = _html(ui.get("/no-such-page", headers=DE))
    assert "<h1>Nicht gefunden</h1>" in missing and "Zurück zur Suche" in missing


def test_search_and_sources_pages_in_german(ui, make_tree):
    root = make_tree("notes", {"a.txt": "alpha"})
    form = {"name": "Notes", "root_path": str(root), "schedule_choice": "manual"}
    assert post(ui, "/sources/new", form).status_code == 302
    search = _html(ui.get("/", headers=DE))
    assert "Ihre Dateien durchsuchen" in search and "Alle Quellen" in search
    assert ">Quellen</a>" in search and ">Abmelden</button>" in search
    assert "Beste Übereinstimmung" in search  # the sort labels of the Python side
    sources = _html(ui.get("/sources", headers=DE))
    assert "<h1>Quellen</h1>" in sources and "Jetzt scannen" in sources
    assert "Nur manuell" in sources  # the schedule in words
    assert "Noch nie gescannt" in sources
    new = _html(ui.get("/sources/new", headers=DE))
    assert "Einschlussmuster" in new and "Jeden Tag um 02:00" in new
    # messages of the UI's Python: a toast-or-flash of a scan action, a flash after a delete
    queued = post(ui, "/sources/notes/reindex", headers=DE, follow_redirects=True)
    assert "Scan von „Notes“ eingereiht" in _html(queued)
    resp = post(ui, "/sources/notes/delete", headers=DE, follow_redirects=True)
    assert "Quelle „Notes“ gelöscht." in _html(resp)


def test_account_switch_persists(ui, app):
    page = _html(ui.get("/account", headers=EN))
    assert 'name="language"' in page and ">Deutsch</option>" in page
    resp = post(ui, "/account/language", {"language": "de"}, page="/account", headers=EN)
    assert resp.status_code == 302
    # the saved choice wins over the browser's English
    after = _html(ui.get("/account", headers=EN))
    assert "<h1>Ihr Konto</h1>" in after and "Sprache gespeichert." in after
    assert '<option value="de" lang="de" selected>' in after
    # it is kept on the account: another browser (no cookie) logging in gets German
    with app.test_client() as other:
        other.post("/login", data={"csrf_token": csrf(other), **ADMIN})
        assert "<h1>Ihr Konto</h1>" in _html(other.get("/account", headers=EN))
    # and in a cookie, so the login page after logging out stays German
    post(ui, "/logout", headers=EN)
    assert "<h1>Anmelden</h1>" in _html(ui.get("/login", headers=EN))
    # automatic again: the browser's language decides
    ui.post("/login", data={"csrf_token": csrf(ui), **ADMIN})
    post(ui, "/account/language", {"language": ""}, page="/account")
    assert "<h1>Your account</h1>" in _html(ui.get("/account", headers=EN))
    assert "<h1>Ihr Konto</h1>" in _html(ui.get("/account", headers=DE))
    bad = post(ui, "/account/language", {"language": "xx"}, page="/account", follow_redirects=True)
    assert "Unknown language: xx" in _html(bad)


def test_numbers_and_sizes_follow_the_language(app):
    from webapp.ui.filters import filesize, num, reltime

    with app.test_request_context("/", headers=DE):
        assert num(1234567) == "1.234.567"
        assert filesize(1536) == "1,5 KB" and filesize(1) == "1 Byte"
        assert reltime("2026-11-20T10:00:00", now=_dt("2026-11-20T10:05:00")) == "vor 5 Minuten"
    with app.test_request_context("/", headers=EN):
        assert num(1234567) == "1,234,567"
        assert filesize(1536) == "1.5 KB" and filesize(2) == "2 bytes"
        assert reltime("2026-11-20T10:00:00", now=_dt("2026-11-20T10:05:00")) == "5 minutes ago"


def _dt(text: str):
    from datetime import datetime

    return datetime.fromisoformat(text)


def test_api_messages_stay_english(client):
    resp = client.post(
        "/api/auth/login", headers=DE, json={"username": "nobody", "password": "wrong password"}
    )
    assert resp.status_code in (401, 409) and resp.get_json()["detail"].isascii()


def test_german_catalogue_is_complete():
    catalog = read_po(PO.open("rb"), locale="de")
    untranslated = [
        m.id
        for m in catalog
        if m.id and (m.fuzzy or not (all(m.string) if isinstance(m.string, tuple) else m.string))
    ]
    assert untranslated == [], f"translate these in {PO} (make translations): {untranslated}"
    # every placeholder of a message is in its translation
    for m in catalog:
        if m.id and m.python_format:
            ids = m.id if isinstance(m.id, tuple) else (m.id,)
            strings = m.string if isinstance(m.string, tuple) else (m.string,)
            wanted = {p for text in ids for p in _placeholders(text)}
            for text in strings:
                assert _placeholders(text) <= wanted, (m.id, text)


def _placeholders(text: str) -> set[str]:
    import re

    return set(re.findall(r"%\(\w+\)s", text))


def test_catalogue_is_up_to_date_with_the_templates(tmp_path):
    pot = tmp_path / "messages.pot"
    subprocess.run(
        [
            str(Path(sys.executable).with_name("pybabel")),
            "extract",
            "-F",
            "babel.cfg",
            "-k",
            "_l",
            "--no-location",
            "-o",
            str(pot),
            ".",
        ],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    marked = {m.id for m in read_po(pot.open("rb")) if m.id}
    catalog = read_po(PO.open("rb"), locale="de")
    have = {m.id for m in catalog if m.id}
    assert marked - have == set(), "new strings: run `make translations` and translate them"
    assert have - marked == set(), "strings no longer used: run `make translations`"
    # the committed .mo is the compiled .po
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    assert MO.read_bytes() == compiled.getvalue(), "run `make translations` (the .mo lags its .po)"


# -- every page in German, to the last word --------------------------------------------------------

# words that are English and never German: the catalogue's English misses them when a page
# writes text that was never marked for translation
ENGLISH_WORDS = re.compile(r"\b(the|and|of|is|not|found|with|from|waiting|files?|never|read|left|sent)\b")
NAMES = {"Redis"}  # labels that are names, the same in every language
_PIECES = re.compile(r"%\(\w+\)s|<[^>]+>|[.:;,()…“”„\"'!?·—–/]")


def _english_phrases() -> set[str]:
    """The literal pieces of the catalogue's English messages that their German does not use
    (`Search syntax`, `waiting for OCR` ...): on a German page each would be English left over."""
    catalog = read_po(PO.open("rb"), locale="de")
    german = " ".join(
        " ".join(m.string) if isinstance(m.string, tuple) else m.string for m in catalog if m.id
    )
    phrases = set()
    for m in catalog:
        for text in m.id if isinstance(m.id, tuple) else (m.id,):
            for piece in _PIECES.split(text or ""):
                piece = " ".join(piece.split())
                if len(piece) >= 4 and re.search("[a-z]{3}", piece) and piece not in german:
                    phrases.add(piece)
    return phrases


def _visible(html: str) -> str:
    """What a person reads on a page: its text and its titles, labels and placeholders, less
    the documents' own text (their preview, paths and names in <code>/<pre>)."""
    import lxml.html

    tree = lxml.html.fromstring(html)
    data = (  # the files' own words, paths and names, and the user's name
        "//script|//style|//pre|//code|//kbd|//textarea|//*[@id='preview-text']"
        "|//*[contains(@class, 'snippet')]|//*[contains(@class, 'result-path')]"
        "|//*[@data-mail-headers]/div/dd"
        "|//*[contains(@class, 'user-name')]|//*[contains(@class, 'mail-body')]"
    )
    for el in tree.xpath(data):
        el.drop_tree()
    attributes = [a for a in tree.xpath("//@title|//@placeholder|//@aria-label|//@alt") if "/" not in a]
    text = " ".join([tree.text_content(), *attributes])
    return re.sub(r"\S*/\S*|\badmin\b", " ", text)  # paths, the admin's name


def _german_pages(ui, make_tree, run_jobs) -> dict[str, str]:
    """Every page of a source with a text, a message and a photo, asked for in German."""
    from email.message import EmailMessage

    mail = EmailMessage()
    mail["Subject"], mail["From"], mail["To"] = "Möwenzählung", "Ada <ada@example.org>", "bob@example.org"
    mail["Date"] = "Mon, 14 Jan 2019 09:30:00 +0000"
    mail.set_content("Die Möwen am Hafen wurden gezählt.")
    root = make_tree(
        "logbuch",
        {
            "brief.txt": "Die Möwe sitzt am Hafen.",
            "gruss.eml": bytes(mail),
            "hafen.jpg": _photo(),
            "tresor.pdf": _sealed_pdf(),  # a file that fails: its reason is shown
        },
    )
    assert post(ui, "/sources/new", {"name": "Logbuch", "root_path": str(root)}).status_code == 302
    post(ui, "/sources/logbuch/reindex")
    run_jobs()
    listed = _html(ui.get("/?sort=basename:asc", headers=DE))
    found = re.findall(r'<a class="result-link" href="/documents/([^"?]+)[^"]*"[^>]*>', listed)
    paths = [
        "/",
        "/?q=Möwe",
        "/?q=Möwe+modified:>zz",
        "/?q=Möwe+size:>zz",
        "/?q=Möwe+title:",
        "/?q=Möwe&limit=0",
        "/?q=qqqzzz",
        *[f"/documents/{doc_id}" for doc_id in found],
        "/documents/logbuch--000000000000",
        "/no-such-page",
        "/sources",
        "/sources/new",
        "/sources/logbuch/edit",
        "/sources/logbuch/delete",
        "/sources/logbuch/failed",
        "/status",
        "/account",
        "/account/tokens",
        "/users",
        "/users/1",
    ]
    assert len(found) == 4, found
    return {path: _html(ui.get(path, headers=DE)) for path in paths}


def _german_strings() -> set[str]:
    """Every German string of the catalogue."""
    catalog = read_po(PO.open("rb"), locale="de")
    strings = [m.string for m in catalog if m.id]
    return {t for s in strings for t in (s if isinstance(s, tuple) else (s,))}


def _row_labels(html: str) -> list[str]:
    """The labels of a page's tables and lists of facts (metadata keys, EXIF tags, a mail's
    headers): each must be a string of the catalogue, never a key as the file wrote it."""
    import lxml.html

    tree = lxml.html.fromstring(html)
    cells = tree.xpath("//th[@scope='row']|//dl/div/dt|//dl[contains(@class, 'meta-nested')]/dt")
    return [" ".join(cell.text_content().split()) for cell in cells]


def _photo() -> bytes:
    """A JPEG with the EXIF tags a camera writes (the page's "All fields" names each one)."""
    import io

    from PIL import ExifTags, Image

    exif = Image.Exif()
    exif[0x0132] = "2021:01:13 14:12:00"  # DateTime
    exif.update({0x010F: "Nikon", 0x0110: "D750", 0x0112: 1, 0x011A: 300.0, 0x011B: 300.0})
    exif.update({0x0128: 2, 0x0131: "Lightroom", 0x0213: 1})  # ResolutionUnit, Software, YCbCr
    sub = exif.get_ifd(ExifTags.IFD.Exif)
    sub.update({0x9003: "2021:01:13 14:12:00", 0x829A: 0.004, 0x829D: 5.6, 0x8827: 400})
    sub.update({0x9209: 16, 0x9207: 5, 0xA403: 0, 0xA001: 1, 0x9204: 0.0, 0xA002: 64, 0xA003: 48})
    photo = io.BytesIO()
    Image.new("RGB", (64, 48), (30, 60, 220)).save(photo, "JPEG", exif=exif)
    return photo.getvalue()


def _sealed_pdf() -> bytes:
    """A PDF locked with a password Trawl does not know."""
    import pymupdf

    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "Geheim")
    return doc.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, owner_pw="owner", user_pw="user")


def test_every_page_in_german_has_no_english_left(ui, make_tree, run_jobs):
    """Lists every English phrase of the catalogue, and every plainly English word, that a
    page asked for in German still shows (query errors, not-found pages, mail labels,
    metadata keys, token scopes, the phases' progress)."""
    phrases = _english_phrases()
    left = {}
    pages = _german_pages(ui, make_tree, run_jobs)
    said = " ".join(" ".join(_visible(html).split()) for html in pages.values())
    for german in (
        "modified:>zz ist kein Datum (z. B. 2024, 2024-03 oder 2024-03-15)",  # a query error
        "Dokument „logbuch--000000000000“ nicht gefunden",  # a not-found page
        "Von",  # the mail's labels
        "BildJPEG 64 × 48 px",  # a photo's table: its labels (a <th> then its <td>)
        "13.01.2021, 14:12:00",  # an EXIF date in German form
        "Fehler: der Beobachter läuft nicht",
        "Trawl konnte diese Datei nicht lesen: PDF ist passwortgeschützt.",  # a failed file's page
        "Einheit der AuflösungZoll",  # an EXIF tag (ResolutionUnit 2) under "All fields"
        "BelichtungsmessungMehrfeld",  # MeteringMode 5: a choice in words
        "BlitzNicht ausgelöst",  # Flash 16: did not fire
    ):
        assert german in said, german
    labels = _german_strings()
    for path, html in pages.items():
        found = _english_left(html, phrases, labels)
        if found:
            left[path] = found
    assert left == {}, f"English on German pages (mark them and run `make translations`): {left}"


def _english_left(html: str, phrases: set[str], labels: set[str]) -> list[str]:
    """The English a German page shows: phrases of the catalogue's English, plainly English
    words, and row labels that are not strings of the catalogue."""
    text = _visible(html)
    found = sorted(p for p in phrases if re.search(rf"(?<!\w){re.escape(p)}(?!\w)", text))
    found += sorted({m.group(0) for m in ENGLISH_WORDS.finditer(text)})
    return found + sorted(f"label {label!r}" for label in _row_labels(html) if label not in labels | NAMES)


def test_form_errors_in_german(ui, make_tree):
    """What the forms say back (a folder outside the roots or another source's, a schedule, a
    pattern, the path test, a saved search without a name) reads German."""
    root = make_tree("hafen", {"a.txt": "Möwe"})
    other = str(make_tree("andere", {"b.txt": "Möwe"}))
    assert post(ui, "/sources/new", {"name": "Hafen", "root_path": str(root)}).status_code == 302
    sent = {
        "outside": ("/sources/new", {"name": "X", "root_path": "/etc"}),
        "overlap": ("/sources/new", {"name": "X", "root_path": str(root)}),
        "cron": ("/sources/new", {"name": "X", "root_path": other, "schedule_choice": "custom", "cron": "x"}),
        "pattern": ("/sources/new", {"name": "X", "root_path": other, "include_patterns": "/abs"}),
        "path": ("/sources/test-path", {"root_path": "relative"}),
        "saved": ("/saved-searches", {"name": "", "q": "Möwe"}),
    }
    said = {
        key: _html(post(ui, path, form, page="/sources/new", headers=DE, follow_redirects=True))
        for key, (path, form) in sent.items()
    }
    assert "Ordner: der Pfad liegt außerhalb der erlaubten Wurzelordner" in said["outside"]
    assert "ist der Ordner der Quelle „Hafen“" in said["overlap"]
    assert "muss aus 5 Feldern bestehen" in said["cron"]
    assert "muss relativ zum Wurzelordner sein, nicht absolut" in said["pattern"]
    assert (
        "Der Pfad muss absolut sein" in said["path"]
        and "Verwenden Sie einen vollständigen Pfad" in said["path"]
    )
    assert "Nicht gespeichert: Name muss 1 bis 100 Zeichen lang sein" in said["saved"]
    phrases, labels = _english_phrases(), _german_strings()
    left = {key: _english_left(html, phrases, labels) for key, html in said.items()}
    assert left == dict.fromkeys(said, []), left


def test_every_metadata_key_has_a_label():
    """The keys the extractors write for the corpus's files (a few of each kind) each have a
    label of the catalogue: a German document page names none by its key."""
    from webapp.indexing.extractors import extract, find_extractor
    from webapp.indexing.extractors.base import ExtractionError, ExtractionSettings
    from webapp.ui.metadata import LABELS
    from webapp.ui.tag_labels import TAG_LABELS

    corpus = require_corpus() / "real"
    files = [path for kind in sorted(corpus.iterdir()) for path in sorted(kind.iterdir())[:4]]
    keys = set()
    for path in files:
        if find_extractor(str(path)) is None:
            continue
        try:
            keys |= set(extract(str(path), ExtractionSettings()).metadata or {})
        except ExtractionError:
            continue
    assert len(keys) > 40
    assert sorted(keys - LABELS.keys() - TAG_LABELS.keys()) == []


# -- why a file was not read, and a picture's tags ----------------------------------------------


def test_every_picture_tag_has_a_label():
    """Each tag the image extractors can keep (Pillow's EXIF names, XMP, IPTC) has a label
    of the catalogue, so no photo's page shows one by its English tag name."""
    from PIL import ExifTags

    from webapp.indexing.extractors.exif import IPTC_FIELDS, SKIP_TAGS, XMP_FIELDS
    from webapp.ui.metadata import LABELS
    from webapp.ui.tag_labels import TAG_LABELS

    exif = {name for name in ExifTags.TAGS.values() if name not in SKIP_TAGS and not name.startswith("GPS")}
    kept = exif | XMP_FIELDS | set(IPTC_FIELDS.values())
    kept |= {"GPSLatitude", "GPSLongitude", "GPSAltitude", "Comment"}  # set by the extractors
    assert sorted(kept - LABELS.keys() - TAG_LABELS.keys()) == []


def _extractor_messages() -> set[str]:
    """The messages the extractors and their child process give for a file they could not
    read, from the source (`ExtractionError(...)`, `*_MESSAGE = ...`, `member.error = ...`,
    `Called(error=...)`), a value in a message written as 7."""
    import ast

    trees = [ast.parse(path.read_text()) for path in (ROOT / "webapp" / "indexing").rglob("*.py")]
    names = {
        node.targets[0].id: node.value.value
        for tree in trees
        for node in tree.body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }
    said = [_said_node(node) for tree in trees for node in ast.walk(tree)]
    found = {_message(node, names) for node in said if node is not None}
    return found - {None, names["TIMEOUT_MESSAGE"]}  # the first words of the timeout's message


def _said_node(node):
    """The expression of a message in `node`, when it gives one for a file."""
    import ast

    called = getattr(node.func, "id", "") if isinstance(node, ast.Call) else ""
    if called in ("ExtractionError", "ContainerBomb"):
        return node.args[0] if node.args else None
    if called == "Called":
        return next((k.value for k in node.keywords if k.arg == "error"), None)
    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name | ast.Attribute):
        target = node.targets[0]
        name = target.id if isinstance(target, ast.Name) else target.attr
        return node.value if name.endswith("_MESSAGE") or name == "error" else None
    return None


def _message(node, names: dict[str, str]) -> str | None:
    """The text of a message's expression: literals, module constants, f-strings (a value
    in them written as 7, a message before more words left out), sums of them."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return names.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left, names), _message(node.right, names)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        values = node.values
        parts = [_message(v.value, names) if isinstance(v, ast.FormattedValue) else v.value for v in values]
        if parts[0] is None:
            return None  # another message with more said after it
        return "".join(p if p is not None else "7" for p in parts)
    return None


def test_why_a_file_was_not_read_is_said_in_german(app):
    """Every message of the extractors, and those that carry a value or another message,
    reads German on a German page (the failed files, a failed document's page)."""
    from webapp.indexing.isolation import cut_message
    from webapp.ui.filters import localized

    messages = _extractor_messages()
    assert {"PDF is password protected", "Extraction timed out after 7 s", "Not a valid 7 file"} <= messages
    messages |= {
        "Not a valid RAW image file",
        "Archive has more than 10,000 members (in inner.zip)",
        "Extraction failed",
        "Extraction failed: MemoryError",
        cut_message(10_000, "a.zip", ""),
        cut_message(10_000, "a.mbox", "b.zip"),
    }
    with app.test_request_context("/", headers=DE):
        english = sorted(m for m in messages if localized(m) == m)
        assert english == []
        assert localized("Not a valid RAW image file") == "Keine gültige Datei vom Typ RAW-Bild"
        assert localized("Archive has more than 10,000 members (in inner.zip)") == (
            "Das Archiv hat mehr als 10.000 Einträge (in inner.zip)"
        )
        assert localized("Extraction timed out after 2.5 s") == "Auslesen nach 2,5 s abgebrochen (Zeitlimit)"
    with app.test_request_context("/", headers=EN):
        assert localized("Not a valid RAW image file") == "Not a valid RAW image file"
