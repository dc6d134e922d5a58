"""E-mail as mail and archives as trees: a message's page shows its header block (the sent
date in the reader's zone), its body with the hits marked and its attachments as links to
their documents; the sent date is the date sorting, date filters and the year facet use; an
archive's page lists its members as a tree of links (a long list is capped, and says so)."""

from __future__ import annotations

import os
from email.message import EmailMessage

import lxml.html
import pytest

from tests import samples
from tests.ui_helpers import login
from webapp.services import members

FILE_TIME = 1_717_200_000  # 2024-06-01: the files' own modification time


def _eml(subject: str, date: str, body: str, attachments: dict[str, bytes] | None = None) -> bytes:
    msg = EmailMessage()
    msg["Subject"], msg["From"] = subject, "Ada Lovelace <ada@example.org>"
    msg["To"], msg["Cc"] = "Charles Babbage <charles@example.org>", "mary@example.org"
    msg["Date"] = date
    msg.set_content(body)
    for name, data in (attachments or {}).items():
        maintype, subtype = ("text", "plain") if name.endswith(".txt") else ("application", "octet-stream")
        if maintype == "text":
            msg.add_attachment(data.decode(), subtype=subtype, filename=name)
        else:
            msg.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    return bytes(msg)


@pytest.fixture
def ui(app, client, auth):
    browser = app.test_client()
    login(browser)
    return browser


def _index(client, auth, make_tree, make_source, run_jobs, files: dict) -> str:
    root = make_tree("mail", files)
    for path in root.rglob("*"):
        os.utime(path, (FILE_TIME, FILE_TIME))
    sid = make_source(root, name="Mail")["id"]
    assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code in (200, 202)
    run_jobs()
    return str(root)


def _search(client, auth, q: str, **body) -> dict:
    resp = client.post("/api/search", headers=auth, json={"q": q, "limit": 50, **body})
    assert resp.status_code == 200, resp.get_json()
    return resp.get_json()


def _doc_id(client, auth, path: str) -> str:
    name = path.rsplit("/", 1)[-1]
    hits = _search(client, auth, f'"{name.rsplit(".", 1)[0]}"')["results"]
    return next(h["id"] for h in hits if h["path"].endswith(path))


def _page(ui, doc_id: str, **params):
    resp = ui.get(f"/documents/{doc_id}", query_string=params)
    assert resp.status_code == 200, resp.get_data(as_text=True)[:500]
    return lxml.html.fromstring(resp.get_data(as_text=True))


def test_a_message_page_shows_the_header_block_the_body_and_attachment_links(
    client, auth, ui, make_tree, make_source, run_jobs
):
    root = _index(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {
            "inbox/minutes.eml": _eml(
                "Minutes of the analytical engine meeting",
                "Tue, 03 Oct 2023 10:00:00 +0200",
                "We discussed the bernoulli numbers at length.\nNext meeting in spring.",
                {"table.txt": b"bernoulli table: 1/6, -1/30", "engine.bin": b"\x00\x01 punched cards"},
            )
        },
    )
    mail_id = _doc_id(client, auth, "inbox/minutes.eml")
    page = _page(ui, mail_id, q="bernoulli")
    headers = page.xpath(".//*[@data-mail-headers]")[0]
    rows = {
        dt.text_content(): dd for dt, dd in zip(headers.xpath(".//dt"), headers.xpath(".//dd"), strict=True)
    }
    assert list(rows) == ["From", "To", "Cc", "Subject", "Date"]
    assert rows["From"].text_content() == "Ada Lovelace <ada@example.org>"
    assert rows["To"].text_content() == "Charles Babbage <charles@example.org>"
    assert rows["Cc"].text_content() == "mary@example.org"
    assert rows["Subject"].text_content() == "Minutes of the analytical engine meeting"
    # the sent instant, shown in the reader's zone by the page's script (UTC until then)
    sent = rows["Date"].xpath(".//time[@data-local]")[0]
    assert sent.get("datetime") == "2023-10-03T08:00:00Z"
    body = page.xpath(".//*[@id='preview-text']")[0]
    assert body.text_content().startswith("We discussed the bernoulli numbers")
    assert "From: " not in body.text_content()  # the headers are above, not in the body again
    assert [m.text_content() for m in body.xpath(".//mark | .//em")] == ["bernoulli"]

    links = page.xpath(".//*[@data-attachments]//a")
    assert [a.text_content() for a in links] == ["engine.bin", "table.txt"]
    assert "2 attachments" in page.xpath(".//*[@id='attachments-heading']")[0].text_content()
    table = ui.get(links[1].get("href"))
    assert table.status_code == 200
    attached = lxml.html.fromstring(table.get_data(as_text=True))
    assert "bernoulli table" in attached.xpath(".//*[@id='preview-text']")[0].text_content()
    inside = attached.xpath(".//*[@id='doc-container']//a")[0]
    assert inside.get("href").startswith(f"/documents/{mail_id}")
    hit = next(h for h in _search(client, auth, "bernoulli")["results"] if h["path"].endswith("table.txt"))
    assert hit["path"] == f"{root}/inbox/minutes.eml!/table.txt"


@pytest.mark.pg  # a member's time in nanoseconds is a 64-bit integer
def test_the_sent_date_is_the_date_of_sorting_date_filters_and_the_year_facet(
    client, auth, ui, make_tree, make_source, run_jobs
):
    """Every file here was modified in June 2024; the messages were sent in 2019 and 2021."""
    _index(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {
            "old.eml": _eml("Old puffin news", "Mon, 14 Jan 2019 09:30:00 +0000", "puffin colony count"),
            "new.eml": _eml(
                "New puffin news",
                "Fri, 05 Mar 2021 18:00:00 -0500",
                "puffin chicks fledged",
                {"census.txt": b"puffin census sheet"},
            ),
            "notes.txt": "puffin notes typed in 2024",
        },
    )
    newest = _search(client, auth, "puffin", sort="modified_at:desc")["results"]
    assert [h["basename"] for h in newest] == ["notes.txt", "new.eml", "census.txt", "old.eml"] or [
        h["basename"] for h in newest
    ] == ["notes.txt", "census.txt", "new.eml", "old.eml"]
    oldest = _search(client, auth, "puffin", sort="modified_at:asc")["results"]
    assert oldest[0]["basename"] == "old.eml"
    times = {h["basename"]: h["modified_at"] for h in newest}  # the files' own times
    assert times["old.eml"] == times["new.eml"] == times["notes.txt"] == FILE_TIME
    assert times["census.txt"] == 1_614_985_200  # an attachment's is its message's sent time

    assert [h["basename"] for h in _search(client, auth, "puffin modified:2019")["results"]] == ["old.eml"]
    in_range = _search(client, auth, "puffin modified:2021-03-01..2021-03-31")["results"]
    assert sorted(h["basename"] for h in in_range) == ["census.txt", "new.eml"]
    years = _search(client, auth, "puffin", facets=["year"])["facet_distribution"]["year"]
    assert years == {"2019": 1, "2021": 2, "2024": 1}

    page = ui.get("/", query_string={"q": "puffin", "year": "2019"}).get_data(as_text=True)
    assert "old.eml" in page and "new.eml" not in page
    doc = _page(ui, _doc_id(client, auth, "old.eml"))
    facts = {
        dt.text_content(): dd
        for dt, dd in zip(
            doc.xpath(".//dl[contains(@class, 'facts')]/div/dt"),
            doc.xpath(".//dl[contains(@class, 'facts')]/div/dd"),
            strict=True,
        )
    }
    assert facts["Sent"].xpath(".//time")[0].get("datetime") == "2019-01-14T09:30:00Z"


@pytest.mark.pg  # LIKE with escapes, the members' order
def test_an_archive_page_lists_its_members_as_a_tree_of_links(
    client, auth, ui, make_tree, make_source, run_jobs, monkeypatch
):
    inner = samples.archive({"deep/walrus.txt": b"walrus deep inside"})
    _index(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {
            "box.zip": samples.archive(
                {
                    "readme.txt": b"walrus readme",
                    "docs/2024/report.txt": b"walrus report",
                    "docs/intro.txt": b"walrus intro",
                    "Attic/old.txt": b"walrus attic",
                    "inner.zip": inner,
                }
            )
        },
    )
    box = _doc_id(client, auth, "box.zip")
    page = _page(ui, box)
    tree = page.xpath(".//*[@data-member-tree]")[0]

    def shape(ul) -> list:
        out = []
        for li in ul.findall("li"):
            folder = li.find("details")
            if folder is not None:
                out.append((folder.find("summary").text_content(), shape(folder.find("ul"))))
            else:
                out.append(li.find("a").text_content())
        return out

    assert shape(tree) == [
        ("Attic/", ["old.txt"]),
        ("docs/", [("2024/", ["report.txt"]), "intro.txt"]),
        "inner.zip",
        "readme.txt",
    ]
    links = {a.text_content(): a.get("href") for a in tree.xpath(".//a")}
    report = lxml.html.fromstring(ui.get(links["report.txt"]).get_data(as_text=True))
    assert report.xpath(".//h1")[0].text_content() == "report.txt"
    assert "walrus report" in report.xpath(".//*[@id='preview-text']")[0].text_content()
    nested = lxml.html.fromstring(ui.get(links["inner.zip"]).get_data(as_text=True))
    assert shape(nested.xpath(".//*[@data-member-tree]")[0]) == [("deep/", ["walrus.txt"])]
    assert "walrus.txt" not in tree.text_content()  # the outer page lists its own members only
    as_text = _page(ui, box, view="text").xpath(".//*[@id='preview-text']")[0].text_content()
    assert "docs/2024/report.txt" in as_text  # the listing as text is still there

    monkeypatch.setattr(members, "MAX_LISTED", 2)
    capped = _page(ui, box)
    assert len(capped.xpath(".//*[@data-member-tree]//a")) == 2
    more = capped.xpath(".//*[@data-members-more]")[0]
    assert more.text_content().startswith("3 more not listed here")
    search = ui.get(more.xpath(".//a")[0].get("href")).get_data(as_text=True)
    assert "readme.txt" in search and "walrus.txt" in search


def test_a_mailbox_lists_its_messages_by_subject(client, auth, ui, make_tree, make_source, run_jobs):
    mbox = b"".join(
        f"From a@example.org Mon Jan  1 00:00:00 2024\nSubject: tern report {n}\nFrom: a@example.org\n"
        f"Date: Mon, 0{n} Jan 2024 12:00:00 +0000\n\nterns seen: {n}\n\n".encode()
        for n in (1, 2)
    )
    _index(client, auth, make_tree, make_source, run_jobs, {"birds.mbox": mbox})
    page = _page(ui, _doc_id(client, auth, "birds.mbox"))
    links = page.xpath(".//*[@data-member-tree]//a")
    assert [a.text_content() for a in links] == ["tern report 1", "tern report 2"]
    message = lxml.html.fromstring(ui.get(links[1].get("href")).get_data(as_text=True))
    date = message.xpath(".//*[@data-mail-headers]//time")[0]
    assert date.get("datetime") == "2024-01-02T12:00:00Z"


@pytest.mark.pg  # a member's time in nanoseconds is a 64-bit integer
def test_a_forged_sent_date_gives_way_to_the_file_time(client, auth, make_tree, make_source, run_jobs):
    """A Date header in the year 9999 (spam does that) is not a date to sort by: the message
    and its attachment keep the file's time, and both are indexed."""
    _index(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {
            "spam.eml": _eml(
                "Win a yacht", "Fri, 31 Dec 9999 23:00:00 +0000", "osprey", {"prize.txt": b"osprey"}
            )
        },
    )
    hits = _search(client, auth, "osprey modified:2024")["results"]
    assert sorted(h["basename"] for h in hits) == ["prize.txt", "spam.eml"]
    assert {h["modified_at"] for h in hits} == {FILE_TIME}


def test_a_mail_hit_is_titled_by_its_subject_dated_by_its_sending_and_listed_once(
    client, auth, ui, make_tree, make_source, run_jobs
):
    """On the search page a message reads as mail (its subject, its sent date), and a mailbox
    whose message matches is listed once: as that message, "in club-newsletter.mbox"."""
    mbox = b"".join(
        f"From a@example.org Mon Jan  1 00:00:00 2024\nSubject: {subject}\nFrom: a@example.org\n"
        f"Date: Mon, 0{n} Jan 2024 12:00:00 +0000\n\n{body}\n\n".encode()
        for n, subject, body in (
            (1, "Spring regatta", "the regatta starts at noon"),
            (2, "Winter berths", "boat storage over winter: the shed opens in November"),
        )
    )
    _index(
        client,
        auth,
        make_tree,
        make_source,
        run_jobs,
        {
            "pelican.eml": _eml("Hull repairs", "Mon, 14 Jan 2019 09:30:00 +0000", "the hull of the pelican"),
            "club-newsletter.mbox": mbox,
        },
    )
    page = lxml.html.fromstring(ui.get("/", query_string={"q": "pelican hull"}).get_data(as_text=True))
    hit = page.xpath(".//li[contains(@class, 'result')]")[0]
    assert hit.xpath(".//a[@class='result-link']")[0].text_content() == "Hull repairs"
    assert (
        hit.xpath(".//*[contains(@class, 'result-date')]//time")[0].get("datetime") == "2019-01-14T09:30:00Z"
    )

    page = lxml.html.fromstring(
        ui.get("/", query_string={"q": "boat storage over winter"}).get_data(as_text=True)
    )
    hits = page.xpath(".//li[contains(@class, 'result')]")
    assert [h.xpath(".//a[@class='result-link']")[0].text_content() for h in hits] == ["Winter berths"]
    assert "in club-newsletter.mbox" in " ".join(
        hits[0].xpath(".//*[contains(@class, 'result-container')]")[0].text_content().split()
    )
    assert page.xpath(".//*[@data-total]")[0].get("data-total") == "1"
    named = lxml.html.fromstring(ui.get("/", query_string={"q": "newsletter"}).get_data(as_text=True))
    titles = [a.text_content() for a in named.xpath(".//a[@class='result-link']")]
    assert "club-newsletter.mbox" in titles  # a container the query names is an answer itself
