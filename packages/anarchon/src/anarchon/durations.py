"""Parsing of durations: ``"500ms"``, ``"10s"``, ``"5m"``, ``"1h30m"``, ``timedelta`` or seconds."""

from __future__ import annotations

import math
import re
from datetime import timedelta
from typing import TypeAlias

from anarchon.errors import InvalidJobError

Duration: TypeAlias = "str | int | float | timedelta"
"""A duration as users write it."""

_MAX_MS = 2**62  # far beyond any real schedule, and safe for the engine's i64 arithmetic
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_ZERO = re.compile(r"0+(?:\.0+)?")
"""A bare zero needs no unit (``"0"`` like ``0``, ``"0s"``); any other bare number does."""


def to_ms(value: Duration, *, what: str = "duration", allow_zero: bool = True) -> int:
    """Convert a duration to integer milliseconds, or raise ``ANARCHON_INVALID_JOB``."""
    if isinstance(value, bool):
        raise InvalidJobError(f"{what} must be a duration, got {value!r}")
    if isinstance(value, timedelta):
        ms = value / timedelta(milliseconds=1)
    elif isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidJobError(f"{what} must be finite, got {value!r}")
        ms = value * 1000
    elif isinstance(value, str):
        ms = _parse_text(value.strip().lower(), what)
    else:
        raise InvalidJobError(
            f"{what} must be a duration such as '10s', got {type(value).__name__}"
        )
    if ms < 0 or (ms == 0 and not allow_zero):
        raise InvalidJobError(
            f"{what} must be {'>= 0' if allow_zero else 'positive'}, got {_shown(value)}"
        )
    if ms > _MAX_MS:
        raise InvalidJobError(f"{what} is too large (at most 2**62 ms), got {_shown(value)}")
    if ms != int(ms):
        raise InvalidJobError(f"{what} must be a whole number of milliseconds, got {value!r}")
    return int(ms)


def _shown(value: Duration) -> str:
    """``repr(value)``, short: a huge int (which ``repr`` may even refuse) by its size."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _parse_text(text: str, what: str) -> float:
    position = 0
    total = 0.0
    if not text:
        raise InvalidJobError(f"{what} is empty; write it like '500ms', '10s', '5m' or '1h30m'")
    if _ZERO.fullmatch(text):
        return 0.0
    while position < len(text):
        match = _PART.match(text, position)
        if match is None:
            raise InvalidJobError(
                f"bad {what} {text!r} at position {position}; write it like '500ms', '10s', '5m' or '1h30m'",
                field=what,
                position=position,
            )
        total += float(match.group(1)) * _UNIT_MS[match.group(2)]
        position = match.end()
    return total
