"""The web server's worker: gunicorn's gthread worker, changed where a kill or a loaded machine
made it fail requests (bench/soak.py). Named by `worker_class` in gunicorn_conf.py and imported
only by the process that runs gunicorn."""

from __future__ import annotations

import socket
import time

from gunicorn.workers.gthread import ThreadWorker as Gthread


class ThreadWorker(Gthread):
    """gthread's worker that stops listening as soon as it stops, not at the end of its
    drain: with reuse_port each worker has a socket of its own in the port's group, and one
    left listening while no one accepts from it would hold the connections the kernel gives
    it until the drain ends (up to graceful_timeout). New connections then go to the other
    workers, or to the replacement master the launcher starts beside a stopping one.
    `shutdown` ends the listening at once (the socket is closed with the worker).

    A worker whose master died (`kill -9`) stops the same way. gthread leaves its loop when
    its parent changes but keeps `alive` set, so it kept listening through its drain and kept
    answering its kept-alive connections as if nothing happened, until the drain's end
    (graceful_timeout, 30 s) cut the request in flight on each: the soak's failed requests
    30 s after each web kill. With `alive` cleared, a kept-alive client gets `Connection:
    close` on its next answer and reconnects to the replacement."""

    def murder_keepalived(self, force: bool = False) -> None:
        """gthread closes a kept-alive connection once its keepalive has run out, even when
        the client's next request has arrived since the last poll (on a loaded machine the
        loop comes round late). Closing a socket with unread bytes makes the kernel send a
        reset, and the client sees `Connection reset by peer` for a request it had every
        right to send (the soak's few failed requests outside any kill). Such a connection is
        served instead, as if the poll had seen it."""
        if not force:
            now = time.monotonic()
            for conn in [c for c in self.keepalived_conns if c.timeout <= now]:
                if _has_bytes(conn.sock):
                    self.on_client_socket_readable(conn, conn.sock)
        super().murder_keepalived(force)

    def is_parent_alive(self) -> bool:
        if super().is_parent_alive():
            return True
        self.alive = False
        return False

    def set_accept_enabled(self, enabled: bool) -> None:
        super().set_accept_enabled(enabled)
        if enabled or self.alive:
            return  # every thread busy for a moment: still listening
        for listener in self.sockets:
            try:
                listener.shutdown(socket.SHUT_RD)
            except OSError:
                pass


def _has_bytes(sock) -> bool:
    """Whether bytes wait unread on a connected socket (a plain one: TLS sockets say no)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except (OSError, ValueError):
        return False
