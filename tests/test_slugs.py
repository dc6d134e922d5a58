"""Source id rules: slugs from names, uniqueness, the allowed id shape."""

from __future__ import annotations

import re

import pytest

from webapp.slugs import SOURCE_ID_RE, is_valid_source_id, slugify, unique_slug


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Café Photos", "cafe-photos"),
        ("My Documents", "my-documents"),
        ("  --Hello,   World!!--  ", "hello-world"),
        ("Straße & Ærø", "strasse-aero"),
        ("Ångström über naïve", "angstrom-uber-naive"),
        ("snake_case name", "snake-case-name"),
        ("Tax 2025 (final)", "tax-2025-final"),
        ("日本語", "source"),
        ("", "source"),
        ("!!!", "source"),
        ("ﬁle №5", "file-no5"),  # compatibility forms fold too
    ],
)
def test_slugify(name: str, slug: str) -> None:
    assert slugify(name) == slug


def test_slug_is_cut_to_63_without_trailing_dash() -> None:
    assert slugify("a" * 100) == "a" * 63
    cut = slugify("a" * 62 + " b")
    assert cut == "a" * 62 and len(cut) <= 63


def test_slugs_are_valid_ids() -> None:
    for name in ["Café Photos", "x" * 300, "--", "Ü", "a b c " * 30]:
        assert re.match(SOURCE_ID_RE, slugify(name)), name


def test_unique_slug() -> None:
    assert unique_slug("docs", set()) == "docs"
    assert unique_slug("docs", {"docs"}) == "docs-2"
    assert unique_slug("docs", {"docs", "docs-2", "docs-3"}) == "docs-4"


def test_unique_slug_stays_within_63_chars() -> None:
    base = "a" * 63
    taken = {base} | {f"{'a' * 61}-{n}" for n in range(2, 10)}
    result = unique_slug(base, taken)
    assert result == "a" * 60 + "-10"
    assert is_valid_source_id(result)


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("docs", True),
        ("0-start", True),
        ("a_b-c", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("-docs", False),
        ("_docs", False),
        ("Docs", False),
        ("", False),
        ("a b", False),
        ("docs\n", False),
        ("café", False),
        (None, False),
    ],
)
def test_is_valid_source_id(value: object, valid: bool) -> None:
    assert is_valid_source_id(value) is valid
