"""Loopback HTTP: requests to a server on this machine never go through a proxy.

httpx honours ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` for every host that ``NO_PROXY`` does not name,
127.0.0.1 included; behind a corporate proxy a readiness probe of a managed server on 127.0.0.1 would then go to
the proxy and never succeed. Loopback URLs are therefore requested with the environment ignored
(``trust_env=False``); any other host keeps the user's proxy settings.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback_url(url: str) -> bool:
    """True when ``url``'s host is this machine (127.0.0.0/8, ::1 or localhost)."""
    host = (urlsplit(url).hostname or "").lower()
    if host in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def trust_env(url: str) -> bool:
    """httpx's ``trust_env`` for a request to ``url``: False for loopback (no proxy), True otherwise."""
    return not is_loopback_url(url)
