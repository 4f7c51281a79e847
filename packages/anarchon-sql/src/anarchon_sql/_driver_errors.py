"""Which driver errors are transient, and hiding secrets in what is shown.

Transient (the same call may pass when retried, so the scheduler retries it
with backoff; docs/backends/sql.md, "Errors"):

- connection lost, closed or refused, timeouts: SQLSTATE class ``08``,
  ``57014`` (statement timeout), ``55P03`` (lock timeout), psycopg's
  ``OperationalError`` without a SQLSTATE and ``InterfaceError``, asyncpg's
  ``ConnectionDoesNotExistError``/``InterfaceError`` about a closed
  connection, ``ConnectionError``/``TimeoutError``/``OSError``;
- the server shutting down or starting up: ``57P01``, ``57P02``, ``57P03``,
  and too many connections, ``53300``;
- serialisation failures and deadlocks: ``40001``, ``40P01``;
- SQLite's ``SQLITE_BUSY`` and ``SQLITE_LOCKED`` (``database is locked``).

Everything else reaches the user. The checks are duck-typed (a ``sqlstate``
or ``pgcode`` attribute, ``sqlite_errorcode``, class names), so they hold for
psycopg, asyncpg and sqlite3 without importing them.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from urllib.parse import unquote

from anarchon.backend.registry import redact_url

__all__ = [
    "is_connection_error",
    "is_transient_sql_error",
    "redact_dsn",
    "scrub",
    "secrets_of_dsn",
]

TRANSIENT_SQLSTATES = frozenset(
    {"40001", "40P01", "57P01", "57P02", "57P03", "57014", "55P03", "53300"}
)
"""SQLSTATEs worth a retry besides the connection class ``08``."""

_CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6

_CLOSED_WORDS = ("connection is closed", "connection was closed", "connection lost", "closed")


def _sqlstate(error: BaseException) -> str | None:
    for name in ("sqlstate", "pgcode"):
        value = getattr(error, name, None)
        if isinstance(value, str) and value:
            return value
    return None


def _is_sqlite_busy(error: BaseException) -> bool:
    if not isinstance(error, sqlite3.Error):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(error).lower()
    return "database is locked" in text or "database table is locked" in text


def _class_names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def is_connection_error(error: BaseException) -> bool:
    """True when ``error`` says the connection failed, was lost or closed, or the server is going."""
    state = _sqlstate(error)
    if state is not None:
        return state.startswith("08") or state in _CONNECTION_SQLSTATES
    if isinstance(error, sqlite3.Error):
        return False
    names = _class_names(error)
    if names & {"ConnectionDoesNotExistError", "ConnectionFailureError", "PoolTimeout"}:
        return True
    if "InterfaceError" in names:
        module = type(error).__module__
        return module.startswith("psycopg") or any(w in str(error).lower() for w in _CLOSED_WORDS)
    if "OperationalError" in names and type(error).__module__.startswith("psycopg"):
        return True  # psycopg: no SQLSTATE means the connection (or the pool) failed
    return isinstance(error, (ConnectionError, TimeoutError))


def is_transient_sql_error(error: BaseException) -> bool:
    """True when retrying the same call may succeed (see the module doc for the list)."""
    if _is_sqlite_busy(error):
        return True
    state = _sqlstate(error)
    if state is not None:
        return state.startswith("08") or state in TRANSIENT_SQLSTATES
    if is_connection_error(error):
        return True
    return isinstance(error, (ConnectionError, TimeoutError)) or (
        isinstance(error, OSError) and not isinstance(error, sqlite3.Error)
    )


_KV_SECRET = re.compile(
    r"""(?P<key>\b(?:ssl)?password\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*(?:'|$)|[^\s']+)""",
    re.IGNORECASE,
)
_QUERY_SECRET = re.compile(r"(?P<key>[?&](?:ssl)?password=)(?P<value>[^&#]*)", re.IGNORECASE)


def secrets_of_dsn(dsn: str) -> list[str]:
    """The password values written in ``dsn`` (URL user info, ``password=`` options), raw."""
    found: list[str] = []
    if "://" in dsn:
        netloc = dsn.partition("://")[2]
        for mark in "/?#":
            netloc = netloc.partition(mark)[0]
        userinfo, at, _host = netloc.rpartition("@")
        if at and ":" in userinfo:
            password = userinfo.partition(":")[2]
            if password:
                found += [password, unquote(password)]
    pattern = _QUERY_SECRET if "://" in dsn else _KV_SECRET
    for m in pattern.finditer(dsn):
        value = m.group("value")
        if value:
            found += [value, unquote(value)]
            inner = value.strip("'")
            if inner and inner != value:
                found.append(inner)
    return found


def redact_dsn(dsn: str) -> str:
    """``dsn`` with every password replaced by ``***`` (URL user info and ``password=`` options).

    Works for URLs (``postgresql://u:pw@h/db?sslpassword=x``) and libpq
    ``key=value`` strings (``host=h password='a b'``), an unterminated quote
    included.
    """
    if "://" in dsn:
        return _QUERY_SECRET.sub(lambda m: m.group("key") + "***", redact_url(dsn))
    return _KV_SECRET.sub(lambda m: m.group("key") + "***", dsn)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every secret (and every 3+ character word of a secret) replaced by ``***``."""
    pieces: set[str] = set()
    for secret in secrets:
        if secret:
            pieces.add(secret)
            pieces.update(word for word in re.split(r"\s+", secret) if len(word) >= 3)
    for piece in sorted(pieces, key=len, reverse=True):
        text = text.replace(piece, "***")
    return text
