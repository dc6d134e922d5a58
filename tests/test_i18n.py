"""The UI's languages: German from Accept-Language or the account's switch, a complete German
catalogue that keeps up with the templates, numbers in the page's language, an English API."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

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
