"""Backend discovery: a URL's scheme names an entry point in ``anarchon.backends`` (docs/concepts.md, "Backend URLs").

``resolve_backend("redis://cache:6379/1?prefix=billing:")`` loads the class
registered for ``redis`` (lazily: only that plugin is imported) and calls
``from_url(url, prefix="billing:")``. The backend decides which options it
accepts. Passwords never reach an error message or a log line: every URL shown
goes through :func:`redact_url`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from importlib.metadata import EntryPoint, entry_points
from urllib.parse import parse_qsl, unquote_plus, urlsplit

from anarchon.backend.base import Backend
from anarchon.errors import InvalidConfigError, UnknownBackendError

__all__ = [
    "ENTRY_POINT_GROUP",
    "ENV_VAR",
    "EXTRAS",
    "installed_backends",
    "redact_secrets",
    "redact_text",
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
    "redis+sentinel": "redis",
    "redis+cluster": "redis",
    "valkey+sentinel": "valkey",
    "valkey+cluster": "valkey",
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


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_DSN_START = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*=")
_DSN_PAIR = re.compile(
    r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?P<eq>\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|[^\s']*)"
)
_USER_SCHEMES = frozenset(
    {"redis", "rediss", "valkey", "valkeys", "postgres", "postgresql", "sqlite", "memory"}
)
"""Schemes where a user name without a password is a user name, not a token."""
_PATH_SCHEMES = frozenset({"sqlite", "file"})
"""Schemes whose URL may carry a file path after an empty authority."""

_HIDDEN = "***"


def redact_url(url: str) -> str:
    """``url`` with its password (and password-like options) replaced by ``***``.

    ``redis://user:secret@host:6379/0`` → ``redis://user:***@host:6379/0``. A
    well-formed URL is returned exactly as given except for the secret; the
    user name stays visible. Malformed shapes are redacted too, erring on the
    side of hiding more:

    - no ``//`` after the scheme (``cron:hunter2@cache:6379/0``,
      ``redis:/u:pw@host``) or no scheme at all (``u:pw@host``): everything
      before the last ``@`` but the user name is hidden;
    - a password with a raw ``/``, ``?`` or ``#`` (``redis://u:a/b@host``):
      everything up to the last ``@`` but the user name is hidden;
    - a user name alone is hidden unless the scheme is one where it is only a
      user name (Redis, Valkey, PostgreSQL, SQLite): for NATS it is a token;
    - a "port" that is not a number (``redis://u:hunter2``, ``@host`` left out)
      is hidden;
    - query options and libpq ``key=value`` DSNs (``host=db password=x``):
      the values of ``password``, ``token``, ``secret`` and similar keys.
    """
    if "://" not in url and _DSN_START.match(url):
        return _redact_pairs(url)
    scheme_match = _SCHEME.match(url)
    scheme = scheme_match.group()[:-1].lower() if scheme_match else ""
    head = scheme_match.end() if scheme_match else 0
    well_formed = url.startswith("//", head)
    start = head + 2 if well_formed else head
    if not well_formed or scheme not in _PATH_SCHEMES:
        # Only a file path may follow an empty authority (sqlite:///x.db);
        # elsewhere extra slashes are a typo before the userinfo.
        while url.startswith("/", start):
            start += 1
    rest = url[start:]
    cut = min((i for i in (rest.find(m) for m in "/?#") if i != -1), default=len(rest))
    at = rest.rfind("@", 0, cut)
    if at == -1 and cut > 0 and "@" in rest[cut:]:
        # A password with a raw "/", "?" or "#": the userinfo ends at the last "@".
        at = rest.rfind("@")
    if at != -1:
        userinfo, hostinfo, tail = rest[:at], rest[at + 1 :], ""
        cut = min((i for i in (hostinfo.find(m) for m in "/?#") if i != -1), default=len(hostinfo))
        hostinfo, tail = hostinfo[:cut], hostinfo[cut:]
        user, colon, _password = userinfo.partition(":")
        if colon:
            userinfo = f"{user}:{_HIDDEN}"
        elif not (well_formed and scheme in _USER_SCHEMES):
            userinfo = _HIDDEN
        netloc = f"{userinfo}@{_redact_ports(hostinfo)}"
    else:
        netloc, tail = _redact_ports(rest[:cut]), rest[cut:]
    return f"{url[:start]}{netloc}{_redact_query(tail)}"


def _redact_ports(hostinfo: str) -> str:
    """Hide a "port" that is not a number: most likely a password whose ``@host`` is missing."""
    hosts = []
    for host in hostinfo.split(","):
        name, colon, port = host.rpartition(":")
        if colon and port and not port.isdigit() and "]" not in port:
            host = f"{name}:{_HIDDEN}"
        hosts.append(host)
    return ",".join(hosts)


def _redact_query(tail: str) -> str:
    """Hide the values of secret options in ``path?query#fragment``."""
    path, qmark, query = tail.partition("?")
    if not qmark:
        return tail
    query, hash_, fragment = query.partition("#")
    pairs = []
    for pair in query.split("&"):
        key, eq, _value = pair.partition("=")
        if eq and _is_secret_key(key):
            pair = f"{key}={_HIDDEN}"
        pairs.append(pair)
    return f"{path}?{'&'.join(pairs)}{hash_}{fragment}"


def _redact_pairs(dsn: str) -> str:
    """Hide the values of secret keys in a libpq ``key=value`` DSN (quoted values too)."""

    def hide(match: re.Match[str]) -> str:
        if not _is_secret_key(match["key"]):
            return match.group()
        return f"{match['key']}{match['eq']}{_HIDDEN}"

    return _DSN_PAIR.sub(hide, dsn)


def _is_secret_key(key: str) -> bool:
    name = unquote_plus(key).strip().lower()
    return name in _SECRET_OPTIONS or name.endswith("password")


def redact_text(text: str, url: str) -> str:
    """``text`` (e.g. a driver's error message) with every secret of ``url`` hidden.

    The secrets are the pieces of ``url`` that :func:`redact_url` hides; each
    occurrence in ``text`` becomes ``***``.
    """
    shown = redact_url(url)
    if shown == url:
        return text
    secrets = {p for p in re.split(r"[:@/?#&=,\s']", url) if p and p not in shown}
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, _HIDDEN)
    return text


# The lookbehinds start a match only where a word starts: linear time on any text.
_URL_IN_TEXT = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]+")
_PAIR_IN_TEXT = re.compile(
    r"(?<![A-Za-z0-9_])(?P<key>[A-Za-z_][A-Za-z0-9_]*)(?P<close>['\"]?)(?P<sep>\s*[=:]\s*)"
    r"(?P<value>'[^']*'?|\"[^\"]*\"?|[^\s,;&'\"})\]]+)"
)


def redact_secrets(text: str) -> str:
    """``text`` (e.g. a handler's error message) with the secrets it seems to hold hidden.

    Unlike :func:`redact_text`, no URL is known in advance: every URL in
    ``text`` goes through :func:`redact_url` (``postgresql://admin:***@db/x``),
    and the value of every password-like key (``password=...``,
    ``'token': '...'``) becomes ``***``.
    """
    text = _URL_IN_TEXT.sub(lambda match: redact_url(match.group()), text)

    def hide(match: re.Match[str]) -> str:
        if not _is_secret_key(match["key"]):
            return match.group()
        value = match["value"]
        quote = value[0] if value[0] in "'\"" else ""
        return f"{match['key']}{match['close']}{match['sep']}{quote}{_HIDDEN}{quote}"

    return _PAIR_IN_TEXT.sub(hide, text)


def _redact_exception(error: BaseException, url: str) -> None:
    """Hide the secrets of ``url`` in ``error``'s message and in its causes, in place."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen and len(seen) < 16:
        seen.add(id(current))
        current.args = tuple(
            redact_text(arg, url) if isinstance(arg, str) else arg for arg in current.args
        )
        message = getattr(current, "message", None)
        if isinstance(message, str):
            with contextlib.suppress(AttributeError):  # a read-only attribute
                current.message = redact_text(message, url)  # type: ignore[attr-defined]
        current = current.__cause__ or current.__context__


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
    as they are, except that any secret of the URL in their messages (and in
    those of their causes) is replaced by ``***``: no error of this function
    shows a password, whatever the shape of the URL.
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
        raise InvalidConfigError(
            f"bad backend URL {shown!r}: {redact_text(str(error), url)}"
        ) from None
    scheme = parts.scheme.lower()
    if not scheme:
        raise InvalidConfigError(f"backend URL has no scheme: {shown!r}")
    options: dict[str, str] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in options:
            raise InvalidConfigError(f"backend URL option {key!r} given twice in {shown!r}")
        options[key] = value
    cls = _backend_class(scheme, shown)
    try:
        backend = cls.from_url(url, **options)
    except Exception as error:
        _redact_exception(error, url)
        raise
    if not isinstance(backend, Backend):
        raise InvalidConfigError(
            f"{cls.__name__}.from_url() returned {type(backend).__name__}, not a Backend"
        )
    return backend
