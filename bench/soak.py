"""Soak with kills: the whole Trawl of `make run` under 20 clients, live edits and a scan, with
a random Trawl process killed (SIGKILL) every two minutes; at the end nothing may be lost.

Usage: python -m bench.soak [--minutes 30] [--clients 20] [--kill-every 120] [--seed-files 2000]
                            [--scan-files 5000] [--no-doc] [--json FILE] [--log FILE]

What runs (bench/load.py's Service: `python -m webapp.launcher` on a fresh data folder, a free
port on 127.0.0.1, its own Redis):
- two sources: `seed` (indexed first, watched: live edits land there) and `incoming` (scanned
  while the clients run, and again each time its scan ends);
- `--clients` threads, each a keep-alive connection, in a mix: searches by words, hybrid
  searches (`semantic_ratio` 0.5), `/api/documents/<id>/similar`, and the document page of
  the web UI (a logged-in session);
- an editor writing a new file with a unique word under `seed` every second (and rewriting an
  older one now and then), each word remembered;
- the killer: every `--kill-every` seconds one of gunicorn's master, a gunicorn worker, the RQ
  workers' parent, an RQ worker, a work horse running an embedding job (when one runs), the
  watcher, the scheduler or redis-server, at random, with SIGKILL. The launcher restarts what
  it started.

At the end (clients and editor stopped, then the service left to settle): every edited file
must be findable by its unique word, `verify` must report no problem, no temporary file may be
left in the data folder, and no request may have answered 5xx (or failed to connect) unless it
was in flight at a kill of the web server or Redis or began within `GRACE` seconds after one.
Figures per minute (requests, errors, p50/p95) are written to docs/operations.md between the
soak markers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import date
from pathlib import Path

import psutil
import requests

from bench.load import PASSWORD, WORDS, Service, log, make_tree, percentile

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "operations.md"
START, END = "<!-- soak:start -->", "<!-- soak:end -->"
GRACE = 30.0  # seconds after a kill of the web server or Redis in which failed requests are expected
SETTLE_TIMEOUT = 900  # seconds the service gets to catch up once the load stops
# temporary files Trawl writes and renames: `.name.<pid>`, `*.tmp`, `*.partial` being written
TEMPORARY = re.compile(r"^\.[^/]+\.\d+$|\.tmp$|\.tmp\.\d+$")


class Clients:
    """N threads in a mix of searches, hybrid searches, similar documents and document pages;
    every answer is logged with its time, so errors can be set beside the kills."""

    def __init__(self, service: Service, n: int, seed: int = 7) -> None:
        self.service, self.n, self.seed = service, n, seed
        self.samples: list[tuple[float, float, int, str]] = []  # (time, seconds, status, kind)
        self.ids: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._doing = threading.local()  # what each thread was asking when a request failed

    def _ui_session(self) -> requests.Session:
        session = requests.Session()
        page = session.get(self.service.url + "/login", timeout=30).text
        token = re.search(r'name="csrf_token" value="([^"]+)"', page)
        data = {"username": "load", "password": PASSWORD}
        if token:
            data["csrf_token"] = token.group(1)
        session.post(self.service.url + "/login", data=data, timeout=30)
        return session

    def _one(self, rng: random.Random, api: requests.Session, ui: requests.Session) -> tuple[str, int]:
        url = self.service.url
        words = " ".join(rng.sample(WORDS, rng.randint(2, 4)))
        pick = rng.random()
        with self._lock:
            doc = rng.choice(self.ids) if self.ids else None
        if pick < 0.4 or doc is None:
            self._doing.kind = "words"
            resp = api.post(url + "/api/search", json={"q": words, "limit": 20}, timeout=30)
            kind = "words"
            if resp.status_code == 200:
                with self._lock:
                    self.ids.extend(r["id"] for r in resp.json()["results"][:3])
                    del self.ids[:-500]
        elif pick < 0.7:
            body = {"q": words, "limit": 20, "hybrid": {"semantic_ratio": 0.5}}
            self._doing.kind = "hybrid"
            resp, kind = api.post(url + "/api/search", json=body, timeout=30), "hybrid"
        elif pick < 0.85:
            self._doing.kind = "similar"
            resp, kind = api.get(f"{url}/api/documents/{doc}/similar", timeout=30), "similar"
        else:
            self._doing.kind = "page"
            resp, kind = ui.get(f"{url}/documents/{doc}", timeout=30), "page"
        status = resp.status_code
        return kind, 0 if status == 404 else status  # a document deleted meanwhile is fine

    def _run(self, k: int) -> None:
        rng = random.Random(self.seed * 1000 + k)
        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {self.service.token}"
        ui = None
        while not self._stop.is_set():
            started, self._doing.kind = time.time(), "login"
            try:
                ui = ui or self._ui_session()
                kind, status = self._one(rng, api, ui)
            except (requests.RequestException, ValueError) as exc:
                why = f"{type(exc).__name__}: {str(exc)[-120:]}"
                kind, status, ui = f"{self._doing.kind} failed ({why})", -1, None
            with self._lock:
                self.samples.append((started, time.time() - started, status, kind))
            if status in (401, -1):
                ui = None  # a session or a token lost with Redis: log in again
                api.headers["Authorization"] = f"Bearer {self.service.relogin()}"

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._run, args=(k,), daemon=True) for k in range(self.n)]
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join(timeout=60)


class Editor:
    """A new file with a unique word every second under a watched folder; now and then an older
    file rewritten with a new word (its old word must then be gone, the new one found)."""

    def __init__(self, root: Path, seed: int = 11) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.words: dict[Path, str] = {}
        self._stop = threading.Event()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            if self.words and self.rng.random() < 0.2:
                path = self.rng.choice(sorted(self.words))
            else:
                path = self.root / "edits" / f"edit-{n:05d}.txt"
                path.parent.mkdir(parents=True, exist_ok=True)
            word = f"soakword{self.rng.randrange(10**9):09d}"
            path.write_text(f"A note about {word} and {' '.join(self.rng.sample(WORDS, 6))}.\n")
            self.words[path] = word
            self._stop.wait(1.0)

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(timeout=30)


def trawl_processes(launcher: int) -> dict[str, list[psutil.Process]]:
    """The launcher's processes by role."""
    roles: dict[str, list[psutil.Process]] = defaultdict(list)
    for proc in psutil.Process(launcher).children(recursive=True):
        try:
            cmd = " ".join(proc.cmdline())
            parent = " ".join(proc.parent().cmdline())
        except (psutil.Error, AttributeError):
            continue
        if "redis-server" in cmd:
            roles["redis"].append(proc)
        elif "gunicorn" in cmd:
            roles["web worker" if "gunicorn" in parent else "web master"].append(proc)
        elif "worker.py scheduler" in cmd:
            roles["scheduler"].append(proc)
        elif "worker.py watcher" in cmd:
            roles["watcher"].append(proc)
        elif "worker.py --workers" in cmd:
            roles["worker pool" if "worker.py" not in parent else "worker"].append(proc)
    return roles


def embedding_horse(service: Service) -> psutil.Process | None:
    """The work horse running an embedding job right now, if any (from RQ's worker records)."""
    try:
        from redis import Redis
        from rq import Worker

        conn = Redis.from_url(f"unix://{service.data}/redis.sock")
        for worker in Worker.all(connection=conn):
            job = worker.get_current_job()
            if job is not None and "embed" in (job.func_name or ""):
                for child in psutil.Process(worker.pid).children():
                    return child
    except Exception:  # noqa: BLE001 - Redis may be the process just killed
        return None
    return None


def kill_one(service: Service, rng: random.Random) -> tuple[float, str]:
    """SIGKILL one Trawl process chosen at random; when, and its role."""
    roles = trawl_processes(service.proc.pid)
    horse = embedding_horse(service)
    if horse is not None:
        roles["embedding job"] = [horse]
    choices = sorted(role for role, procs in roles.items() if procs)
    if not choices:
        return time.time(), "none"
    role = rng.choice(choices)
    victim = rng.choice(roles[role])
    at = time.time()
    try:
        victim.send_signal(signal.SIGKILL)
        log(f"SIGKILL to the {role}, pid {victim.pid}")
    except psutil.Error:
        return at, f"{role} (gone already)"
    return at, role


def settle(service: Service, deadline: float) -> None:
    """Wait until no scan runs and every phase of every source is idle (or the deadline)."""
    while time.monotonic() < deadline:
        try:
            states = [service.state(sid) for sid in ("seed", "incoming")]
        except (requests.RequestException, ValueError):
            time.sleep(5)
            continue
        busy = [
            s
            for s in states
            if s.get("state") in ("queued", "running")
            or (s.get("semantic") or {}).get("pending")
            or (s.get("ocr") or {}).get("pending")
        ]
        if not busy:
            return
        time.sleep(5)


def lost_words(service: Service, words: dict[Path, str]) -> list[str]:
    """Paths whose unique word finds nothing (or not that file)."""
    lost = []
    for path, word in sorted(words.items()):
        resp = service.session.post(service.url + "/api/search", json={"q": word}, timeout=30)
        paths = [r["path"] for r in resp.json().get("results", [])] if resp.status_code == 200 else []
        if str(path) not in paths:
            lost.append(f"{path.name}: {word}")
    return lost


def temporary_files(data: Path) -> list[str]:
    return sorted(
        str(p.relative_to(data)) for p in data.rglob("*") if p.is_file() and TEMPORARY.search(p.name)
    )


def verify(service: Service, source_ids: tuple[str, ...] = ("seed", "incoming")) -> tuple[int, str]:
    """`trawl verify` of every source, as a person would run it: the worst exit code, and
    the end of what it printed."""
    worst, said = 0, ""
    for sid in source_ids:
        out = subprocess.run(
            [sys.executable, "-m", "webapp.cli", "verify", sid],
            cwd=ROOT,
            env=service.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        worst, said = max(worst, out.returncode), said + out.stdout + out.stderr
    return worst, said[-2000:]


def _explained(at: float, seconds: float, grace: list[float]) -> bool:
    """A failed request that was in flight at a kill of the web server or Redis, or began
    within GRACE after one."""
    return any(at <= t + GRACE and at + seconds >= t for t in grace)


def per_minute(samples: list, started: float, kills: list[tuple[float, str]]) -> list[dict]:
    """Requests, errors (5xx and failed connections, and those not explained by a kill of the
    web server or Redis: `_explained`, listed), p50 and p95 of each minute."""
    grace = [t for t, role in kills if role in ("web master", "web worker", "redis")]
    minutes: dict[int, list] = defaultdict(list)
    for sample in samples:
        minutes[int((sample[0] - started) // 60)].append(sample)
    rows = []
    for minute in sorted(minutes):
        batch = minutes[minute]
        bad = [(at, sec, s, kind) for at, sec, s, kind in batch if s == -1 or s >= 500]
        unexplained = [
            f"{time.strftime('%H:%M:%S', time.gmtime(at))} {kind} {s}"
            for at, sec, s, kind in bad
            if not _explained(at, sec, grace)
        ]
        ok = [sec for _at, sec, s, _kind in batch if 0 <= s < 500]
        rows.append(
            {
                "minute": minute + 1,
                "unexplained": unexplained,
                "requests": len(batch),
                "errors": len(bad),
                "unexplained_errors": len(unexplained),
                "p50_ms": round(percentile(ok, 50), 1),
                "p95_ms": round(percentile(ok, 95), 1),
                "kills": [role for t, role in kills if int((t - started) // 60) == minute],
            }
        )
    return rows


def run(args: argparse.Namespace) -> dict:
    """Set up, soak, check; returns the figures."""
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(prefix="trawl-soak-") as tmp:
        data = Path(tmp) / "data"
        sources = data / "sources"
        make_tree(sources / "seed", args.seed_files, seed=1)
        make_tree(sources / "incoming", args.scan_files, seed=2)
        with Service(data, workers=args.workers, log_file=args.log) as service:
            service.data = data
            service.relogin = lambda: _relogin(service)
            service.add_source("seed", sources / "seed")
            service.add_source("incoming", sources / "incoming")
            service.scan("seed", wait=300)
            service.scan("incoming")
            clients, editor = Clients(service, args.clients), Editor(sources / "seed")
            clients.start()
            editor.start()
            started, kills = time.time(), []
            log(f"load started; launcher pid {service.proc.pid}, data in {data}")
            end = started + args.minutes * 60
            while time.time() < end:
                time.sleep(min(args.kill_every, max(0.0, end - time.time())))
                if time.time() >= end:
                    break
                at, role = kill_one(service, rng)
                kills.append((at, role))
                log(f"{(time.time() - started) / 60:5.1f} min: killed {role}")
                _rescan(service, "incoming")
            clients.stop()
            editor.stop()
            log("load stopped; letting the service settle")
            settle(service, time.monotonic() + SETTLE_TIMEOUT)
            _relogin(service)
            lost = lost_words(service, editor.words)
            code, verified = verify(service)
            leftovers = temporary_files(data)
        minutes = per_minute(clients.samples, started, kills)
    return {
        "date": date.today().isoformat(),
        "minutes": args.minutes,
        "clients": args.clients,
        "kills": [role for _t, role in kills],
        "edited_files": len(editor.words),
        "lost": lost,
        "verify_exit": code,
        "verify_tail": verified,
        "temporary_files_left": leftovers,
        "requests": len(clients.samples),
        "errors": sum(m["errors"] for m in minutes),
        "unexplained_errors": sum(m["unexplained_errors"] for m in minutes),
        "per_minute": minutes,
        "load_average": os.getloadavg(),
    }


def _relogin(service: Service) -> str:
    """A new access token (Redis may have lost the old one's session with a kill)."""
    for _ in range(30):
        try:
            resp = service.session.post(
                service.url + "/api/auth/login", json={"username": "load", "password": PASSWORD}, timeout=30
            )
            if resp.status_code == 200:
                service.token = resp.json()["access_token"]
                service.session.headers["Authorization"] = f"Bearer {service.token}"
                return service.token
        except requests.RequestException:
            pass
        time.sleep(1)
    return service.token


def _rescan(service: Service, sid: str) -> None:
    """Start the scan again when it ended (a kill may have ended it)."""
    try:
        if service.state(sid).get("state") not in ("queued", "running"):
            service.scan(sid)
    except (requests.RequestException, ValueError, KeyError):
        pass


def markdown(r: dict) -> str:
    """The soak's section of docs/operations.md."""
    lines = [
        f"Run of {r['date']}: {r['minutes']} minutes, {r['clients']} clients, "
        f"{len(r['kills'])} kills ({', '.join(r['kills'])}); load average at the end "
        f"{', '.join(f'{x:.1f}' for x in r['load_average'])}.",
        "",
        f"- files edited live: {r['edited_files']}; not findable by their unique word at the end: "
        f"{len(r['lost'])}",
        f"- `verify` exit code: {r['verify_exit']}; temporary files left: {len(r['temporary_files_left'])}",
        f"- requests: {r['requests']}; 5xx or failed connections: {r['errors']}, of them neither in "
        f"flight at a kill of the web server or Redis nor begun within {GRACE:.0f} s after one: "
        f"{r['unexplained_errors']}",
        "",
        "| minute | requests | errors | unexplained | p50 ms | p95 ms | killed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    unexplained = [f"- minute {m['minute']}: {line}" for m in r["per_minute"] for line in m["unexplained"]]
    lines[5:5] = ["", "The failed requests not explained by a kill:", "", *unexplained] if unexplained else []
    for m in r["per_minute"]:
        lines.append(
            f"| {m['minute']} | {m['requests']} | {m['errors']} | {m['unexplained_errors']} | "
            f"{m['p50_ms']} | {m['p95_ms']} | {', '.join(m['kills'])} |"
        )
    return "\n".join(lines)


def write_doc(section: str, doc: Path = DOC) -> None:
    text = doc.read_text()
    if START in text:
        head, rest = text.split(START, 1)
        text = head + START + "\n" + section + "\n" + END + rest.split(END, 1)[1]
    else:
        text += f"\n## Soak with kills (`python -m bench.soak`)\n\n{START}\n{section}\n{END}\n"
    doc.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--kill-every", type=float, default=120)
    parser.add_argument("--seed-files", type=int, default=2000)
    parser.add_argument("--scan-files", type=int, default=5000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-doc", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--log", type=Path, help="keep the launcher's output (its children's too) here")
    args = parser.parse_args(argv)
    result = run(args)
    print(json.dumps({k: v for k, v in result.items() if k != "per_minute"}, indent=2))
    for row in result["per_minute"]:
        for line in row["unexplained"]:
            print(f"minute {row['minute']}: unexplained {line}")
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if not args.no_doc:
        write_doc(markdown(result))
    clean = not result["lost"] and result["verify_exit"] == 0 and not result["temporary_files_left"]
    return 0 if clean and result["unexplained_errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
