"""Snippet builder: window around the best passage, escaping, <em> marks, cuts, fallbacks."""

from __future__ import annotations

import html
import re

import pytest

from tests.bounded import child_output
from webapp.search.query import TermMatcher, parse_query
from webapp.search.snippets import build_snippet, find_matches, highlight_all


def matcher(q: str) -> TermMatcher:
    return TermMatcher.from_query(parse_query(q))


def visible(snippet: str) -> str:
    return html.unescape(re.sub(r"</?em>", "", snippet))


FILLER = "Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 40


def test_short_text_is_returned_whole_with_marks():
    assert build_snippet("The quick brown fox", matcher("quick"), 300) == ("The <em>quick</em> brown fox")


def test_markup_in_text_is_escaped_and_only_em_is_markup():
    text = '<script>alert("x")</script> <em>fake</em> invoice & <img src=x onerror=y>'
    out = build_snippet(text, matcher("invoice"), 300)
    assert "<em>invoice</em>" in out
    assert re.sub(r"</?em>", "", out).count("<") == 0
    assert "&lt;em&gt;fake&lt;/em&gt;" in out
    assert visible(out) == text


def test_matched_word_with_markup_chars_around_is_escaped_inside_em():
    out = build_snippet("a&b invoice<x>", matcher("invoice"), 300)
    assert out == "a&amp;b <em>invoice</em>&lt;x&gt;"


@pytest.mark.parametrize("length", [50, 120, 300, 1000])
def test_window_respects_length_and_marks_cuts(length):
    text = FILLER + "Here the needle hides among words. " + FILLER
    out = build_snippet(text, matcher("needle"), length)
    shown = visible(out)
    assert length * 0.6 <= len(shown) <= length
    assert shown.startswith("…") and shown.endswith("…")
    assert "<em>needle</em>" in out


def test_window_at_the_start_has_no_leading_ellipsis():
    out = build_snippet("needle first. " + FILLER, matcher("needle"), 100)
    assert out.startswith("<em>needle</em>") and out.endswith("…")


def test_cuts_do_not_split_words():
    out = visible(build_snippet(FILLER + "needle " + FILLER, matcher("needle"), 80))
    words = set(FILLER.replace(",", " ").replace(".", " ").split()) | {"needle"}
    for word in out.strip("…").replace(",", " ").replace(".", " ").split():
        assert word in words


def test_best_passage_covers_most_query_words():
    text = "alpha here. " + FILLER + " alpha and beta together. " + FILLER
    out = build_snippet(text, matcher("alpha beta"), 100)
    assert "<em>alpha</em> and <em>beta</em>" in out


def test_typo_prefix_and_accent_matches_are_marked():
    text = "Mon Résumé parle d'internationalization et de documents."
    out = build_snippet(text, matcher("resume internationalisation docu"), 300)
    assert "<em>Résumé</em>" in out
    assert "<em>internationalization</em>" in out
    assert "<em>documents</em>" in out


def test_a_word_deep_in_a_long_text_is_found():
    text = FILLER * 100 + "Here the needle hides. " + FILLER * 100  # ~560k characters
    out = build_snippet(text, matcher("needle"), 100)
    assert "<em>needle</em>" in out and out.startswith("…") and out.endswith("…")


def test_a_rare_word_after_thousands_of_a_common_one_is_shown_with_it():
    text = "alpha and more words " * 20_000 + "then alpha meets omega at last."
    out = build_snippet(text, matcher("alpha omega"), 100)
    assert "<em>alpha</em> meets <em>omega</em>" in out


def test_typo_forms_seen_in_one_result_are_found_deep_in_the_next():
    m = matcher("recieve ")
    assert "<em>receive</em>" in build_snippet("We receive mail.", m, 300)
    deep = FILLER * 100 + "Then they receive it. " + FILLER
    assert "<em>receive</em>" in build_snippet(deep, m, 100)


def test_a_file_name_shows_a_typo_form_no_earlier_result_had():
    m = matcher("idnent")
    assert "<em>indent</em>" in build_snippet("Please indent this.", m, 300)
    out = build_snippet("Nothing to see here.", m, 300, [None, "optional-identified.md"])
    assert out == "optional-<em>identified</em>.md"


def test_every_match_inside_the_shown_window_is_marked():
    m = matcher("needle ")
    build_snippet("a needle", m, 300)  # "needle" is now a known form, "needles" is not
    text = FILLER * 20 + "one needle, two needles, three neddle. " + FILLER * 20
    out = build_snippet(text, m, 120)
    assert "<em>needle</em>" in out and "<em>needles</em>" in out and "<em>neddle</em>" in out


def test_a_letter_whose_lower_case_is_longer_does_not_shift_marks():
    text = "İİİ İstanbul " * 500 + "invoice here"
    out = build_snippet(text, matcher("invoice"), 60)
    assert "<em>invoice</em>" in out


def test_short_words_are_not_typo_matched():
    assert find_matches("the lazy cat", matcher("lazi cat")) == [(9, 12, 1)]


def test_parts_of_file_names_are_words():
    out = build_snippet("2024-invoice_acme.pdf", matcher("invoice acme"), 300)
    assert out == "2024-<em>invoice</em>_<em>acme</em>.pdf"


def test_a_match_inside_a_longer_word_is_not_marked():
    assert build_snippet("preacme acmeco", matcher("acme "), 300) == ("preacme acmeco")


def test_falls_back_to_title_then_file_name():
    m = matcher("acme")
    assert build_snippet("nothing relevant", m, 300, ["Acme report", "a.txt"]) == ("<em>Acme</em> report")
    assert build_snippet("", m, 300, [None, "acme.pdf"]) == "<em>acme</em>.pdf"


def test_no_match_shows_the_start_of_the_text():
    out = build_snippet(FILLER, matcher("zzz"), 60)
    assert out.startswith("Lorem ipsum") and out.endswith("…") and "<em>" not in out
    assert len(visible(out)) <= 60


def test_nothing_to_show_gives_empty_string():
    assert build_snippet(None, matcher("x"), 300) == ""


def test_whitespace_runs_are_collapsed():
    assert build_snippet("a\n\n\n   needle\t\tb", matcher("needle"), 300) == "a <em>needle</em> b"


def test_one_huge_token_is_cut():
    out = build_snippet("x" * 5000, matcher("x" * 5000), 100)
    assert len(visible(out)) <= 100


def test_highlight_all_marks_every_match_and_keeps_layout():
    text = "Invoice 1\n<b>invoice</b> 2\n\ninvoices"
    assert highlight_all(text, matcher("invoice ")) == (
        "<em>Invoice</em> 1\n&lt;b&gt;<em>invoice</em>&lt;/b&gt; 2\n\n<em>invoices</em>"
    )


def test_matcher_from_engine_words():
    m = TermMatcher.from_words(["Résumé"])
    assert build_snippet("resume and RESUMES", m, 300) == "<em>resume</em> and RESUMES"


def test_random_texts_every_shown_match_is_marked_and_nothing_else():
    import random

    from webapp.search.query import TOKEN_RE

    rng = random.Random(11)
    vocab = [
        "invoice",
        "invoices",
        "invoce",
        "Invoice",
        "budget",
        "budgte",
        "report",
        "reports",
        "café",
        "cafe",
        "naïve",
        "2024",
        "x1",
        "meeting",
        "lorem",
        "ipsum",
        "dolor",
        "amet",
    ]
    for case in range(300):
        words = [rng.choice(vocab) for _ in range(rng.randint(1, 3000))]
        text = "".join(w + rng.choice([" ", "  ", ", ", ".\n", "-", "_"]) for w in words)
        q = " ".join(
            rng.sample(["invoice", "budget", "report", "cafe", "naive", "2024", "meet"], rng.randint(1, 3))
        )
        m = matcher(q)
        out = build_snippet(text, m, rng.choice([60, 120, 300]))
        shown = visible(out).strip("…")
        assert shown in " ".join(text.split()), (case, q)
        marked = re.findall(r"<em>(.*?)</em>", out)
        assert all(m.match(html.unescape(w)) is not None for w in marked), (case, q, marked)
        inner = TOKEN_RE.findall(shown)
        if out.startswith("…"):
            inner = inner[1:]  # a cut edge may show part of a word
        if out.endswith("…"):
            inner = inner[:-1]
        expected = [w for w in inner if m.match(w) is not None]
        assert len(marked) >= len(expected), (case, q, marked, expected)


def test_cjk_runs_are_marked_inside_longer_runs_and_next_to_latin_words():
    text = "这是一份募集说明书的PDF文件。" + "填充 " * 200 + "募集说明书"
    out = build_snippet(text, matcher("说明书 pdf"), 60)
    assert "募集<em>说明书</em>的<em>PDF</em>文件" in out
    assert highlight_all("明书说明书", matcher("说明 明书")) == "<em>明书</em><em>说明</em>书"


def test_stem_forms_are_marked_but_not_same_length_spellings():
    out = highlight_all("connected, connection, lazy", matcher("connections lazi"))
    assert out == "<em>connected</em>, <em>connection</em>, lazy"


@pytest.mark.parametrize("filler", ["rows are rare around here. ", "rôles are rare à Paris. "])
def test_a_one_letter_word_is_found_as_a_whole_token_only(filler):
    """`r` begins a fifth of all words: a long text is searched for the token `r` itself."""
    text = filler * 3000 + "Written in R, with vectors. " + filler * 10
    out = build_snippet(text, matcher("r "), 80)
    assert re.findall(r"<em>(.*?)</em>", out) == ["R"], out


def test_marks_stay_in_place_in_a_long_text_with_accented_letters():
    """ASCII query words are found in the UTF-8 bytes of a text with accented letters; the
    marks land on the right characters, whatever their case."""
    text = "Café crème à la carte, voilà. " * 3000 + "The PUFFIN nests here. " + "Über. " * 50
    out = build_snippet(text, matcher("puffin nests"), 60)
    assert "The <em>PUFFIN</em> <em>nests</em> here." in out, out
    assert visible(out).strip("…") in text


def test_snippets_show_the_words_of_markdown_not_its_markup():
    text = (
        "---\ntitle: Notes\n---\n# Budget plan\n\nThe **budget** for [the trip](https://example.org/t) "
        "is `small`.\n\n- item *one*\n- [ ] a task\n\n| cost | when |\n|---|---|\n| 10 | May |\n"
        "![a cat](cat.png)\n"
    )
    snippet = build_snippet(text, matcher("budget"), 300, kind="markdown")
    assert (
        visible(snippet)
        == "Budget plan The budget for the trip is small. item one a task cost when 10 May a cat"
    )
    assert snippet.count("<em>") == 2
    raw = build_snippet(text, matcher("budget"), 300)  # another type keeps its characters
    assert "**" in raw and "](https" in raw


def test_snippets_of_pictures_show_telling_metadata_not_a_dump():
    text = (
        "Format: PNG\nWidth: 800\nHeight: 600\nMake: Canon\nModel: Canon EOS 5D\n"
        "DateTimeOriginal: 2019:05:03 10:00:00\nExposureTime: 1/200\nArtist: Jane Doe"
    )
    shown = build_snippet(text, matcher(""), 300, fallbacks=("beach.png",), kind="image")
    assert visible(shown) == "Canon · Canon EOS 5D · Jane Doe"
    found = build_snippet(text, matcher("jane"), 300, kind="image")
    assert visible(found) == "Canon · Canon EOS 5D · Jane Doe" and "<em>Jane</em>" in found
    only_sizes = build_snippet(
        "Format: PNG\nWidth: 800\nHeight: 600", matcher(""), 300, ("x.png",), kind="image"
    )
    assert only_sizes == ""  # nothing worth reading: no snippet, not `Format: PNG Width: 800`
    ocr = "Format: PNG\nWidth: 800\n\fINVOICE 42 total due"
    assert visible(build_snippet(ocr, matcher("invoice"), 300, kind="image")) == "INVOICE 42 total due"


HOSTILE_MARKDOWN = {
    # a line of dashes before words (a README's banner): one such line once took a search 9 s
    "banner": "-" * 60 + " turtleDemo - Help " + "-" * 60 + " puffin",
    "empty lines": "\n" * 100_000 + "puffin",
    "blanks": " \t" * 50_000 + "x | puffin",
    "bold openers": "**a " * 25_000 + "puffin",
    "italic openers": "_a *b " * 20_000 + "puffin",
    "brackets": "[" * 100_000 + " puffin",
    "link openers": "[a](b" * 20_000 + " puffin",
    "comments": "<!--" * 25_000 + " puffin",
    "table": ("|" + "---|" * 1_000 + "x\n") * 20 + "puffin",
}


@pytest.mark.parametrize("name", sorted(HOSTILE_MARKDOWN))
def test_markdown_built_to_make_a_pattern_backtrack_is_tidied_at_once(name):
    """Every Markdown pattern runs in time linear in the text: a hostile file cannot stall a
    search's snippets nor the embedding phase (which tidies whole documents). The bound is
    far above the milliseconds these take, and far below what backtracking would need."""
    text = HOSTILE_MARKDOWN[name]
    child = "import sys; from webapp.search.tidy import tidy; print(tidy(sys.stdin.read(), 'markdown'))"
    out = child_output(child, stdin=text, what=f"tidying {name!r}")
    assert out.rstrip().endswith("puffin")
    snippet = build_snippet(text, matcher("puffin"), 80, kind="markdown")
    assert "<em>puffin</em>" in snippet


def test_a_snippet_holds_no_bidi_control_that_could_turn_the_rest_around():
    """A window cut out of a text loses what closes an override (U+202C) or an isolate
    (U+2069): an RLO left open would read the rest of the snippet right to left."""
    text = "Harbour fees \u202eeerf era seef\u202c and the \u2067isolated\u2069 dues " + "filler words " * 40
    snippet = build_snippet(text, TermMatcher.from_query(parse_query("harbour")), length=60)
    assert "<em>Harbour</em>" in snippet
    assert not set(snippet) & {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))}
    assert "eerf era seef and the isolated dues" in snippet
