"""What the status page reads and writes: the :class:`StatusSource` protocol.

The page depends only on this protocol; :class:`~anarchon.web.BackendSource`
implements it on a :class:`~anarchon.Backend`. A source may also have
``status_page(offset, limit, history_limit)`` answering a :class:`StatusPage`:
one page of jobs with their runs and leases and the live members, read in a
number of store calls bounded by the page size (``BackendSource`` has it);
:func:`read_page` falls back to ``status()``, the per-job reads and an
optional ``members()`` (a list of :class:`~anarchon.fleet.status.MemberStatus`)
for a source without it. The
``to_json`` helpers turn the answers into the plain values the JSON endpoints
serve.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from anarchon.fleet.status import JobStatus, MemberStatus
from anarchon.fleet.types import JobControl
from anarchon.types import ActiveRun, RunRecord

__all__ = [
    "JobView",
    "StatusPage",
    "StatusSource",
    "control_json",
    "lease_json",
    "member_json",
    "read_page",
    "run_json",
    "status_json",
]


@runtime_checkable
class StatusSource(Protocol):
    """The data of the status page. Every method may raise an :class:`~anarchon.AnarchonError`."""

    async def now_ms(self) -> int:
        """Store time in ms."""
        ...

    async def status(self) -> list[JobStatus]:
        """One entry per job of the fleet, sorted by name."""
        ...

    async def history(self, job: str, limit: int) -> list[RunRecord]:
        """Recent runs of ``job``, newest first; UnknownJobError for a job the fleet lacks."""
        ...

    async def active(self, job: str) -> list[ActiveRun]:
        """The runs of ``job`` that hold a lease (empty on backends without leases)."""
        ...

    async def pause(self, job: str) -> JobControl:
        """Pause ``job`` for the whole fleet; return the stored control."""
        ...

    async def resume(self, job: str) -> JobControl:
        """Resume ``job`` for the whole fleet; return the stored control."""
        ...

    async def close(self) -> None:
        """Release what the source opened."""
        ...


@dataclass(frozen=True)
class JobView:
    """One job of a :class:`StatusPage`: its status, recent runs (newest first) and leases."""

    status: JobStatus
    runs: list[RunRecord]
    leases: list[ActiveRun]


@dataclass(frozen=True)
class StatusPage:
    """Jobs ``offset`` to ``offset + limit`` of the fleet, sorted by name, and how many there are."""

    total: int
    jobs: list[JobView]
    members: list[MemberStatus] | None = None
    """The live members (docs/fleet.md, "Membership"), or None when the store keeps no
    membership records (or the source does not say)."""


async def read_page(
    source: StatusSource, offset: int, limit: int, history_limit: int
) -> StatusPage:
    """One page of jobs of ``source``: its ``status_page`` if it has one, else its plain reads.

    The fallback reads every job's status, then the runs and leases of the
    page's jobs only, and the members from the source's ``members()`` if it
    has one.
    """
    paged = getattr(source, "status_page", None)
    if paged is not None:
        page: StatusPage = await paged(offset, limit, history_limit)
        return page
    everything = await source.status()
    chosen = everything[offset : offset + limit]
    runs = await asyncio.gather(*(source.history(s.job, history_limit) for s in chosen))
    leases = await asyncio.gather(*(source.active(s.job) for s in chosen))
    listed = getattr(source, "members", None)
    members: list[MemberStatus] | None = await listed() if listed is not None else None
    return StatusPage(
        total=len(everything),
        jobs=[JobView(s, list(r), list(a)) for s, r, a in zip(chosen, runs, leases, strict=True)],
        members=members,
    )


def status_json(status: JobStatus) -> dict[str, Any]:
    """A job's status as JSON values."""
    return status.to_dict()


def run_json(record: RunRecord) -> dict[str, Any]:
    """A history record as JSON values (``scheduled_at`` as an ISO string)."""
    values = dataclasses.asdict(record)
    values["scheduled_at"] = record.scheduled_at.isoformat()
    return values


def lease_json(job: str, run: ActiveRun) -> dict[str, Any]:
    """A live or expired lease as JSON values (without its token)."""
    return {
        "job": job,
        "slot": run.slot,
        "attempt": run.attempt,
        "runner": run.runner,
        "lease_expires_at": run.lease_expires_at,
        "live": run.live,
    }


def member_json(member: MemberStatus) -> dict[str, Any]:
    """A live member as JSON values."""
    return member.to_dict()


def control_json(control: JobControl) -> dict[str, Any]:
    """A fleet-wide control as JSON values."""
    return dataclasses.asdict(control)
