"""The client's address, believing X-Forwarded-For only from the proxies named in TRUSTED_PROXIES."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from flask import current_app, request


def _trusted(addr: str, proxies: Iterable[str]) -> bool:
    """Whether addr is one of the trusted proxies (addresses or CIDR networks)."""
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    for proxy in proxies:
        try:
            if ip in ipaddress.ip_network(proxy, strict=False):
                return True
        except ValueError:
            continue
    return False


def resolve_client(peer: str, forwarded_for: str | None, proxies: Iterable[str]) -> str:
    """Walk X-Forwarded-For from the right while the hop is a trusted proxy; the first other hop wins."""
    proxies = list(proxies)
    if not forwarded_for or not _trusted(peer, proxies):
        return peer
    hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer


def client_address() -> str:
    """Rate-limit key: the real client address of the current request."""
    peer = request.remote_addr or "unknown"
    return resolve_client(
        peer, request.headers.get("X-Forwarded-For"), current_app.config.get("TRUSTED_PROXIES", [])
    )
