# ruff: noqa: F811 - `backend` is the imported fixture
"""The declared ranking (search/ranking.py) on small hand-made indexes, for every backend
(Meilisearch only when MEILI_URL is set), and a typed word as one unit."""

from __future__ import annotations

import pytest

from tests.test_search_backend import _meili, backend, ids_of, make_doc  # noqa: F401
from webapp.search import SearchQuery, ranking
from webapp.search.language import detect

LONG = " ".join(["Several other animals and plants are described over many pages."] * 3)


# --- the rules, in their order --------------------------------------------------------------


def test_rules_are_declared_in_meilisearch_order():
    assert ranking.RULES == ("words", "typo", "proximity", "attribute", "exactness", "score")


@pytest.mark.parametrize("slots", [1, 2])
def test_one_step_of_a_rule_outweighs_every_rule_after_it(slots):
    unit, largest = ranking.units(slots), ranking._ranges(slots)
    counted = list(ranking.RULES[:-1])
    for k, rule in enumerate(counted):
        below = sum(getattr(unit, r) * largest[r] for r in counted[k + 1 :]) + ranking.SCORE_ROOM
        assert getattr(unit, rule) >= below, rule


def test_more_words_above_fewer(backend):
    backend.upsert(
        [
            make_doc("one", "Osprey. Osprey osprey osprey, the osprey over the lake."),
            make_doc("both", f"A report on lakes with one osprey and one bittern. {LONG}"),
        ]
    )
    assert ids_of(backend, "osprey bittern") == ["both", "one"]


def test_exact_above_typo(backend):
    backend.upsert(
        [
            make_doc("typo", "The harbuor master signed it."),
            make_doc("exact", f"The harbour master signed it. {LONG}"),
        ]
    )
    assert ids_of(backend, "harbour ") == ["exact", "typo"]


def test_one_typo_above_two_and_typo_matches_rank_by_distance(backend):
    backend.upsert(
        [
            make_doc("two", "The konsultent came on Monday."),
            make_doc("one", f"The consultent came on Monday. {LONG}"),
            make_doc("none", "The plumber came on Monday."),
        ]
    )
    results = backend.search(SearchQuery(q="consultant ")).results
    assert [r["id"] for r in results] == ["docs--one", "docs--two"]
    assert results[0]["score"] > results[1]["score"]


def test_a_word_many_texts_hold_as_typed_gets_no_typo_or_prefix_forms_in_texts(backend, monkeypatch):
    """Typed as the texts hold it (in more than ranking.TYPED_RIGHT_DOCS of the asker's
    documents), a word finds its one-typo neighbours and longer words it begins in titles and
    file names, not in texts; counted among the asker's own documents, a word they hold
    rarely keeps them."""
    if _meili(backend):
        pytest.skip("a rule of the Tantivy backend (Meilisearch derives its typos itself)")
    monkeypatch.setattr(ranking, "TYPED_RIGHT_DOCS", 3)
    backend.upsert(
        [make_doc(f"h{i}", f"The harbour dues of year {i}.") for i in range(4)]
        + [
            make_doc("text", "The harbuor master signed it."),
            make_doc("titled", "Minutes of the meeting.", title="Harbuor plan"),
            make_doc("begun", "The harbourmaster came."),
            make_doc("begun-titled", "Minutes.", title="Harbourside walk"),
            make_doc("mine", "Our harbour.", source_id="mine"),
            make_doc("mine-typo", "Our harbuor.", source_id="mine"),
        ]
    )
    found = ids_of(backend, "harbour ")
    assert "titled" in found and "text" not in found
    assert found.index("titled") > max(found.index(f"h{i}") for i in range(4))  # exact first
    assert ids_of(backend, "harbour ", source_ids=("mine",)) == ["mine", "mine-typo"]
    typing = ids_of(backend, "harbour")  # the last word, still being typed: a prefix too
    assert "begun-titled" in typing and "begun" not in typing


def test_title_above_body(backend):
    backend.upsert(
        [
            make_doc(
                "body",
                f"The harbour permit was discussed: harbour permit fees, the harbour permit office. {LONG}",
            ),
            make_doc("titled", "Please find the form attached.", title="Harbour permit"),
        ]
    )
    assert ids_of(backend, "harbour permit ") == ["titled", "body"]


def test_a_signed_contract_titled_ranks_above_novels_that_mention_signing(backend):
    if _meili(backend):
        pytest.skip("Meilisearch does not stem English words: `sign` does not find `Signed`")
    novels = [
        make_doc(
            f"novel{i}",
            "He had to sign the contract; she signs a contract too, "
            f"signing again and again, the contract signed at last. {LONG} {i}",
            title=f"A novel {i}",
        )
        for i in range(3)
    ]
    email = make_doc(
        "email",
        "Hello, attached as agreed. Best regards, Ann",
        "signed.eml",
        title="Signed contract for the house",
    )
    backend.upsert(novels + [email])
    assert ids_of(backend, "sign contract")[0] == "email"


def test_a_long_question_ranks_by_its_rare_words(backend):
    """A question of many words is ranked by BM25F: two rare words outweigh four common ones
    (counting matched words would rank the common document first)."""
    if _meili(backend):
        pytest.skip("Meilisearch ranks by its words rule first")
    filler = [make_doc(f"f{i}", f"the system keeps data and information {i}") for i in range(30)]
    backend.upsert(
        filler
        + [
            make_doc("common", "the system keeps data and information about everything"),
            make_doc("rare", "cryptographic hashing explained"),
        ]
    )
    q = "what does the system do with data and information about cryptographic hashing"
    assert ids_of(backend, q)[0] == "rare"


def test_a_question_leaves_out_the_words_most_documents_hold(backend):
    """`the` and `of`, in most texts, neither find nor weigh in a question that holds a rarer
    word; a question of such words alone still finds them. What counts is the asker's own
    documents: a word common only in a source they may not see is still theirs to find."""
    if _meili(backend):
        pytest.skip("a rule of the Tantivy backend's BM25F (Meilisearch ranks by its words rule)")
    reports = [make_doc(f"r{i}", f"the report of the year {i}") for i in range(6)]
    backend.upsert(
        reports
        + [
            make_doc("harbour", "the harbour master"),
            make_doc("quiet", "a quiet harbour"),
            make_doc("own", "notes of the harbour", source_id="mine"),
            make_doc("own2", "the yearly notes", source_id="mine"),
            make_doc("own3", "notes on a mill", source_id="mine"),
        ]
    )
    question = "what is the state of the harbour today"
    page = backend.search(SearchQuery(q=question))
    assert page.total == 3  # the harbour's documents, not every `the` and `of` (10 of 11)
    assert {r["id"] for r in page.results} == {"docs--harbour", "docs--quiet", "mine--own"}
    assert backend.search(SearchQuery(q="of the of the")).total == 9
    # What is common is counted among the asker's documents: `notes`, in 3 of the 11, finds
    # `own3` for an admin; for the asker of `mine` alone it is in all 3 of theirs (and `the`
    # in 2), so there `year`, `of` and `harbour` find and rank.
    question = "the year of the harbour notes"
    assert "mine--own3" in {r["id"] for r in backend.search(SearchQuery(q=question)).results}
    mine = backend.search(SearchQuery(q=question, source_ids=("mine",)))
    assert [r["id"] for r in mine.results] == ["mine--own", "mine--own2"]


# --- a typed word is one unit -----------------------------------------------------------------

UNITS = [
    make_doc("img", "holiday photo", "IMG_1234.jpg"),
    make_doc("img_apart", "An img tag, and 1234 apples."),
    make_doc("inv", "Invoice INV-2024-001 is due."),
    make_doc("inv_apart", "inv 2024: item 001 of the list"),
    make_doc("version", "Release notes for v1.2.3 of the tool."),
    make_doc("version_apart", "Version 1 came before 2 and 3."),
    make_doc("mail", "Write to ann.lee@example.org today."),
    make_doc("mail_apart", "Ann met Lee; see example.org for more."),
    make_doc("camera", "Review of the Canon EOS 40D body."),
    make_doc("forty", "There were 40 of them."),
    make_doc("dee", "Plan d is the last one."),
    make_doc("file7", "Open file7 first."),
    make_doc("memo", "A memo about the file", "memo_7.docx"),
    make_doc("burst", "token burstword123 seen"),
    make_doc("number", "only 123 here"),
]


@pytest.fixture
def units(backend):
    backend.upsert(UNITS)
    return backend


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("IMG_1234", ["img"]),
        ("INV-2024-001", ["inv"]),
        ("v1.2.3", ["version"]),
        ("ann.lee@example.org", ["mail"]),
        ("file7", ["file7"]),
        ("burstword123", ["burst"]),
    ],
)
def test_the_parts_of_a_typed_word_match_together(units, q, expected):
    for query in (q, q + " "):
        assert ids_of(units, query) == expected, query


def test_a_model_name_does_not_match_its_number_or_letter_alone(units):
    found = ids_of(units, "Canon EOS 40D", limit=50)
    assert found[0] == "camera"
    assert "forty" not in found and "dee" not in found


def test_the_last_part_of_a_typed_word_is_a_prefix_while_typing(units):
    if _meili(units):
        pytest.skip("Meilisearch phrases are exact: a typed word is found once complete")
    assert ids_of(units, "INV-2024-00") == ["inv"]
    assert ids_of(units, "INV-2024-00 ") == []  # complete: no prefix


# --- stems at index time ----------------------------------------------------------------------


def test_a_german_document_is_found_by_another_form_of_its_words(backend):
    if _meili(backend):
        pytest.skip("Meilisearch does not stem")
    german = (
        "Der Vertrag wurde von den Parteien unterschrieben und ist nicht mehr zu ändern. "
        "Die Verträge sind mit dem Datum versehen und es gibt auch eine Kopie für die "
        "Akten der Firma."
    )
    backend.upsert([make_doc("de", german), make_doc("en", "The contracts were signed.")])
    assert ids_of(backend, "verträge ") == ["de"]
    assert ids_of(backend, "Vertrages ") == ["de"]  # only its German stem finds it
    assert ids_of(backend, "contract ") == ["en"]


def test_language_detection_by_function_words():
    assert (
        detect(
            "Le contrat est signé par les deux parties, qui sont d'accord pour que "
            "la vente soit faite dans les délais prévus avec une garantie pour le "
            "client et le vendeur."
        )
        == "french"
    )
    assert (
        detect(
            "The contract is signed by both parties, who agree that the sale is made "
            "within the agreed time, with a guarantee for the buyer and the seller."
        )
        == "english"
    )
    assert detect("def main(): return 42") == "english"  # too short to tell: the default
    assert detect(None) == "english"


# --- typo-only hits, proximity in names, an unknown field ----------------------------------


def test_typo_only_hits_rank_by_typos_then_a_title_then_score(backend):
    """`recipt` reaches `receipt` and `recipe` alike (one typo each): the e-mail titled with
    the word ranks above novels whose text says `recipe`, and within a class the text that
    holds the word more often ranks first (before, every typo-only hit scored alike)."""
    novels = [
        make_doc(
            f"novel{i}",
            f"The cook followed the recipe. Her recipe book fell open. {LONG} {i}",
            title=f"A novel {i}",
        )
        for i in range(6)
    ]
    email = make_doc(
        "email",
        "Thank you for staying with us, see the attachment.",
        "berth.eml",
        title="Your berth receipt",
    )
    often = make_doc("often", "Receipt, receipt, receipt: the receipt of the receipt.", "notes.txt")
    once = make_doc("once", f"One receipt somewhere. {LONG}", "other.txt")
    far = make_doc("far", "The reciepts were lost.", "far.txt")  # two typos from `recipt`
    backend.upsert([*novels, often, email, far, once])
    results = backend.search(SearchQuery(q="recipt ", limit=20)).results
    found = [r["id"].split("--", 1)[1] for r in results]
    assert found[0] == "email"
    assert found.index("often") < found.index("once")
    if not _meili(backend):  # Meilisearch has its own scores
        assert len({r["score"] for r in results if r["id"] != "docs--far"}) > 2


def test_a_file_named_after_both_words_ranks_above_a_text_holding_the_phrase(backend):
    named = make_doc("named", "Figures of the year, one table per month.", "quarterly-budget.xlsx")
    phrase = make_doc(
        "phrase",
        f"The quarterly budget was approved; the quarterly budget holds. {LONG}",
        "minutes.txt",
    )
    apart = make_doc("apart", "Quarterly notes.", "budget.txt")
    backend.upsert([phrase, apart, named])
    assert ids_of(backend, "quarterly budget ")[0] == "named"


def test_an_unknown_field_prefix_searches_its_words(backend):
    backend.upsert(
        [
            make_doc("report", "The quarterly report of the harbour.", "report.txt"),
            make_doc("other", "Nothing about time here.", "other.txt"),
        ]
    )
    assert ids_of(backend, "misc:quarterly") == ["report"]
    assert ids_of(backend, "misc:quarterly harbour", matching_strategy="all") == []
