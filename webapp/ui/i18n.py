"""The UI's language: English or German (Flask-Babel), chosen per request.

The choice, first that applies: the language saved on the logged-in user (the switch on the
account page), the `trawl_lang` cookie that switch also sets (so the login page after a logout
keeps it), the best match of the browser's `Accept-Language`, English. The API's JSON messages
stay English whatever the language (docs/ui.md, "Languages").
"""

from __future__ import annotations

from pathlib import Path

from flask import Flask, g, request
from flask_babel import Babel, get_locale

LANGUAGES = {"en": "English", "de": "Deutsch"}  # code -> the language's own name
DEFAULT = "en"
COOKIE = "trawl_lang"
COOKIE_DAYS = 365
TRANSLATIONS = Path(__file__).resolve().parents[2] / "translations"  # messages.po/.mo per language


def saved_choice() -> str | None:
    """The language chosen by the switch (the user's, else the cookie's), or None: automatic."""
    user = g.get("user")
    choice = getattr(user, "locale", None) if user is not None else request.cookies.get(COOKIE)
    return choice if choice in LANGUAGES else None


def select_locale() -> str:
    """The language of this request's page."""
    if not request:
        return DEFAULT
    return saved_choice() or request.accept_languages.best_match(list(LANGUAGES)) or DEFAULT


def current() -> str:
    """The language code of this request ('en', 'de'), for <html lang> and the browser's Intl."""
    return str(get_locale() or DEFAULT)


def init_app(app: Flask) -> None:
    """Bind Flask-Babel with the translations/ folder of the project and the selector above."""
    app.config.setdefault("BABEL_DEFAULT_LOCALE", DEFAULT)
    app.config.setdefault("BABEL_TRANSLATION_DIRECTORIES", str(TRANSLATIONS))
    Babel(app, locale_selector=select_locale)

    @app.context_processor
    def _language() -> dict:
        return {"current_language": current(), "languages": LANGUAGES}
