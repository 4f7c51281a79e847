"""What the fleet registry and fleet-wide controls store (docs/fleet.md, "Fleet registry").

Each instance records what it declares (:class:`Declaration`), refreshed every
few minutes and expiring when it stops; operators pause, resume and skip jobs
for the whole fleet (:class:`JobControl`). Backends store both through the
optional members ``Backend.declare``, ``Backend.declarations``,
``Backend.set_control`` and ``Backend.controls``. The live members of the
fleet (:class:`Member`, docs/fleet.md, "Membership") go through
``Backend.refresh_member``, ``Backend.leave_member`` and ``Backend.members``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Declaration", "JobControl", "Member"]


@dataclass(frozen=True)
class Declaration:
    """One instance's declaration of one job, as the registry holds it."""

    job: str
    instance_id: str
    fingerprint: str
    """A stable hash of the schedule, zone and options (equal on every instance that agrees)."""
    schedule: str
    """The schedule as the user wrote it, e.g. ``"every 5s"`` or ``"cron 0 3 * * * Europe/Athens"``."""
    seen_at: int
    """Store time (ms) of the instance's last refresh."""
    expires_at: int
    """Store time (ms) after which the entry no longer counts."""


@dataclass(frozen=True)
class JobControl:
    """The fleet-wide state an operator set for one job."""

    job: str
    paused: bool = False
    skip_until: int | None = None
    """Slots after ``updated_at`` and at or before this (ms) are skipped (``skip_next`` sets
    it to the ``count``-th next slot, computed from the job's schedule)."""
    updated_at: int | None = None
    updated_by: str | None = None
    paused_at: int | None = None
    """Store time (ms) at which the job was last paused (kept after ``resume``)."""
    resumed_at: int | None = None
    """Store time (ms) of the last ``resume`` of a paused job: the slot of its catch-up run
    (docs/fleet.md, "Pause, resume and skip")."""


@dataclass(frozen=True)
class Member:
    """One live instance of the fleet, as the membership record holds it (docs/fleet.md, "Membership")."""

    instance_id: str
    roster: str
    """An opaque digest the instance computes of the ``(job, fingerprint)`` set it declares
    (at most :data:`anarchon.backend.membership.MAX_ROSTER_CHARS` characters); stored as given."""
    seen_at: int
    """Store time (ms) of the instance's last refresh."""
    expires_at: int
    """Store time (ms) after which the record no longer counts."""
