"""gunicorn settings: `gunicorn -c python:webapp.gunicorn_conf wsgi:app`."""

import multiprocessing

from webapp import config

_cfg = config.load()

bind = f"{_cfg['HOST']}:{_cfg['PORT']}"
workers = _cfg["WEB_CONCURRENCY"] or min(4, multiprocessing.cpu_count() + 1)
threads = 4  # searches wait on I/O (Redis, database) as much as on the CPU
worker_class = "gthread"
timeout = 120  # gthread: only a worker whose main loop stops answering is restarted
graceful_timeout = 30  # a HUP or TERM lets requests in flight finish
keepalive = 5
accesslog = "-"
errorlog = "-"
forwarded_allow_ips = ",".join(_cfg["TRUSTED_PROXIES"]) or "127.0.0.1"
preload_app = False  # each worker opens its own index reader and database pool
