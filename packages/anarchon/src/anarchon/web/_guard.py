"""What the status page checks before it answers (docs/operations.md, "Exposing the status page").

- :class:`HostCheck`: the ``Host`` header must name an allowed host, so a
  DNS-rebinding page cannot reach the app through a name of its own.
- :func:`cross_site`: a ``POST`` a browser sent from another site is refused,
  whether or not the app has a token.
- :func:`error_text`: a handler's error text, truncated and with its secrets
  hidden, before anyone reads it.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from anarchon.backend.registry import redact_secrets
from anarchon.errors import InvalidConfigError

__all__ = ["LOOPBACK_NAMES", "HostCheck", "cross_site", "error_text", "host_name"]

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""The hosts allowed by default on a request that arrived on a loopback address."""

_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_name(host: str) -> str:
    """The name in a ``Host`` header value, without port, brackets or final dot, lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        name = host[1 : host.find("]")] if "]" in host else host[1:]
    else:
        name, colon, port = host.rpartition(":")
        if not colon or not port.isdigit():
            name = host
    return name.rstrip(".")


def _is_loopback(address: str) -> bool:
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.split("%")[0]).is_loopback
    except ValueError:
        return False


def _pattern(entry: str) -> str:
    entry = entry.strip().lower()
    if entry == "*" or entry.startswith("."):
        return entry
    if entry.startswith("*."):
        return entry[1:]
    return host_name(entry)


class HostCheck:
    """Which ``Host`` headers the app answers.

    ``allowed``: names (``ops.example.com``), ``.example.com`` for a domain
    and its subdomains, or ``*`` for any host. ``None`` (the default): a
    request that arrived on a loopback address must name a loopback host
    (:data:`LOOPBACK_NAMES`); others may name any host.
    """

    def __init__(self, allowed: Sequence[str] | None) -> None:
        if isinstance(allowed, str):
            raise InvalidConfigError("allowed_hosts must be a list of host names, not one string")
        if allowed is not None:
            bad = [h for h in allowed if not isinstance(h, str) or not h.strip()]
            if bad:
                raise InvalidConfigError(f"allowed_hosts must be non-empty names, got {bad!r}")
        self.allowed = None if allowed is None else [_pattern(h) for h in allowed]

    def refusal(self, host: str | None, server: Any) -> str | None:
        """Why a request with ``Host: host`` that arrived on ``server`` is refused, or None."""
        name = host_name(host or "")
        allowed = self.allowed
        if allowed is None:
            address = server[0] if isinstance(server, (tuple, list)) and server else None
            if not isinstance(address, str) or not _is_loopback(address):
                return None
            allowed = list(LOOPBACK_NAMES)
            if name in allowed:
                return None
            return (
                f"host {name!r} is not allowed: a request on a loopback address must name"
                " localhost, 127.0.0.1 or ::1; give the names this page is reached by in"
                " allowed_hosts (anarchon dashboard --allowed-host)"
            )
        for entry in allowed:
            if entry in ("*", name) or (entry.startswith(".") and f".{name}".endswith(entry)):
                return None
        return f"host {name!r} is not in allowed_hosts"


def _origin_key(origin: str) -> tuple[str, str, int] | None:
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname.lower().rstrip("."), port or _DEFAULT_PORTS.get(scheme, 0)


def cross_site(headers: Mapping[str, str], scheme: str, trusted: Sequence[str]) -> str | None:
    """Why a ``POST`` with these headers is a cross-site request (refused), or None.

    ``Sec-Fetch-Site`` must be ``same-origin`` (or ``none``: typed by the user),
    else ``Origin`` must be the page's own origin (its host and port, as the
    ``Host`` header names them) or one of ``trusted``. A request with neither
    header is not from a browser (``curl``, a script) and passes.
    """
    origin = headers.get("origin")
    if origin is not None and origin.strip() in trusted:
        return None
    site = headers.get("sec-fetch-site")
    if site is not None:
        if site.strip().lower() in ("same-origin", "none"):
            return None
        return f"a {site!r} request (Sec-Fetch-Site) may not write; send it from the page itself"
    if origin is None:
        return None
    given = _origin_key(origin)
    host = headers.get("host", "")
    own = _origin_key(f"{given[0] if given else scheme}://{host}")
    if given is None or own is None or given[1:] != own[1:]:
        return f"origin {origin.strip()[:100]!r} is not this page's; a cross-site request may not write"
    return None


@functools.lru_cache(maxsize=4096)  # a failing job repeats one message run after run
def error_text(error: str | None, chars: int) -> str | None:
    """``error`` with its secrets hidden (:func:`~anarchon.backend.registry.redact_secrets`), cut to ``chars``."""
    if error is None:
        return None
    # Cut before redacting (a huge message costs little), with room for what redaction
    # shortens; a URL cut in its password is still hidden (redact_url), and the final cut
    # drops anything the first one may have split.
    read = chars * 4 + 200
    shown = redact_secrets(error[:read])
    if len(shown) <= chars and len(error) <= read:
        return shown
    return shown[: chars - 1] + "…"
