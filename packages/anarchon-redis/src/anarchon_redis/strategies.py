"""Strategies: how exactly one instance wins a slot, as typed settings objects.

A strategy is named (``"lease"``, ``"stream-id"``, ``"idmp"``, ``"script"``)
or given as a settings object (``Lease()``, ``StreamId()``, ``Idmp()``,
``Script()``). Each settings class takes only the
settings its strategy uses, so a wrong one is a ``TypeError`` for a type
checker and an ``InvalidConfigError`` at construction (and in a URL query).

Settings hold settings only: the code that runs a strategy (its runtime) is
paired with its settings class in one table, ``anarchon_redis._runtimes``.
To add a strategy: subclass :class:`Strategy` as a frozen dataclass, set
``name`` (and ``leases``/``redis_only``), implement ``dedupe_window_ms``, add
the class to :data:`STRATEGIES` and its runtime to that table.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from anarchon.errors import InvalidConfigError

__all__ = [
    "DEFAULT_LEASE_WINDOW_MS",
    "MIN_LEASE_WINDOW_MS",
    "STRATEGIES",
    "Idmp",
    "Lease",
    "Script",
    "Strategy",
    "StreamId",
    "UnknownSettingError",
    "parse_strategy",
]

DEFAULT_LEASE_WINDOW_MS = 7 * 24 * 3600 * 1000
"""``Lease.window_ms`` by default: one week."""

MIN_LEASE_WINDOW_MS = 60_000
"""The shortest ``Lease.window_ms``: one minute (a late claim must still find its run state)."""


class UnknownSettingError(InvalidConfigError, TypeError):
    """A settings class given a setting its strategy does not take (``ANARCHON_INVALID_CONFIG``).

    Also a ``TypeError``, as for any call with an unexpected keyword.
    """


class _SettingsMeta(abc.ABCMeta):
    """Turns a settings class's ``TypeError`` (an unknown or extra argument) into a coded error."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except TypeError as error:
            if isinstance(error, InvalidConfigError):
                raise
            name = getattr(cls, "name", cls.__name__)
            fields = _settings_names(cls)
            takes = ", ".join(fields) or "no settings"
            raise UnknownSettingError(
                f"{cls.__name__} (strategy {name!r}): {error} (it takes: {takes})"
            ) from None


def _settings_names(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []


class Strategy(abc.ABC, metaclass=_SettingsMeta):
    """Base of the strategy settings classes (frozen dataclasses): settings only."""

    name: ClassVar[str]
    """The strategy's name, as in ``strategy=<name>``."""
    leases: ClassVar[bool] = False
    """True when the strategy gives the scheduler leases (``backend.runs``)."""
    redis_only: ClassVar[bool] = False
    """True when Valkey cannot run it (``ValkeyBackend`` refuses it)."""

    @property
    @abc.abstractmethod
    def dedupe_window_ms(self) -> float:
        """How long the store remembers a claimed run (``math.inf``: forever)."""

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Strategy:
        """Build the settings from URL query options (strings) or keywords.

        An option the strategy does not take is an ``InvalidConfigError``.
        """
        fields: dict[str, dataclasses.Field[Any]] = (
            {f.name: f for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else {}
        )
        unknown = sorted(set(options) - set(fields))
        if unknown:
            takes = ", ".join(sorted(fields)) or "no settings"
            raise InvalidConfigError(
                f"strategy {cls.name!r} does not take {', '.join(unknown)} (it takes: {takes})"
            )
        values: dict[str, Any] = {}
        for key, value in options.items():
            values[key] = _convert(cls.name, key, value, fields[key].type)
        try:
            return cls(**values)
        except TypeError as error:
            raise InvalidConfigError(f"strategy {cls.name!r}: {error}") from None

    def describe(self) -> str:
        """``name`` plus the settings that differ from the defaults, for messages."""
        return self.name


def _convert(strategy: str, key: str, value: Any, annotation: Any) -> Any:
    """A URL option's string as the setting's type (int or float)."""
    if not isinstance(value, str):
        return value
    kind = str(annotation)
    try:
        if "int" in kind:
            return int(value)
        if "float" in kind:
            return float(value)
    except ValueError:
        raise InvalidConfigError(
            f"strategy {strategy!r}: {key} must be a number, got {value!r}"
        ) from None
    return value


def _positive_int(strategy: str, key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidConfigError(
            f"strategy {strategy!r}: {key} must be a positive integer, got {value!r}"
        )


@dataclass(frozen=True)
class Lease(Strategy):
    """Leases through one Lua claim script (docs/leases.md): backups, overlap, retries, hand-over.

    ``window_ms``: the longest a claim may come after its slot, so the
    longest ``jitter + max_late`` (and ``catch_up``) a job may have; run state
    is kept as long as the job's own ``max_late``/``catch_up`` need, and at
    most about this long (default one week, at least one minute).
    """

    name: ClassVar[str] = "lease"
    leases: ClassVar[bool] = True

    window_ms: int = DEFAULT_LEASE_WINDOW_MS

    def __post_init__(self) -> None:
        _positive_int(self.name, "window_ms", self.window_ms)
        if self.window_ms < MIN_LEASE_WINDOW_MS:
            raise InvalidConfigError(
                f"strategy 'lease': window_ms must be at least {MIN_LEASE_WINDOW_MS} (one"
                f" minute), got {self.window_ms}: it bounds how late a claim may come"
            )

    @property
    def dedupe_window_ms(self) -> float:
        """``window_ms``: run state outlives every claim that may still ask for it."""
        return float(self.window_ms)


@dataclass(frozen=True)
class StreamId(Strategy):
    """``XADD <prefix><job>:runs <slot>-0``: the server refuses an ID not above the stream's top.

    No leases. A claim is remembered forever (the stream keeps its top ID even
    when trimmed), so ``dedupe_window_ms`` is infinite; a slot older than the
    newest claimed one is refused (it acts as ``late``).
    """

    name: ClassVar[str] = "stream-id"

    @property
    def dedupe_window_ms(self) -> float:
        """Forever: a stream never accepts an ID at or below its top again."""
        return math.inf


def _int_in(strategy: str, key: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidConfigError(
            f"strategy {strategy!r}: {key} must be an integer from {low} to {high}, got {value!r}"
        )


@dataclass(frozen=True)
class Idmp(Strategy):
    """Idempotent ``XADD <prefix><job>:runs IDMP <job> <slot> * ...`` (Redis 8.6+ only).

    A duplicate ``XADD`` returns the first entry's ID; the claim reads that
    entry and compares tokens. The server remembers each slot for
    ``duration_sec`` seconds (1-86400, default 300) and at most ``max_size``
    slots per job (1-10000, default 1000); both are set with ``XCFGSET`` when
    the job's stream is created, and never changed afterwards (changing them
    clears the remembered slots). No leases. Valkey does not have it.
    """

    name: ClassVar[str] = "idmp"
    redis_only: ClassVar[bool] = True

    duration_sec: int = 300
    max_size: int = 1000

    def __post_init__(self) -> None:
        _int_in(self.name, "duration_sec", self.duration_sec, 1, 86_400)
        _int_in(self.name, "max_size", self.max_size, 1, 10_000)

    @property
    def dedupe_window_ms(self) -> float:
        """``duration_sec`` in ms: how long the server remembers a claimed slot."""
        return float(self.duration_sec * 1000)

    def describe(self) -> str:
        """``idmp`` and its settings."""
        return f"idmp(duration_sec={self.duration_sec}, max_size={self.max_size})"


@dataclass(frozen=True)
class Script(Strategy):
    """A Lua script scans the job's recent claims for the slot and appends only if absent.

    Works on Redis 5+ and Valkey, no leases. ``window_ms`` (default 300000)
    is how far back the script looks and how long a claim is kept: it must
    exceed every job's ``jitter + max_late`` (the scheduler checks it).
    """

    name: ClassVar[str] = "script"

    window_ms: int = 300_000

    def __post_init__(self) -> None:
        _positive_int(self.name, "window_ms", self.window_ms)

    @property
    def dedupe_window_ms(self) -> float:
        """``window_ms``: claims younger than it are kept and scanned."""
        return float(self.window_ms)

    def describe(self) -> str:
        """``script`` and its window."""
        return f"script(window_ms={self.window_ms})"


STRATEGIES: dict[str, type[Strategy]] = {
    "lease": Lease,
    "stream-id": StreamId,
    "idmp": Idmp,
    "script": Script,
}
"""Known strategies by name."""


def parse_strategy(value: str | Strategy, options: Mapping[str, Any] | None = None) -> Strategy:
    """A settings object from a name (plus its options) or a settings object as is."""
    if isinstance(value, Strategy):
        if options:
            raise InvalidConfigError(
                f"strategy settings ({', '.join(sorted(options))}) go into the"
                f" {type(value).__name__}(...) object, not beside it"
            )
        return value
    if not isinstance(value, str):
        raise InvalidConfigError(
            f"strategy must be a name or a settings object, not {type(value).__name__}"
        )
    cls = STRATEGIES.get(value.strip().lower())
    if cls is None:
        known = ", ".join(sorted(STRATEGIES))
        raise InvalidConfigError(f"unknown strategy {value!r} (known: {known})")
    return cls.from_options(dict(options or {}))
