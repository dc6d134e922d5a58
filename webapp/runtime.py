"""Services built once per app (Redis, the RQ queue, the search backend), kept in app.extensions."""

from __future__ import annotations

import threading

import redis
from flask import Flask, current_app
from rq import Queue

from webapp.extensions import db

_lock = threading.Lock()


def init_app(app: Flask) -> None:
    """Create the Redis client, the queue and the tables; the search backend opens on first use."""
    client = redis.Redis.from_url(app.config["REDIS_URL"], socket_timeout=10,
                                  socket_connect_timeout=5, health_check_interval=30)
    app.extensions["trawl.redis"] = client
    app.extensions["trawl.queue"] = Queue(app.config["QUEUE_NAME"], connection=client,
                                          default_timeout=24 * 3600)
    app.extensions["trawl.search"] = None
    with app.app_context():
        db.create_all()


def get_redis(app: Flask | None = None) -> redis.Redis:
    """The app's Redis client."""
    return (app or current_app).extensions["trawl.redis"]


def get_queue(app: Flask | None = None) -> Queue:
    """The RQ queue that scans and extraction batches go to."""
    return (app or current_app).extensions["trawl.queue"]


def get_search(app: Flask | None = None):
    """The search backend chosen by SEARCH_BACKEND, opened on first use."""
    app = app or current_app
    backend = app.extensions.get("trawl.search")
    if backend is None:
        with _lock:
            backend = app.extensions.get("trawl.search")
            if backend is None:
                from webapp.search import make_backend

                backend = make_backend(app.config)
                app.extensions["trawl.search"] = backend
    return backend
