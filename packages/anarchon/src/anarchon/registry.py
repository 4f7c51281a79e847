"""Backend discovery: a URL's scheme names an entry point in ``anarchon.backends`` (docs/concepts.md, "Backend URLs").

``resolve_backend("redis://cache:6379/1?prefix=billing:")`` loads the class
registered for ``redis`` (lazily: only that plugin is imported) and calls
``from_url(url, prefix="billing:")``. The backend decides which options it
accepts. Passwords never reach an error message or a log line: every URL shown
goes through :func:`redact_url`.
"""

from __future__ import annotations

import logging
import os
import threading
from importlib.metadata import EntryPoint, entry_points
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from anarchon.backend import Backend
from anarchon.errors import InvalidConfigError, UnknownBackendError

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "EXTRAS",
    "installed_backends",
    "redact_url",
    "resolve_backend",
]

ENTRY_POINT_GROUP = "anarchon.backends"
"""The entry-point group backends register under (name = URL scheme)."""

ENV_VAR = "ANARCHON_BACKEND_URL"
"""Read when no backend is given."""

DEFAULT_URL = "memory://"
"""The backend when neither an argument nor the environment names one."""

EXTRAS: dict[str, str] = {
    "redis": "redis",
    "rediss": "redis",
    "valkey": "valkey",
    "valkeys": "valkey",
    "nats": "nats",
    "postgresql": "postgres",
    "postgres": "postgres",
    "sqlite": "sqlite",
}
"""Known URL schemes and the extra of ``anarchon`` that installs their backend."""

_SECRET_OPTIONS = frozenset(
    {"password", "passwd", "pass", "pwd", "secret", "token", "auth_token", "api_key", "apikey"}
)

log = logging.getLogger("anarchon")

_lock = threading.Lock()
_classes: dict[str, type[Backend]] = {}


def redact_url(url: str) -> str:
    """``url`` with its password (and password-like query options) replaced by ``***``.

    ``redis://user:secret@host:6379/0`` → ``redis://user:***@host:6379/0``. The
    user name stays visible; the rest of the URL is returned exactly as given.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    cut = len(rest)
    for mark in "/?#":
        found = rest.find(mark)
        if found != -1:
            cut = min(cut, found)
    netloc, tail = rest[:cut], rest[cut:]
    userinfo, at, hostinfo = netloc.rpartition("@")
    if at:
        user, colon, _password = userinfo.partition(":")
        netloc = f"{user}:***@{hostinfo}" if colon else netloc
    path, qmark, query = tail.partition("?")
    if qmark:
        query, hash_, fragment = query.partition("#")
        pairs = []
        for pair in query.split("&"):
            key, eq, _value = pair.partition("=")
            if eq and unquote_plus(key).lower() in _SECRET_OPTIONS:
                pair = f"{key}=***"
            pairs.append(pair)
        tail = f"{path}?{'&'.join(pairs)}{hash_}{fragment}"
    return f"{scheme}://{netloc}{tail}"


def _entry_points() -> dict[str, EntryPoint]:
    """Installed backend entry points by scheme (lower case)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name.lower(), ep)
    return found


def _distribution(ep: EntryPoint) -> tuple[str, str]:
    dist = ep.dist
    if dist is None:
        return "", ""
    name = dist.metadata["Name"] if dist.metadata is not None else None
    return str(name or getattr(dist, "name", "") or ""), str(dist.version or "")


def installed_backends() -> list[tuple[str, str, str, str]]:
    """``(scheme, target, distribution, version)`` of every installed backend, by scheme.

    ``target`` is the entry point's ``module:attribute``; nothing is imported.
    """
    rows = []
    for scheme, ep in sorted(_entry_points().items()):
        dist, version = _distribution(ep)
        rows.append((scheme, ep.value, dist, version))
    return rows


def _install_hint(scheme: str) -> str:
    extra = EXTRAS.get(scheme)
    return f'pip install "anarchon[{extra}]"' if extra is not None else ""


def _backend_class(scheme: str, shown_url: str) -> type[Backend]:
    """The class registered for ``scheme``, imported on first use and cached."""
    with _lock:
        cls = _classes.get(scheme)
    if cls is not None:
        return cls
    available = _entry_points()
    ep = available.get(scheme)
    if ep is None:
        hint = _install_hint(scheme)
        if hint:
            message = f"no backend installed for {scheme}:// ({shown_url}); install it: {hint}"
        else:
            schemes = ", ".join(f"{s}://" for s in sorted(available)) or "none"
            message = (
                f"no backend for the URL scheme {scheme!r} ({shown_url}); installed: {schemes}"
            )
        raise UnknownBackendError(message)
    try:
        loaded = ep.load()
    except Exception as error:
        dist, version = _distribution(ep)
        origin = f"{dist} {version}".strip() or ep.value
        log.error(
            "anarchon: the backend plugin for %s:// (%s, from %s) failed to import: %s",
            scheme,
            ep.value,
            origin,
            error,
            exc_info=True,
        )
        hint = _install_hint(scheme)
        advice = f"; reinstall it ({hint})" if hint else ""
        raise UnknownBackendError(
            f"the backend for {scheme}:// ({ep.value}, from {origin}) failed to import: "
            f"{type(error).__name__}: {error}{advice}"
        ) from error
    if not (isinstance(loaded, type) and issubclass(loaded, Backend)):
        raise UnknownBackendError(
            f"the entry point {scheme} = {ep.value!r} in {ENTRY_POINT_GROUP} is not a Backend class"
        )
    with _lock:
        _classes.setdefault(scheme, loaded)
        return _classes[scheme]


def resolve_backend(url: str | Backend | None) -> Backend:
    """A :class:`Backend` from an object, a URL, or the environment.

    - a ``Backend`` is returned as is;
    - ``None`` reads ``ANARCHON_BACKEND_URL``, else uses ``memory://``;
    - a URL's scheme selects the entry point of that name in the group
      ``anarchon.backends``; its query options are passed as keywords:
      ``cls.from_url(url, **options)`` (the URL itself is passed unchanged).

    Raises ``UnknownBackendError`` (``ANARCHON_UNKNOWN_BACKEND``) for a scheme
    no installed package serves — naming the extra to install — or a plugin
    that fails to import, and ``InvalidConfigError`` for a string that is not
    a URL. Errors of ``from_url`` (e.g. an unknown option) reach the caller
    unchanged.
    """
    if isinstance(url, Backend):
        return url
    if url is None:
        url = os.environ.get(ENV_VAR, "").strip() or DEFAULT_URL
    if not isinstance(url, str):
        raise InvalidConfigError(
            f"backend must be a Backend or a URL string, not {type(url).__name__}"
        )
    shown = redact_url(url)
    if "://" not in url:
        raise InvalidConfigError(f"backend URL must look like scheme://..., got {shown!r}")
    try:
        parts = urlsplit(url)
    except ValueError as error:
        raise InvalidConfigError(f"bad backend URL {shown!r}: {error}") from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidConfigError(f"backend URL has no scheme: {shown!r}")
    options: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in options:
            raise InvalidConfigError(f"backend URL option {key!r} given twice in {shown!r}")
        options[key] = value
    cls = _backend_class(scheme, shown)
    backend = cls.from_url(url, **options)
    if not isinstance(backend, Backend):
        raise InvalidConfigError(
            f"{cls.__name__}.from_url() returned {type(backend).__name__}, not a Backend"
        )
    return backend
