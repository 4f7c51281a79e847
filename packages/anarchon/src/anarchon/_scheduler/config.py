"""The checks of ``Scheduler(...)``'s options: durations in ms, and the lease timings."""

from __future__ import annotations

from typing import Any

from anarchon._scheduler.candidates import MAX_CANDIDATES
from anarchon._scheduler.wakeup import DEFAULT_CLAIM_AHEAD_MS, MAX_CLAIM_AHEAD_MS
from anarchon.durations import Duration, to_ms
from anarchon.errors import InvalidConfigError, InvalidJobError, UnsupportedError

__all__ = ["UNSET", "candidate_count", "claim_ahead_ms", "config_ms", "lease_timings"]

UNSET: Any = object()
"""The default of an option whose default depends on the backend (``lease``, ...)."""


def config_ms(value: Duration, what: str, *, allow_zero: bool = False) -> int:
    """``value`` in ms; a bad one raises ``InvalidConfigError`` (a scheduler option, not a job's)."""
    try:
        return to_ms(value, what=what, allow_zero=allow_zero)
    except InvalidJobError as error:
        raise InvalidConfigError(error.message) from None


def lease_timings(
    backend_name: str, leases: bool, lease: Duration, heartbeat: Duration, claim_ahead: Duration
) -> tuple[int, int]:
    """``(lease_ms, heartbeat_ms)`` from the options, defaults for :data:`UNSET`.

    A backend without leases refuses any of them given.
    """
    if not leases:
        options = (("lease", lease), ("heartbeat", heartbeat), ("claim_ahead", claim_ahead))
        given = [name for name, value in options if value is not UNSET]
        if given:
            raise UnsupportedError(
                f"scheduler option(s) {', '.join(given)} need a backend with leases;"
                f" backend {backend_name!r} has none"
            )
    lease_ms = 30_000 if lease is UNSET else config_ms(lease, "lease")
    heartbeat_ms = lease_ms // 3 if heartbeat is UNSET else config_ms(heartbeat, "heartbeat")
    if heartbeat_ms >= lease_ms:
        raise InvalidConfigError(
            f"heartbeat ({heartbeat_ms} ms) must be shorter than lease ({lease_ms} ms)"
        )
    return lease_ms, heartbeat_ms


def claim_ahead_ms(leases: bool, claim_ahead: Duration) -> int:
    """How long before its fire time a slot is claimed: the option, else the default."""
    ahead_ms = (
        (DEFAULT_CLAIM_AHEAD_MS if leases else 0)
        if claim_ahead is UNSET
        else config_ms(claim_ahead, "claim_ahead", allow_zero=True)
    )
    if ahead_ms > MAX_CLAIM_AHEAD_MS:
        raise InvalidConfigError(
            f"claim_ahead must be at most {MAX_CLAIM_AHEAD_MS} ms, got {ahead_ms} ms"
        )
    return ahead_ms


def candidate_count(candidates: object) -> int | None:
    """``Scheduler(candidates=...)``: None (every instance claims) or ``1 .. 1024``."""
    if candidates is None:
        return None
    if (
        isinstance(candidates, bool)
        or not isinstance(candidates, int)
        or not 1 <= candidates <= MAX_CANDIDATES
    ):
        raise InvalidConfigError(
            f"candidates must be None (every instance claims every job) or an integer"
            f" from 1 to {MAX_CANDIDATES}, got {candidates!r}"
        )
    return candidates
