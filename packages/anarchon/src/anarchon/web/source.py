"""What the status page reads and writes: the :class:`StatusSource` protocol.

The page depends only on this protocol; :class:`~anarchon.web.BackendSource`
implements it on a :class:`~anarchon.Backend`. The ``to_json`` helpers turn
its answers into the plain values the JSON endpoints serve.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, runtime_checkable

from anarchon.fleet.status import JobStatus
from anarchon.fleet.types import JobControl
from anarchon.types import ActiveRun, RunRecord

__all__ = ["StatusSource", "control_json", "lease_json", "run_json", "status_json"]


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


def control_json(control: JobControl) -> dict[str, Any]:
    """A fleet-wide control as JSON values."""
    return dataclasses.asdict(control)
