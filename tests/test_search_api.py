"""POST /api/search with the query language and facets, and the CLI's search, over real scans."""

from __future__ import annotations

import json
import os

import pytest

from tests import samples

FILES = {
    "projects/2024/plan.md": "# Budget plan\n\nThe budget plan for the new office.",
    "projects/2023/old-plan.txt": "Last year's budget plan, a draft.",
    "letters/bank.txt": "A budget letter to the bank about the office loan.",
    "big.txt": "budget " * 3000,
}
MTIMES = {
    "projects/2024/plan.md": 1_710_496_800,  # 2024-03-15 10:00 UTC
    "projects/2023/old-plan.txt": 1_685_577_600,  # 2023-06-01
    "letters/bank.txt": 1_704_067_200,  # 2024-01-01
    "big.txt": 1_640_995_200,
}  # 2022-01-01


@pytest.fixture
def indexed(client, auth, make_tree, make_source, run_jobs):
    """Two sources: `docs` over FILES (with set modification times) and `other`."""
    root = make_tree("docs", FILES)
    for rel, mtime in MTIMES.items():
        os.utime(root / rel, (mtime, mtime))
    other = make_tree("other", {"projects/2024/memo.txt": "budget memo of the other team"})
    for name, folder in (("Docs", root), ("Other", other)):
        src = make_source(folder, name=name)
        assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    return root


def search(client, auth, **body):
    return client.post("/api/search", headers=auth, json=body)


def names(client, auth, q, **body) -> list[str]:
    resp = search(client, auth, q=q, **body)
    assert resp.status_code == 200, resp.get_json()
    return [r["basename"] for r in resp.get_json()["results"]]


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"q": "budget modified:>zz"}, "q: modified:>zz is not a date (use 2024, 2024-03 or 2024-03-15)"),
        ({"q": "size:lots"}, "q: size:lots is not a size (use 500, 10k, 2MB or 1GB)"),
        ({"q": "budget type:"}, "q: type: needs a value, e.g. type:pdf"),
        ({"q": "x", "type": "PDF"}, "type: unknown type 'PDF'"),
        ({"q": "x", "source_id": "nope"}, "source_id: unknown source 'nope'"),
        ({"q": "x type:spreadsheet"}, "q: type:spreadsheet: unknown type 'spreadsheet'"),
        ({"q": "x source:nope"}, "q: source:nope: unknown source 'nope'"),
        (
            {"q": "x", "facets": ["type", "colour"]},
            "facets: unknown facet 'colour' (use type, extension, source_id, year, camera, folder)",
        ),
        ({"q": "x", "facets": "type"}, "facets: not a valid list"),
    ],
)
def test_bad_search_arguments_are_400_naming_the_term(client, auth, indexed, body, detail):
    resp = search(client, auth, **body)
    assert resp.status_code == 400
    assert resp.get_json() == {"detail": detail}


def test_a_source_only_the_index_knows_is_unknown(app, client, auth, indexed):
    """Documents left in the index under a source the database does not have (an index
    served without its database) do not make that source searchable by name."""
    from webapp.runtime import get_search

    with app.app_context():
        hit = search(client, auth, q="memo").get_json()["results"][0]
        template = get_search().get(hit["id"])
        get_search().upsert([{**template, "id": "ghost--0123456789ab", "source_id": "ghost"}])
        assert get_search().count("ghost") == 1
    for body, detail in (
        ({"q": "memo", "source_id": "ghost"}, "source_id: unknown source 'ghost'"),
        ({"q": "memo source:ghost"}, "q: source:ghost: unknown source 'ghost'"),
    ):
        resp = search(client, auth, **body)
        assert resp.status_code == 400 and resp.get_json() == {"detail": detail}


def test_query_language_through_the_api(client, auth, indexed):
    assert sorted(names(client, auth, "budget -draft -loan")) == ["big.txt", "memo.txt", "plan.md"]
    assert names(client, auth, "budget type:markdown") == ["plan.md"]
    assert names(client, auth, "budget ext:md OR ext:txt modified:2023") == ["old-plan.txt"]
    assert names(client, auth, "budget size:>10k") == ["big.txt"]
    assert names(client, auth, "title:plan source:docs modified:2024-03-15") == ["plan.md"]
    assert names(client, auth, "budget", type="text", source_id="other") == ["memo.txt"]


def test_relative_path_is_under_each_source_root(client, auth, indexed):
    assert sorted(names(client, auth, "budget path:projects/2024")) == ["memo.txt", "plan.md"]
    assert names(client, auth, "budget path:projects/2024", source_id="docs") == ["plan.md"]
    assert names(client, auth, "budget path:projects source:other") == ["memo.txt"]
    absolute = str(indexed / "projects")
    assert sorted(names(client, auth, f'budget path:"{absolute}"')) == ["old-plan.txt", "plan.md"]
    assert names(client, auth, "budget path:nowhere") == []


def test_filter_only_query_lists_newest_first(client, auth, indexed):
    assert names(client, auth, "source:docs") == ["plan.md", "bank.txt", "old-plan.txt", "big.txt"]
    assert names(client, auth, "source:docs", sort="modified_at:asc")[0] == "big.txt"


def test_facets_over_all_matches(client, auth, indexed):
    resp = search(client, auth, q="budget -memo", limit=1, facets=["type", "extension", "source_id", "year"])
    body = resp.get_json()
    assert resp.status_code == 200 and body["total"] == 4 and len(body["results"]) == 1
    assert body["facet_distribution"] == {
        "type": {"text": 3, "markdown": 1},
        "extension": {"txt": 3, "md": 1},
        "source_id": {"docs": 4},
        "year": {"2024": 2, "2023": 1, "2022": 1},
    }
    assert "facet_distribution" not in search(client, auth, q="budget").get_json()


def test_cli_search_uses_the_same_validator_and_language(app, indexed):
    runner = app.test_cli_runner()
    found = runner.invoke(args=["trawl", "search", "budget type:markdown", "--json", "--facet", "year"])
    assert found.exit_code == 0, found.output
    body = json.loads(found.output)
    assert [r["basename"] for r in body["results"]] == ["plan.md"]
    assert body["facet_distribution"] == {"year": {"2024": 1}}
    bad = runner.invoke(args=["trawl", "search", "budget modified:>zz"])
    assert bad.exit_code == 1
    assert "Error: q: modified:>zz is not a date (use 2024, 2024-03 or 2024-03-15)" in bad.output
    for args, detail in (
        (["--type", "PDF"], "type: unknown type 'PDF'"),
        (["--limit", "0"], "limit: must be between 1 and 100"),
        (["--facet", "colour"], "facets: unknown facet 'colour'"),
    ):
        result = runner.invoke(args=["trawl", "search", "x", *args])
        assert result.exit_code == 1 and f"Error: {detail}" in result.output, result.output


# -- a container and its members listed once --------------------------------------------------


def _message(n: int, subject: str, body: str) -> bytes:
    return (
        f"From a@example.org Mon Jan  1 00:00:00 2024\nSubject: {subject}\nFrom: a@example.org\n"
        f"Date: Mon, 0{n} Jan 2024 12:00:00 +0000\n\n{body}\n\n"
    ).encode()


CLUB = {
    "club-newsletter.mbox": b"".join(
        (
            _message(1, "Spring regatta", "the regatta starts at noon from the slipway"),
            _message(2, "Winter berths", "boat storage over winter: the shed opens in November"),
            _message(3, "Winter dinner", "the winter dinner is at the clubhouse"),
        )
    ),
    "season.zip": samples.archive(
        {
            "tide-table.txt": "high water at dawn and dusk",
            "crew-list.txt": "Ada, Charles and Mary",
            "harbour-map.txt": "the slipway is beside the pier",
        }
    ),
    "boat-notes.txt": "boat storage costs more than the mooring",
}


@pytest.fixture
def club(client, auth, make_tree, make_source, run_jobs) -> str:
    """A folder of a mailbox, a zip and a note, scanned (their members are documents)."""
    root = make_tree("club", CLUB)
    src = make_source(root, name="Club")
    assert client.post(f"/api/sources/{src['id']}/reindex", headers=auth).status_code == 200
    run_jobs()
    return str(root)


def _found(client, auth, q: str, **body) -> dict:
    resp = search(client, auth, q=q, limit=50, **body)
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def test_a_mailbox_gives_way_to_the_message_that_answers(client, auth, club):
    """`boat storage over winter` lists the message that answers it, in its mailbox, and not
    the mailbox (whose list of subjects says `winter`) beside it; total and facets count the
    listed hits. A container the query names, or whose list alone answers, is listed."""
    body = _found(client, auth, "boat storage over winter", facets=["type"])
    listed = {r["path"].removeprefix(club + "/"): r for r in body["results"]}
    assert "club-newsletter.mbox" not in listed
    berths = listed["club-newsletter.mbox!/message-2.eml"]
    mbox = _found(client, auth, "newsletter type:archive")["results"][0]
    assert mbox["basename"] == "club-newsletter.mbox" and berths["container_id"] == mbox["id"]
    assert "boat-notes.txt" in listed
    assert body["total"] == len(body["results"]) == len(listed)
    assert sum(body["facet_distribution"]["type"].values()) == body["total"]
    assert "archive" not in body["facet_distribution"]["type"]
    tide = _found(client, auth, "tide table")
    assert [r["path"].removeprefix(club + "/") for r in tide["results"]] == ["season.zip!/tide-table.txt"]
    assert tide["total"] == 1
    # a container whose own name holds a word of the query is an answer of its own (beside
    # its members), and so is one whose list answers when no member does
    named = _found(client, auth, "newsletter winter")
    paths = [r["path"].removeprefix(club + "/") for r in named["results"]]
    assert "club-newsletter.mbox" in paths and "club-newsletter.mbox!/message-2.eml" in paths
    assert named["total"] == len(paths)
    both = _found(client, auth, "crew harbour", matching_strategy="all")  # two members' names
    assert [r["path"].removeprefix(club + "/") for r in both["results"]] == ["season.zip"]
    assert [r["basename"] for r in _found(client, auth, "season")["results"]][0] == "season.zip"


def test_pages_of_one_never_repeat_a_hit(client, auth, club):
    """Page after page of one hit, every hit comes once and the container never: the fold is
    decided over every match, not per page."""
    whole = _found(client, auth, "winter slipway")
    assert whole["total"] == len(whole["results"]) >= 4
    pages = [
        search(client, auth, q="winter slipway", limit=1, offset=n).get_json() for n in range(whole["total"])
    ]
    ids = [p["results"][0]["id"] for p in pages]
    assert len(set(ids)) == len(ids) and set(ids) == {r["id"] for r in whole["results"]}
    assert {p["total"] for p in pages} == {whole["total"]}
    assert not [r for r in whole["results"] if r["type"] == "archive"]
    assert (
        search(client, auth, q="winter slipway", limit=1, offset=whole["total"]).get_json()["results"] == []
    )


def test_cli_search_lists_a_container_and_its_members_once(app, club):
    runner = app.test_cli_runner()
    found = runner.invoke(args=["trawl", "search", "boat storage over winter", "--json"])
    assert found.exit_code == 0, found.output
    body = json.loads(found.output)
    paths = [r["path"].removeprefix(club + "/") for r in body["results"]]
    assert "club-newsletter.mbox!/message-2.eml" in paths and "club-newsletter.mbox" not in paths
    assert body["total"] == len(paths)
