"""Browsing: photos by camera and date taken, the folder tree facet, lists without a query."""

from __future__ import annotations

import io
import os

import pytest
from PIL import Image

from tests import samples

OLD = 1_600_000_000  # 2020-09-13: every file's modification time, so only EXIF dates differ


def photo(make: str, model: str, taken: str, color=samples.RED) -> bytes:
    """A small JPEG with the EXIF make, model and DateTimeOriginal of a camera."""
    exif = Image.Exif()
    exif[0x010F], exif[0x0110] = make, model
    exif.get_ifd(0x8769)[0x9003] = taken
    out = io.BytesIO()
    Image.new("RGB", (64, 48), color).save(out, "JPEG", exif=exif.tobytes())
    return out.getvalue()


FILES = {
    "photos/2019/beach.jpg": photo("Canon", "Canon EOS 5D Mark III", "2019:07:14 10:00:00"),
    "photos/2019/hills.jpg": photo("NIKON CORPORATION", "NIKON D750", "2019:03:02 09:30:00"),
    "photos/2023/city.jpg": photo("Apple", "iPhone 12", "2023:11:05 18:45:00", samples.BLUE),
    "photos/loose.png": samples.picture((40, 40), samples.GREEN, "PNG"),
    "notes/plan.txt": "a plan for the trip to the beach",
    "notes/deep/more/todo.txt": "things to do before the trip",
    "readme.txt": "top level words",
}


@pytest.fixture
def browsed(client, auth, make_tree, make_source, run_jobs):
    """A scanned source over FILES (every mtime the same) and a search function."""
    root = make_tree("browse", FILES)
    for name in FILES:
        os.utime(root / name, (OLD, OLD))
    source = make_source(root, name="Browse")
    assert client.post(f"/api/sources/{source['id']}/reindex", headers=auth).status_code == 200
    run_jobs()

    def search(**body):
        resp = client.post("/api/search", headers=auth, json={"limit": 50, **body})
        return resp

    return source, search


def names(body: dict) -> list[str]:
    return [r["basename"] for r in body["results"]]


def test_date_taken_is_the_photos_date_for_sorts_filters_and_the_year_facet(browsed):
    _, search = browsed
    body = search(q="type:image", sort="modified_at:desc", facets=["year", "camera"]).get_json()
    assert names(body) == ["city.jpg", "loose.png", "beach.jpg", "hills.jpg"]  # loose: 2020 mtime
    assert body["facet_distribution"]["year"] == {"2019": 2, "2020": 1, "2023": 1}
    assert body["facet_distribution"]["camera"] == {
        "Canon EOS 5D Mark III": 1,
        "NIKON D750": 1,
        "Apple iPhone 12": 1,
    }
    taken = search(q="modified:2019-07").get_json()
    assert names(taken) == ["beach.jpg"]
    assert names(search(q="modified:2019").get_json()) == ["beach.jpg", "hills.jpg"]
    assert taken["results"][0]["modified_at"] == OLD  # the file's own time is still what it was


def test_camera_filter_any_case_and_combined(browsed):
    _, search = browsed
    assert names(search(q='camera:"nikon d750"').get_json()) == ["hills.jpg"]
    both = search(q='camera:"NIKON D750" camera:"Apple iPhone 12"', sort="basename:asc").get_json()
    assert names(both) == ["city.jpg", "hills.jpg"]
    assert search(q="camera:").status_code == 400


def test_folder_facet_is_a_tree_of_paths_relative_to_the_source(browsed):
    _, search = browsed
    top = search(q="beach OR trip", facets=["folder"]).get_json()
    assert top["total"] == 3  # beach.jpg, plan.txt, todo.txt; files at the top are no folder
    assert top["facet_distribution"]["folder"] == {"notes": 2, "photos": 1}
    everything = search(q="", sort="modified_at:desc", facets=["folder"]).get_json()
    assert everything["total"] == 7
    assert everything["facet_distribution"]["folder"] == {"photos": 4, "notes": 2}
    under = search(q="path:photos", facets=["folder"]).get_json()  # the tree follows path:
    assert under["total"] == 4
    assert under["facet_distribution"]["folder"] == {"photos/2019": 2, "photos/2023": 1}
    deeper = search(q="trip", facets=["folder"], facet_folder="notes/").get_json()
    assert deeper["facet_distribution"]["folder"] == {"notes/deep": 1}
    narrowed = search(q="path:notes/deep", sort="basename:asc").get_json()
    assert names(narrowed) == ["todo.txt"]
    bad = search(q="x", facets=["folder"], facet_folder="../etc")
    assert bad.status_code == 400 and bad.get_json()["detail"].startswith("facet_folder:")


def test_unknown_facet_names_the_known_ones(browsed):
    _, search = browsed
    bad = search(q="x", facets=["lens"])
    assert bad.status_code == 400
    assert "camera" in bad.get_json()["detail"] and "folder" in bad.get_json()["detail"]


def test_a_sort_or_filter_alone_lists_documents(browsed):
    source, search = browsed
    newest = search(q="", sort="modified_at:desc", limit=3).get_json()
    assert newest["total"] == 7 and names(newest) == ["city.jpg", *names(newest)[1:]]
    by_type = search(q=" ", type="text", sort="relevance").get_json()
    assert sorted(names(by_type)) == ["plan.txt", "readme.txt", "todo.txt"]
    by_source = search(q="", source_id=source["id"]).get_json()
    assert by_source["total"] == 7
    bare = search(q="  ")
    assert bare.status_code == 400 and bare.get_json()["detail"].startswith("q: must not be empty")


def test_facets_and_folders_follow_grants(client, auth, make_tree, make_source, run_jobs, browsed):
    shown, _ = browsed
    hidden_root = make_tree("hidden", {"photos/secret/x.jpg": photo("Leica", "M10", "2018:01:01 00:00:00")})
    hidden = make_source(hidden_root, name="Hidden")
    client.post(f"/api/sources/{hidden['id']}/reindex", headers=auth)
    run_jobs()
    body = {"q": "", "sort": "modified_at:desc", "facets": ["folder", "camera", "year"]}
    admin = client.post("/api/search", headers=auth, json=body).get_json()
    assert admin["facet_distribution"]["folder"]["photos"] == 5  # both sources' photos/
    assert "Leica M10" in admin["facet_distribution"]["camera"]
    made = client.post(
        "/api/users",
        headers=auth,
        json={"username": "eve", "password": "eves long password", "source_ids": [shown["id"]]},
    )
    assert made.status_code == 201
    token = client.post("/api/auth/login", json={"username": "eve", "password": "eves long password"})
    eve = {"Authorization": f"Bearer {token.get_json()['access_token']}"}
    seen = client.post("/api/search", headers=eve, json=body).get_json()
    assert seen["total"] == 7
    assert seen["facet_distribution"]["folder"] == {"photos": 4, "notes": 2}
    assert "Leica M10" not in seen["facet_distribution"]["camera"]
    assert "2018" not in seen["facet_distribution"]["year"]
    secret = client.post("/api/search", headers=eve, json={**body, "facet_folder": "photos"}).get_json()
    assert secret["facet_distribution"]["folder"] == {"photos/2019": 2, "photos/2023": 1}


# -- the search page --------------------------------------------------------------------------


@pytest.fixture
def page(app, browsed):
    """A logged-in web session over the scanned source: page(url) -> HTML."""
    from tests.ui_helpers import login

    browser = app.test_client()
    login(browser)

    def get(url: str) -> str:
        resp = browser.get(url)
        assert resp.status_code == 200, url
        return resp.get_data(as_text=True)

    return get


def test_home_page_lists_the_newest_files_and_a_sort_alone_lists_them_all(page):
    home = page("/")
    assert "Recent files" in home and "1–7 of <strong>7</strong>" in home
    assert home.index("city.jpg") < home.index("beach.jpg")  # taken 2023, then 2019
    by_name = page("/?sort=basename:asc")
    assert "All files" in by_name and by_name.index("beach.jpg") < by_name.index("todo.txt")


def test_folder_tree_goes_down_level_by_level(page):
    top = page("/")
    tree = top[top.index('data-facet="folder"') :]
    assert 'href="/?folder=photos"' in tree and 'href="/?folder=notes"' in tree
    photos = page("/?folder=photos")
    assert "1–4 of <strong>4</strong>" in photos
    tree = photos[photos.index('data-facet="folder"') :]
    assert "All folders" in tree and 'aria-current="true" class="selected">photos</a>' in tree
    assert 'href="/?folder=photos/2019"' in tree and ">2019/</a>" in tree
    assert 'href="/?folder=photos/2023"' in tree
    deeper = page("/?folder=photos/2019")
    assert "beach.jpg" in deeper and "city.jpg" not in deeper


def test_pictures_show_as_a_grid_and_the_camera_facet_filters(page):
    pictures = page("/?type=image")
    assert 'class="result-grid"' in pictures and pictures.count('data-lightbox="image"') == 4
    assert 'data-src="/documents/browse--' in pictures  # the lightbox shows the scaled image
    facet = pictures[pictures.index('data-facet="camera"') :]
    assert 'href="/?q=type:image&amp;camera=NIKON+D750"' in facet  # the type is in the box
    nikon = page("/?type=image&camera=NIKON+D750")
    assert "hills.jpg" in nikon and "beach.jpg" not in nikon
    as_list = page("/?type=image&view=list")
    assert 'class="result-list"' in as_list and 'class="result-grid"' not in as_list
    mixed = page("/?q=trip")
    assert 'class="result-list"' in mixed  # not only pictures: the list


def test_a_comics_document_page_shows_its_first_page(
    app, client, auth, make_tree, make_source, run_jobs, page
):
    root = make_tree(
        "comics",
        {
            "strip.cbz": samples.cbz(
                [
                    samples.picture((400, 600), samples.MAGENTA, "PNG"),
                    samples.picture((400, 600), samples.BLUE, "PNG"),
                ]
            )
        },
    )
    source = make_source(root, name="Comics")
    client.post(f"/api/sources/{source['id']}/reindex", headers=auth)
    run_jobs()
    hit = client.post("/api/search", headers=auth, json={"q": "strip"}).get_json()["results"][0]
    assert hit["thumbnail_url"]
    html = page(f"/documents/{hit['id']}")
    assert f'<img src="{hit["thumbnail_url"]}" alt="Cover of strip.cbz" data-cover>' in html
    cover = client.get(hit["thumbnail_url"], headers=auth)
    assert samples.near(samples.main_color(cover.data), samples.MAGENTA)  # the first page


def test_a_listing_can_be_saved_and_type_image_typed_in_the_box_shows_the_grid(client, auth, page):
    made = client.post(
        "/api/saved-searches", headers=auth, json={"name": "Newest", "q": "", "sort": "modified_at:desc"}
    )
    assert made.status_code == 201 and made.get_json()["q"] == ""
    home = page("/")
    assert '<a href="/?sort=modified_at:desc" title="">Newest</a>' in home
    typed = page("/?q=type:image+path:photos/2019")
    assert 'class="result-grid"' in typed and typed.count('data-lightbox="image"') == 2
