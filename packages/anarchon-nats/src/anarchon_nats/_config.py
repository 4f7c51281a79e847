"""Settings of the NATS backend: names, URL options and the stream's configuration.

Everything here is pure (no I/O), so the rules are tested without a server:
which names are allowed, how a ``nats://`` URL becomes constructor arguments,
and how an existing stream's configuration is brought to what the backend
needs (docs/backends/nats.md, "The stream").
"""

from __future__ import annotations

import math
import re
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from anarchon.backend.registry import redact_url
from anarchon.durations import to_ms
from anarchon.errors import AnarchonError, InvalidConfigError, InvalidJobError

__all__ = [
    "BACKEND_OPTIONS",
    "DRIVER_OPTIONS",
    "DURABILITIES",
    "FORMAT_TOKEN",
    "JOB_NAME",
    "StreamPlan",
    "check_durability",
    "check_job_name",
    "check_prefix",
    "check_stream_name",
    "claims_needed",
    "covers",
    "new_stream_config",
    "parse_url",
    "plan_stream_update",
]

JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,200}")
"""Job names on NATS: letters, digits, ``_`` and ``-`` (they become one subject token)."""

FORMAT_TOKEN = "_format"
"""The subject token after the prefix that holds the store format marker."""

_STREAM_BAD = re.compile(r"[\s.*>/\\\x00-\x1f\x7f]")
_TOKEN_BAD = re.compile(r"[\s*>\x00-\x1f\x7f]")

BACKEND_OPTIONS = frozenset(
    {
        "stream",
        "prefix",
        "duplicate_window_ms",
        "history_size",
        "replicas",
        "request_timeout",
        "durability",
    }
)
"""URL query options the backend itself reads."""

DRIVER_OPTIONS = frozenset(
    {
        "name",
        "connect_timeout",
        "reconnect_time_wait",
        "max_reconnect_attempts",
        "ping_interval",
        "max_outstanding_pings",
        "dont_randomize",
        "no_echo",
        "user_credentials",
        "creds",
        "nkeys_seed",
        "token",
        "user",
        "password",
        "tls_ca_file",
        "tls_cert_file",
        "tls_key_file",
        "tls_hostname",
        "tls_handshake_first",
        "inbox_prefix",
    }
)
"""URL query options passed to ``nats.connect`` (converted to its types)."""

_FLOAT_DRIVER = frozenset({"connect_timeout", "reconnect_time_wait", "ping_interval"})
_INT_DRIVER = frozenset({"max_reconnect_attempts", "max_outstanding_pings"})
_BOOL_DRIVER = frozenset({"dont_randomize", "no_echo", "tls_handshake_first"})
_TLS_FILES = ("tls_ca_file", "tls_cert_file", "tls_key_file")


DURABILITIES = ("fast", "replicated")
"""The values of ``durability`` (docs/backends/nats.md, "Durability")."""


def check_durability(value: object) -> str:
    """``value`` if it is a known ``durability``, else ``InvalidConfigError`` naming both."""
    if not isinstance(value, str) or value not in DURABILITIES:
        raise InvalidConfigError(
            f"durability {value!r} is not known to the NATS backend; use one of"
            f" {', '.join(repr(d) for d in DURABILITIES)}"
        )
    return value


def check_job_name(job: object) -> str:
    """``job`` if it is a valid job name on NATS, else ``InvalidJobError``."""
    if not isinstance(job, str) or JOB_NAME.fullmatch(job) is None:
        raise InvalidJobError(
            f"job name {job!r} cannot be used with NATS: use 1-200 letters, digits, '_' or '-'"
            " (the name becomes a subject token)"
        )
    return job


def check_stream_name(stream: object) -> str:
    """A JetStream stream name: no whitespace, ``.``, ``*``, ``>``, or path separators."""
    if not isinstance(stream, str) or not 1 <= len(stream) <= 255 or _STREAM_BAD.search(stream):
        raise InvalidConfigError(
            f"stream name {stream!r} is not valid: 1-255 characters without whitespace,"
            " '.', '*', '>', '/' or '\\'"
        )
    return stream


def check_prefix(prefix: object) -> str:
    """A subject prefix: one or more literal tokens, each followed by ``.`` (``"cron."``)."""
    if not isinstance(prefix, str) or not prefix.endswith("."):
        raise InvalidConfigError(f"prefix {prefix!r} must be subject tokens ending in '.'")
    tokens = prefix[:-1].split(".")
    if any(not token or _TOKEN_BAD.search(token) for token in tokens):
        raise InvalidConfigError(
            f"prefix {prefix!r} must be non-empty subject tokens without whitespace, '*' or '>',"
            " each followed by '.' (e.g. 'cron.' or 'billing.cron.')"
        )
    return prefix


def claims_needed(window_ms: float, period_ms: int) -> int:
    """Messages per subject a job needs so no claim younger than the window is dropped.

    A job makes at most ``ceil(window / period) + 1`` claims in one window; 10 %
    and 10 more leave room for manual runs, which share the claims subject.
    """
    per_window = math.ceil(window_ms / max(period_ms, 1)) + 1
    return per_window + per_window // 10 + 10


def _tokens(subject: str) -> list[str]:
    return subject.split(".")


def covers(pattern: str, subject: str) -> bool:
    """True if every subject matched by ``subject`` is matched by ``pattern`` (NATS wildcards)."""
    want, have = _tokens(pattern), _tokens(subject)
    for i, token in enumerate(want):
        if token == ">":
            return len(have) > i
        if i >= len(have):
            return False
        if token == "*":
            if have[i] == ">":
                return False
            continue
        if token != have[i]:
            return False
    return len(have) == len(want)


def new_stream_config(
    stream: str, prefix: str, window_ms: int, per_subject: int, replicas: int | None
) -> dict[str, Any]:
    """The configuration of a stream the backend creates."""
    return {
        "name": stream,
        "description": "anarchon: claims and results of scheduled jobs",
        "subjects": [f"{prefix}>"],
        "retention": "limits",
        "storage": "file",
        "discard": "old",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 0,
        "max_msg_size": -1,
        "max_msgs_per_subject": per_subject,
        "duplicate_window": window_ms * 1_000_000,
        "num_replicas": replicas or 1,
    }


class StreamPlan:
    """What changes on an existing stream: ``config`` to send, ``changes`` to log (empty: none)."""

    __slots__ = ("changes", "config")

    def __init__(self, config: dict[str, Any], changes: list[str]) -> None:
        self.config = config
        self.changes = changes


def plan_stream_update(
    current: Mapping[str, Any],
    *,
    prefix: str,
    window_ms: int,
    per_subject: int,
    replicas: int | None,
) -> StreamPlan:
    """Bring an existing stream's configuration to what the backend needs.

    - ``duplicate_window`` is set to ours;
    - ``max_msgs_per_subject`` is set to ours;
    - ``<prefix>>`` is added to the subjects unless one of them already covers
      it (subjects it covers are folded into it);
    - ``num_replicas`` changes only when ``replicas`` is given.

    Every other setting (limits, storage, description, ...) is kept as it is.
    A stream that cannot hold claims safely is refused with
    ``InvalidConfigError``: a mirror or sealed stream, a retention other than
    ``limits`` (messages would vanish when consumed), or a ``max_age`` shorter
    than the duplicate window.
    """
    name = current.get("name", "?")
    if current.get("mirror"):
        raise InvalidConfigError(f"stream {name!r} is a mirror: it cannot take claims")
    if current.get("sealed"):
        raise InvalidConfigError(f"stream {name!r} is sealed: it cannot take claims")
    retention = current.get("retention", "limits")
    if retention != "limits":
        raise InvalidConfigError(
            f"stream {name!r} has retention {retention!r}: claims need 'limits' retention"
            " (with interest or work-queue retention, a stored claim can disappear)"
        )
    window_ns = window_ms * 1_000_000
    max_age = int(current.get("max_age") or 0)
    if 0 < max_age < window_ns:
        raise InvalidConfigError(
            f"stream {name!r} has max_age {max_age / 1e9:g} s, shorter than the duplicate window"
            f" ({window_ms / 1000:g} s): raise max_age or lower duplicate_window_ms"
        )
    config = dict(current)
    changes: list[str] = []
    if int(current.get("duplicate_window") or 0) != window_ns:
        old = int(current.get("duplicate_window") or 0) // 1_000_000
        config["duplicate_window"] = window_ns
        changes.append(f"duplicate_window {old} ms -> {window_ms} ms")
    if int(current.get("max_msgs_per_subject") or -1) != per_subject:
        config["max_msgs_per_subject"] = per_subject
        changes.append(
            f"max_msgs_per_subject {current.get('max_msgs_per_subject', -1)} -> {per_subject}"
        )
    ours = f"{prefix}>"
    subjects = [str(s) for s in current.get("subjects") or []]
    if not any(covers(s, ours) for s in subjects):
        kept = [s for s in subjects if not covers(ours, s)]
        config["subjects"] = [*kept, ours]
        changes.append(f"subjects {subjects} -> {config['subjects']}")
    if replicas is not None and int(current.get("num_replicas") or 1) != replicas:
        config["num_replicas"] = replicas
        changes.append(f"num_replicas {current.get('num_replicas', 1)} -> {replicas}")
    return StreamPlan(config, changes)


# URLs --------------------------------------------------------------------------


def _as_int(key: str, value: Any, shown: str) -> int:
    if isinstance(value, bool):
        raise InvalidConfigError(f"option {key} must be an integer, got {value!r} in {shown}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(
            f"option {key} must be an integer, got {value!r} in {shown}"
        ) from None


def _as_float(key: str, value: Any, shown: str) -> float:
    if isinstance(value, bool):
        raise InvalidConfigError(f"option {key} must be a number, got {value!r} in {shown}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(
            f"option {key} must be a number, got {value!r} in {shown}"
        ) from None
    if not math.isfinite(number):
        raise InvalidConfigError(f"option {key} must be finite, got {value!r} in {shown}")
    return number


def _as_bool(key: str, value: Any, shown: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise InvalidConfigError(f"option {key} must be true or false, got {value!r} in {shown}")


def _window_ms(value: Any, shown: str) -> int:
    """``duplicate_window_ms``: an integer (ms) or a duration with a unit (``"5m"``)."""
    if isinstance(value, str) and not value.strip().isdigit():
        try:
            return to_ms(value, what="duplicate_window_ms")
        except AnarchonError as error:
            raise InvalidConfigError(f"{error.message} in {shown}") from None
    return _as_int("duplicate_window_ms", value, shown)


def _tls_context(files: dict[str, str], shown: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=files.get("tls_ca_file"))
    cert, key = files.get("tls_cert_file"), files.get("tls_key_file")
    if key and not cert:
        raise InvalidConfigError(f"tls_key_file needs tls_cert_file in {shown}")
    if cert:
        context.load_cert_chain(cert, key)
    return context


def parse_url(url: str, options: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Split a ``nats://`` URL into server URLs and constructor keywords.

    ``nats://user:pass@h1:4222,h2:4222?stream=BILLING&replicas=3`` gives two
    server URLs (each with the credentials) and ``stream``/``replicas``.
    Query options and ``options`` (which win) are converted to their types;
    an option neither the backend nor the driver knows is an
    ``InvalidConfigError``.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
    except ValueError as error:
        raise InvalidConfigError(f"bad NATS URL {shown!r}: {error}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("nats", "tls"):
        raise InvalidConfigError(f"not a nats:// URL: {shown!r}")
    if parts.path not in ("", "/") or parts.fragment:
        raise InvalidConfigError(
            f"a nats:// URL has no path: {shown!r} (options go in the query: ?stream=NAME)"
        )
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    hosts = hostlist.split(",") if hostlist else ["localhost:4222"]
    if any(not host.strip() for host in hosts):
        raise InvalidConfigError(f"empty host in NATS URL {shown!r}")
    auth = f"{userinfo}@" if at else ""
    servers = [f"{scheme}://{auth}{host.strip()}" for host in hosts]

    pairs = parse_qsl(parts.query, keep_blank_values=True)
    query: dict[str, Any] = {}
    for key, value in pairs:
        if key in query:
            raise InvalidConfigError(f"option {key!r} given twice in {shown!r}")
        query[key] = value
    query.update(options)

    unknown = sorted(set(query) - BACKEND_OPTIONS - DRIVER_OPTIONS)
    if unknown:
        raise InvalidConfigError(
            f"unknown option(s) {', '.join(unknown)} in {shown!r}; backend options:"
            f" {', '.join(sorted(BACKEND_OPTIONS))}; connection options:"
            f" {', '.join(sorted(DRIVER_OPTIONS))}"
        )
    kwargs: dict[str, Any] = {}
    tls_files: dict[str, str] = {}
    for key, value in query.items():
        if key in ("history_size", "replicas"):
            kwargs[key] = _as_int(key, value, shown)
        elif key == "duplicate_window_ms":
            kwargs[key] = _window_ms(value, shown)
        elif key == "request_timeout":
            kwargs[key] = _as_float(key, value, shown)
        elif key in ("stream", "prefix", "durability"):
            kwargs[key] = str(value)
        elif key in _FLOAT_DRIVER:
            kwargs[key] = _as_float(key, value, shown)
        elif key in _INT_DRIVER:
            kwargs[key] = _as_int(key, value, shown)
        elif key in _BOOL_DRIVER:
            kwargs[key] = _as_bool(key, value, shown)
        elif key in _TLS_FILES:
            tls_files[key] = str(value)
        elif key == "creds":
            kwargs["user_credentials"] = str(value)
        else:
            kwargs[key] = value
    if tls_files:
        kwargs["tls"] = _tls_context(tls_files, shown)
    return servers, kwargs
