"""gunicorn settings from Trawl's: `gunicorn -c python:webapp.gunicorn_conf wsgi:app`.

Graceful restarts: `kill -HUP <master>` re-reads this file and replaces the workers one by one
after their requests finish; `kill -TERM` (what `docker stop` sends) lets requests in flight run
for up to `graceful_timeout` seconds before the workers are killed.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from webapp import config as _trawl_config
from webapp import metrics_dir

MAX_AUTO_WORKERS = 8  # more processes mostly cost memory (each opens its own index reader)
MAX_REQUEST_LINE = 8190  # gunicorn's upper bound for limit_request_line
THREADS = 4  # a request waits on Redis, the database and the index as much as on the CPU


def core_count() -> int:
    """CPUs this process may run on (respects taskset/cpuset limits of a container)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def trusted_networks(proxies: list[str]) -> str:
    """TRUSTED_PROXIES as gunicorn's forwarded_allow_ips (CIDRs; empty trusts nobody)."""
    networks = []
    for proxy in proxies:
        try:
            networks.append(str(ipaddress.ip_network(proxy, strict=False)))
        except ValueError:
            logging.getLogger("gunicorn.error").warning("TRUSTED_PROXIES: ignoring %r", proxy)
    return ",".join(networks)


def gunicorn_settings(cfg: Mapping[str, Any], cores: int | None = None) -> dict[str, Any]:
    """gunicorn's settings derived from Trawl's (WEB_CONCURRENCY, HOST, PORT, ...)."""
    cores = cores or core_count()
    return {
        "bind": f"{cfg['HOST']}:{cfg['PORT']}",
        "workers": int(cfg["WEB_CONCURRENCY"]) or min(MAX_AUTO_WORKERS, cores + 1),
        "threads": THREADS,
        "worker_class": "webapp.web_worker.ThreadWorker",  # gthread that stops at once (web_worker.py)
        # gthread: a worker is restarted only when its main loop stops answering for this long;
        # slow requests (a reindex with ?wait=300) keep running in their thread.
        "timeout": 120,
        "graceful_timeout": 30,
        # a replacement master binds the port while a stopping one's workers finish (launcher)
        "reuse_port": True,
        "keepalive": 5,
        "accesslog": "-",
        "errorlog": "-",
        "loglevel": str(cfg["LOG_LEVEL"]).lower(),
        "access_log_format": ('%(h)s "%(r)s" %(s)s %(B)s %(M)sms "%(a)s" rid=%({x-request-id}o)s'),
        "forwarded_allow_ips": trusted_networks(list(cfg["TRUSTED_PROXIES"])),
        "preload_app": False,  # each worker opens its own index reader and database pool
        "worker_tmp_dir": "/dev/shm" if os.path.isdir("/dev/shm") else None,
        # per install, not per user: two Trawls on one host must not share one control socket
        "control_socket": os.path.join(cfg["DATA_DIR"], "gunicorn.ctl"),
        # gunicorn's maximum: long search URLs of the UI (GET forms) still reach Flask
        "limit_request_line": MAX_REQUEST_LINE,
        "logconfig_dict": (json_logconfig(str(cfg["LOG_LEVEL"])) if cfg.get("LOG_FORMAT") == "json" else {}),
    }


def json_logconfig(level: str) -> dict[str, Any]:
    """gunicorn's own lines (its errors, the access log) as Trawl's JSON objects on stdout.

    The root logger gets no handler here: the app installs its own in each worker
    (`logs.configure`), so a line is never printed twice.
    """
    json_handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stdout"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "root": {"level": level.upper(), "handlers": []},
        "loggers": {
            name: {"level": level.upper(), "handlers": ["json"], "propagate": False}
            for name in ("gunicorn.error", "gunicorn.access")
        },
        "handlers": {"json": json_handler},
        "formatters": {"json": {"()": "webapp.logs.JsonFormatter"}},
    }


def write_json_error(sock, status_int: int, reason: str, mesg: str) -> None:
    """gunicorn's own error answer (414, 431, a malformed request...) as {"detail"} JSON."""
    from gunicorn import util

    detail = f"{reason}: {mesg}"[:300] if mesg else reason
    body = json.dumps({"detail": detail}).encode()
    head = (
        f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode("latin-1")
    util.write_nonblock(sock, head + body)


def post_worker_init(worker) -> None:
    """Errors gunicorn answers itself, before Flask sees the request, use the API's body shape
    (gunicorn writes them through util.write_error, which has no setting for the format)."""
    from gunicorn import util

    util.write_error = write_json_error


# what create_app imports: loaded once by the master, so a worker (forked with them) only
# builds the app. Imported in each of 3 workers at once on 2 busy cores it took 11 s, most of
# the 20-38 s a SIGTERM to the master kept the service down (docs/operations.md)
PRELOADED = (
    "webapp.models",
    "webapp.api",
    "webapp.ui",
    "webapp.errors",
    "webapp.cli",
    "webapp.runtime",
    "webapp.rqdash",
    "webapp.logs",
)


class ListeningAt(logging.Filter):
    """gunicorn's "Listening at:" line names the master's sockets; with reuse_port the master
    has none (each worker binds its own), and the line read "Listening at:  (<pid>)". This
    fills in the addresses it was told to bind."""

    def __init__(self, binds: list[str]) -> None:
        super().__init__()
        self.addresses = ",".join(b if ":/" in b or b.startswith("unix:") else f"http://{b}" for b in binds)

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Listening at:") and record.args and not record.args[0]:
            record.args = (self.addresses, *record.args[1:])
        return True


def on_starting(server) -> None:
    """In the master, before any worker: import the app's modules (each worker still opens its
    own index reader, Redis and database connections), and refuse to serve a data folder
    `flask trawl init` has not prepared: one clear message from the master, rather than web
    workers that fail to load and are started again in a loop. First of all the metrics folder:
    the workers fork from here with prometheus_client imported (metrics_dir.py)."""
    import importlib

    server.log.error_log.addFilter(ListeningAt(server.cfg.bind))
    metrics_dir.prepare(_trawl_settings)

    from webapp import create_app
    from webapp.runtime import require_initialised

    for name in PRELOADED:
        importlib.import_module(name)
    require_initialised(create_app())


def child_exit(server, worker) -> None:
    """A web worker ended: its live gauges leave the scrape (its counters stay in the sums)."""
    # not at the top: this module is imported before on_starting prepared the metrics folder
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)


_trawl_settings = _trawl_config.load()
_settings = gunicorn_settings(_trawl_settings)
bind = _settings["bind"]
workers = _settings["workers"]
threads = _settings["threads"]
worker_class = _settings["worker_class"]
timeout = _settings["timeout"]
graceful_timeout = _settings["graceful_timeout"]
keepalive = _settings["keepalive"]
accesslog = _settings["accesslog"]
errorlog = _settings["errorlog"]
loglevel = _settings["loglevel"]
access_log_format = _settings["access_log_format"]
forwarded_allow_ips = _settings["forwarded_allow_ips"]
preload_app = _settings["preload_app"]
worker_tmp_dir = _settings["worker_tmp_dir"]
control_socket = _settings["control_socket"]
limit_request_line = _settings["limit_request_line"]
reuse_port = _settings["reuse_port"]
logconfig_dict = _settings["logconfig_dict"]
