"""Start the local Redis and PostgreSQL the tests use, when the machine has them but they are down.

Nothing is started when they already answer; nothing fails when the machine has neither (the tests
then start an embedded redis-server themselves and skip the PostgreSQL run).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait(port: int, seconds: float = 20) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if _listening(port):
            return True
        time.sleep(0.3)
    return False


def ensure_redis() -> None:
    if _listening(6379) or not shutil.which("redis-server"):
        return
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
        ],
        check=False,
    )
    print("started redis-server:", "ok" if _wait(6379) else "did not answer")


def ensure_postgres() -> None:
    if _listening(5432) or not shutil.which("pg_ctlcluster"):
        return
    versions = subprocess.run(["ls", "/etc/postgresql"], capture_output=True, text=True).stdout.split()
    if versions:
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", versions[0], "main", "start"], check=False
        )
        print("started PostgreSQL:", "ok" if _wait(5432) else "did not answer")


if __name__ == "__main__":
    ensure_redis()
    ensure_postgres()
