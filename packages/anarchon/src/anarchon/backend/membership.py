"""What every backend checks and computes for membership (docs/fleet.md, "Membership").

The optional members ``Backend.refresh_member``, ``Backend.leave_member`` and
``Backend.members`` keep one record per live instance of the fleet. Each
backend checks its input with :func:`check_refresh` and
:func:`check_member_id` before it touches the store, so bad input gets the
same coded error (``ANARCHON_INVALID_CONFIG``) on every store, and answers
with :func:`live_members`: the unexpired records, sorted by instance id.
"""

from __future__ import annotations

from collections.abc import Iterable

from anarchon.errors import InvalidConfigError
from anarchon.fleet.types import Member

__all__ = [
    "MAX_MEMBER_TTL_MS",
    "MAX_ROSTER_CHARS",
    "check_member_id",
    "check_refresh",
    "live_members",
]

MAX_ROSTER_CHARS = 128
"""The longest roster a backend stores (characters)."""

MAX_MEMBER_TTL_MS = 30 * 24 * 3600 * 1000
"""The longest record TTL (30 days): store time plus it stays exact in every store's integers."""


def _check_text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise InvalidConfigError(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidConfigError(f"{what} must not contain a NUL character: {value[:80]!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidConfigError(
            f"{what} is not valid text (a lone surrogate): {value[:80]!r}"
        ) from None
    return value


def check_member_id(instance_id: object) -> str:
    """``instance_id`` if it is a non-empty string a store can hold, else ``InvalidConfigError``."""
    _check_text("instance_id", instance_id)
    assert isinstance(instance_id, str)
    if not instance_id:
        raise InvalidConfigError("instance_id must be a non-empty string")
    return instance_id


def check_refresh(instance_id: object, roster: object, ttl_ms: object) -> None:
    """Refuse a bad ``refresh_member`` call with ``InvalidConfigError`` (nothing is written).

    ``instance_id`` non-empty text; ``roster`` text of at most
    :data:`MAX_ROSTER_CHARS` characters; ``ttl_ms`` an integer in
    ``1..MAX_MEMBER_TTL_MS``.
    """
    check_member_id(instance_id)
    text = _check_text("roster", roster)
    if len(text) > MAX_ROSTER_CHARS:
        raise InvalidConfigError(
            f"roster must be at most {MAX_ROSTER_CHARS} characters, got {len(text)}"
        )
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int):
        raise InvalidConfigError(f"ttl_ms must be an integer (ms), got {ttl_ms!r}")
    if not 0 < ttl_ms <= MAX_MEMBER_TTL_MS:
        raise InvalidConfigError(
            f"ttl_ms must be between 1 and {MAX_MEMBER_TTL_MS} (30 days), got {ttl_ms}"
        )


def live_members(records: Iterable[Member], now: int) -> list[Member]:
    """The records that have not expired at store time ``now``, sorted by instance id."""
    return sorted((m for m in records if m.expires_at > now), key=lambda m: m.instance_id)
