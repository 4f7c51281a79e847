"""Job definitions and their validation when a job is added (docs/concepts.md, "Job options")."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from anarchon.backend.history import DEFAULT_HISTORY_SIZE
from anarchon.context import RunContext
from anarchon.durations import to_ms
from anarchon.errors import InvalidJobError, UnsupportedError
from anarchon.retry import Retry
from anarchon.schedules import Schedule
from anarchon.types import JobLimits

__all__ = ["DEFAULTS", "LEASE_OPTIONS", "Handler", "Job", "build_job", "validate_name"]

Handler = Callable[[RunContext], Awaitable[None] | None]
"""A job's handler: ``async def h(ctx)`` or ``def h(ctx)`` (run in a thread)."""

DEFAULTS: Mapping[str, Any] = {
    "jitter": 2_000,
    "max_late": 60_000,
    "timeout": None,
    "history_size": DEFAULT_HISTORY_SIZE,
    "history_ttl": None,
    "overlap": False,
    "max_attempts": 3,
    "catch_up": 0,
    "enabled": True,
    "retry": None,
    "if_uncertain": "skip",
}
"""Job option defaults (durations in ms)."""

LEASE_OPTIONS = frozenset({"overlap", "max_attempts", "catch_up", "if_uncertain"})
"""Options that only lease backends honour; passing them elsewhere is refused."""

_BAD_NAME = re.compile(r"[\s{}|\x00-\x1f\x7f-\x9f]")
"""Whitespace, ``{ } |`` and the control characters: C0 (U+0000-U+001F), DEL and C1 (U+0080-U+009F)."""


def validate_name(name: object) -> str:
    """Check a job name: 1-200 characters, no whitespace, no ``{ } |``, no control characters.

    Control characters are C0 (U+0000-U+001F), DEL (U+007F) and C1
    (U+0080-U+009F, e.g. ``'\\x9b'``, which some terminals read as an escape).
    """
    if not isinstance(name, str):
        raise InvalidJobError(f"job name must be a string, got {type(name).__name__}")
    if not 1 <= len(name) <= 200:
        raise InvalidJobError(f"job name must be 1-200 characters, got {len(name)}")
    bad = _BAD_NAME.search(name)
    if bad is not None:
        raise InvalidJobError(
            f"job name {name!r} has a forbidden character {bad.group()!r} at position {bad.start()}"
            " (no whitespace, '{', '}', '|' or control characters)",
            position=bad.start(),
        )
    return name


@dataclass(frozen=True)
class Job:
    """A registered job with validated options (durations in ms)."""

    name: str
    schedule: Schedule
    handler: Handler
    is_async: bool
    jitter_ms: int
    max_late_ms: int
    timeout_ms: int | None
    history_size: int
    history_ttl_ms: int | None
    overlap: bool
    max_attempts: int
    catch_up_ms: int
    enabled: bool
    explicit: frozenset[str]
    retry: Retry | None = None
    once: bool = False
    """True for a one-off run (``Scheduler.at``): the job has one slot."""
    if_uncertain: str = "skip"
    """``"skip"``: a claim not confirmed durable skips the slot (``claim_not_durable``);
    ``"run"``: the slot runs anyway (docs/durability.md, "Uncertain claims")."""

    @property
    def attempt_budget(self) -> int:
        """Starts of one slot the store allows: ``max_attempts`` plus the error retries (docs/retries.md)."""
        return self.max_attempts + (self.retry.retries if self.retry is not None else 0)

    def limits(self, lease_ms: int | None = None) -> JobLimits:
        """What the backend's ``check_job`` sees (``lease_ms``: the scheduler's lease)."""
        return JobLimits(
            job=self.name,
            period_ms=self.schedule.period_ms,
            jitter_ms=self.jitter_ms,
            max_late_ms=self.max_late_ms,
            history_size=self.history_size,
            history_ttl_ms=self.history_ttl_ms,
            overlap=self.overlap if "overlap" in self.explicit else None,
            max_attempts=self.max_attempts if "max_attempts" in self.explicit else None,
            catch_up_ms=self.catch_up_ms if "catch_up" in self.explicit else None,
            lease_ms=lease_ms,
        )


def _duration(options: Mapping[str, Any], key: str, *, allow_none: bool = False) -> int | None:
    """A user value (numbers are seconds), or the default (already in ms)."""
    if key not in options:
        default: int | None = DEFAULTS[key]
        return default
    value = options[key]
    if value is None:
        if allow_none:
            return None
        raise InvalidJobError(f"option {key} cannot be None")
    return to_ms(value, what=key)


def _positive_int(options: Mapping[str, Any], key: str) -> int:
    value = options.get(key, DEFAULTS[key])
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidJobError(f"option {key} must be an integer >= 1, got {value!r}")
    return value


def _bool(options: Mapping[str, Any], key: str) -> bool:
    value = options.get(key, DEFAULTS[key])
    if not isinstance(value, bool):
        raise InvalidJobError(f"option {key} must be True or False, got {value!r}")
    return value


_IF_UNCERTAIN = ("skip", "run")
"""The values of the ``if_uncertain`` option."""


def _if_uncertain(options: Mapping[str, Any], name: str) -> str:
    value = options.get("if_uncertain", DEFAULTS["if_uncertain"])
    if not isinstance(value, str) or value not in _IF_UNCERTAIN:
        raise InvalidJobError(
            f"option if_uncertain of job {name!r} must be 'skip' or 'run', got {value!r}"
        )
    return value


def build_job(
    name: str,
    schedule: Schedule,
    handler: Handler,
    options: Mapping[str, Any],
    *,
    leases: bool,
    once: bool = False,
) -> Job:
    """Validate a job's name, handler and options; raise a coded error at the user's call."""
    validate_name(name)
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise InvalidJobError(
            f"unknown option(s) {', '.join(unknown)} for job {name!r}; known: {', '.join(sorted(DEFAULTS))}"
        )
    if not callable(handler):
        raise InvalidJobError(f"handler of job {name!r} is not callable")
    explicit_lease = sorted(LEASE_OPTIONS & set(options))
    if explicit_lease and not leases:
        raise UnsupportedError(
            f"option(s) {', '.join(explicit_lease)} of job {name!r} need a backend with leases;"
            " this backend has none (use memory, SQL or Redis with strategy=lease)"
        )
    jitter_ms = _duration(options, "jitter")
    max_late_ms = _duration(options, "max_late")
    catch_up_ms = _duration(options, "catch_up")
    assert jitter_ms is not None
    assert max_late_ms is not None
    assert catch_up_ms is not None
    timeout_ms = _duration(options, "timeout", allow_none=True)
    if timeout_ms == 0:
        raise InvalidJobError(f"option timeout of job {name!r} must be positive")
    history_ttl_ms = _duration(options, "history_ttl", allow_none=True)
    retry = options.get("retry")
    if retry is not None and not isinstance(retry, Retry):
        raise InvalidJobError(
            f"option retry of job {name!r} must be an anarchon.Retry or None, got {retry!r}"
        )
    return Job(
        name=name,
        schedule=schedule,
        handler=handler,
        is_async=_is_async(handler),
        jitter_ms=jitter_ms,
        max_late_ms=max_late_ms,
        timeout_ms=timeout_ms,
        history_size=_positive_int(options, "history_size"),
        history_ttl_ms=history_ttl_ms,
        overlap=_bool(options, "overlap"),
        max_attempts=_positive_int(options, "max_attempts"),
        catch_up_ms=catch_up_ms,
        enabled=_bool(options, "enabled"),
        explicit=frozenset(options),
        retry=retry,
        once=once,
        if_uncertain=_if_uncertain(options, name),
    )


def _is_async(handler: Callable[..., Any]) -> bool:
    target = handler
    while hasattr(target, "func"):  # functools.partial
        target = target.func
    return inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
        getattr(target, "__call__", None)  # noqa: B004
    )
