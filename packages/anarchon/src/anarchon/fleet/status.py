"""The fleet view (docs/fleet.md, "anarchon status"): every job the fleet declares.

:func:`fleet_status` reads the registry, the fleet-wide controls, the history
(``history_many``, one batch) and the leases of a backend and returns one
:class:`JobStatus` per declared job; ``anarchon status`` shows it.
:func:`job_status` builds one from what was read, so the status page can read
one page of jobs at a time.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from anarchon.backend.base import Backend
from anarchon.backend.batching import per_item
from anarchon.errors import AnarchonError, UnknownJobError
from anarchon.fleet.fingerprints import parse_schedule
from anarchon.fleet.types import Declaration, JobControl
from anarchon.types import RunRecord

__all__ = [
    "InstanceDeclaration",
    "JobStatus",
    "LastRun",
    "fleet_status",
    "job_status",
    "unknown_jobs_error",
]


@dataclass(frozen=True)
class InstanceDeclaration:
    """One instance that declares the job, with what it declares."""

    instance_id: str
    fingerprint: str
    schedule: str
    seen_at: int


@dataclass(frozen=True)
class LastRun:
    """The newest attempt of the job in history.

    ``status`` is the record's, except ``"claimed"`` for a run claimed ahead
    of its slot whose handler has not started (store time before the slot).
    """

    slot: int
    status: str
    instance_id: str
    attempt: int
    reason: str | None = None
    finished_at: int | None = None
    duration_ms: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class JobStatus:
    """What the fleet knows of one declared job."""

    job: str
    schedule: str
    """The schedule most instances declare (``"every 5000ms"``, ``"cron 0 3 * * * UTC"``)."""
    zone: str | None
    """The cron zone, or None for an interval."""
    next_slot: int | None
    """The next slot after store time (ms), by that schedule."""
    last_run: LastRun | None
    live_leases: int
    """Runs whose lease is live now (0 on backends without leases)."""
    instances: list[InstanceDeclaration] = field(default_factory=list)
    paused: bool = False
    skip_until: int | None = None
    drift: dict[str, int] = field(default_factory=dict)
    """Fingerprint -> number of instances, when instances declare different schedules."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return asdict(self)


def unknown_jobs_error(unknown: Sequence[str], known: Sequence[str]) -> UnknownJobError:
    """The one-line error for job names the fleet does not declare."""
    names = ", ".join(sorted(known)) or "(none)"
    return UnknownJobError(
        f"unknown job(s) {', '.join(repr(n) for n in unknown)}; the fleet declares: {names}"
    )


async def store_now_ms(backend: Backend) -> int:
    """The store's clock (the lease store's, else the backend's, else the local one)."""
    if backend.runs is not None:
        return await backend.runs.now_ms()
    now = await backend.now_ms()
    return now if now is not None else time.time_ns() // 1_000_000


async def fleet_status(backend: Backend, jobs: Sequence[str] | None = None) -> list[JobStatus]:
    """The status of every declared job (or of ``jobs``), sorted by name.

    ``backend`` must be initialised. A name in ``jobs`` that no instance
    declares raises :class:`~anarchon.errors.UnknownJobError` listing the
    declared ones.
    """
    declarations, controls, now = await asyncio.gather(
        backend.declarations(), backend.controls(), store_now_ms(backend)
    )
    by_job: dict[str, list[Declaration]] = {}
    for declaration in declarations:
        by_job.setdefault(declaration.job, []).append(declaration)
    if jobs is None:
        names = sorted(by_job)
    else:
        unknown = [name for name in jobs if name not in by_job]
        if unknown:
            raise unknown_jobs_error(unknown, list(by_job))
        names = sorted(set(jobs))
    newest = await backend.history_many(names, 1) if names else {}
    live = await per_item(lambda name: _live_leases(backend, name), names, limit=16)
    return [
        job_status(name, by_job[name], controls.get(name), now, _first(newest.get(name)), leases)
        for name, leases in zip(names, live, strict=True)
    ]


def _first(records: list[RunRecord] | None) -> RunRecord | None:
    return records[0] if records else None


def job_status(
    name: str,
    declared: Sequence[Declaration],
    control: JobControl | None,
    now: int,
    newest: RunRecord | None,
    live_leases: int,
) -> JobStatus:
    """The status of job ``name`` from what was read of the store (no store call).

    ``declared`` are its live declarations (empty: a job no instance declares,
    shown from history alone, without schedule), ``control`` its fleet-wide
    control, ``now`` the store time, ``newest`` its newest history record and
    ``live_leases`` how many of its leases are live.
    """
    counts = Counter(d.fingerprint for d in declared)
    schedule_text = ""
    next_slot: int | None = None
    zone: str | None = None
    if counts:
        main_print = max(counts, key=lambda f: (counts[f], f))
        schedule_text = next(d.schedule for d in declared if d.fingerprint == main_print)
        try:
            schedule = parse_schedule(schedule_text)
        except AnarchonError:
            schedule = None
        if schedule is not None:
            next_slot = schedule.next_after(now)
            zone = getattr(schedule, "tz", None)
    instances = sorted(
        (
            InstanceDeclaration(d.instance_id, d.fingerprint, d.schedule, d.seen_at)
            for d in declared
        ),
        key=lambda i: i.instance_id,
    )
    return JobStatus(
        job=name,
        schedule=schedule_text,
        zone=zone,
        next_slot=next_slot,
        last_run=_last(newest, now) if newest is not None else None,
        live_leases=live_leases,
        instances=instances,
        paused=control.paused if control is not None else False,
        skip_until=control.skip_until if control is not None else None,
        drift=dict(sorted(counts.items())) if len(counts) > 1 else {},
    )


async def _live_leases(backend: Backend, name: str) -> int:
    if backend.runs is None:
        return 0
    return sum(1 for run in await backend.runs.active(name) if run.live)


def _last(record: RunRecord, now: int) -> LastRun:
    # A run claimed ahead of its slot has not started its handler yet.
    status = "claimed" if record.status == "running" and record.slot > now else record.status
    return LastRun(
        slot=record.slot,
        status=status,
        instance_id=record.instance_id,
        attempt=record.attempt,
        reason=record.reason,
        finished_at=record.finished_at,
        duration_ms=record.duration_ms,
        error=record.error,
    )
