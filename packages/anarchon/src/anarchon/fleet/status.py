"""The fleet view (docs/fleet.md, "anarchon status"): every job the fleet declares.

:func:`fleet_status` reads the registry, the fleet-wide controls, the live
members, the history (``history_many``, one batch) and the leases of a
backend and returns one :class:`JobStatus` per declared job, with its
candidates; ``anarchon status`` shows it. :func:`job_status` builds one from
what was read, so the status page can read one page of jobs at a time.
:func:`fleet_members` returns the live members (:class:`MemberStatus`),
``anarchon members`` shows them; :func:`member_statuses` builds them from
what was read.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from anarchon.backend.base import Backend
from anarchon.backend.batching import per_item
from anarchon.errors import AnarchonError, UnknownJobError, UnsupportedError
from anarchon.fleet.fingerprints import parse_schedule
from anarchon.fleet.roster import candidates_by_job, roster_k, roster_label
from anarchon.fleet.types import Declaration, JobControl, Member
from anarchon.types import RunRecord

__all__ = [
    "InstanceDeclaration",
    "JobStatus",
    "LastRun",
    "MemberStatus",
    "declaring_instances",
    "fleet_members",
    "fleet_status",
    "job_status",
    "live_members",
    "member_statuses",
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
    candidates: list[str] = field(default_factory=list)
    """The instances that claim its slots, in rank order within each roster group
    (docs/scaling.md, "Candidates"); empty when the backend keeps no membership
    records or the fleet runs with ``candidates=None``."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return asdict(self)


@dataclass(frozen=True)
class MemberStatus:
    """One live member of the fleet, for display (docs/fleet.md, "Membership")."""

    instance_id: str
    k: int | None
    """The candidates count its roster carries (None: a roster anarchon did not write)."""
    group: str
    """A short label of its roster (``k2-1a2b3c4d``): members with the same one rank together."""
    seen_at: int
    """Store time (ms) of its last refresh."""
    expires_at: int
    """Store time (ms) after which its record no longer counts."""
    candidate_of: int | None = None
    """How many declared jobs it is a candidate of (None without a fleet registry)."""

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
    declarations, controls, now, members = await asyncio.gather(
        backend.declarations(), backend.controls(), store_now_ms(backend), live_members(backend)
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
    chosen = candidates_by_job(
        members or (), {name: (d.instance_id for d in by_job[name]) for name in names}
    )
    return [
        job_status(
            name,
            by_job[name],
            controls.get(name),
            now,
            _first(newest.get(name)),
            leases,
            candidates=chosen[name],
        )
        for name, leases in zip(names, live, strict=True)
    ]


async def live_members(backend: Backend) -> list[Member] | None:
    """``backend.members()``, or None when the backend keeps no membership records."""
    try:
        return await backend.members()
    except UnsupportedError:
        return None


def declaring_instances(declarations: Iterable[Declaration]) -> dict[str, list[str]]:
    """Job -> the instances declaring it, from the registry's entries."""
    found: dict[str, list[str]] = {}
    for declaration in declarations:
        found.setdefault(declaration.job, []).append(declaration.instance_id)
    return found


async def fleet_members(backend: Backend) -> list[MemberStatus]:
    """The live members of the fleet, sorted by instance id, with how many jobs each is a
    candidate of.

    Two store calls, whatever the size of the fleet: the members and the
    registry. ``backend`` must be initialised; a backend that keeps no
    membership records raises :class:`~anarchon.errors.UnsupportedError`.
    """
    # Both answered before either error is raised: no read is left running unawaited.
    members, declarations = await asyncio.gather(
        backend.members(), _declarations(backend), return_exceptions=True
    )
    if isinstance(members, BaseException):
        raise members
    if isinstance(declarations, BaseException):
        raise declarations
    if declarations is None:
        return member_statuses(members, None)
    return member_statuses(members, candidates_by_job(members, declaring_instances(declarations)))


def member_statuses(
    members: Sequence[Member], candidates: Mapping[str, Sequence[str]] | None
) -> list[MemberStatus]:
    """The members for display (no store call): ``candidates`` maps every declared job
    to its candidates (None: unknown, so ``candidate_of`` is None)."""
    counts: Counter[str] = Counter()
    for chosen in (candidates or {}).values():
        counts.update(chosen)
    return [
        MemberStatus(
            instance_id=m.instance_id,
            k=roster_k(m.roster),
            group=roster_label(m.roster),
            seen_at=m.seen_at,
            expires_at=m.expires_at,
            candidate_of=None if candidates is None else counts[m.instance_id],
        )
        for m in sorted(members, key=lambda m: m.instance_id)
    ]


async def _declarations(backend: Backend) -> list[Declaration] | None:
    try:
        return await backend.declarations()
    except UnsupportedError:
        return None


def _first(records: list[RunRecord] | None) -> RunRecord | None:
    return records[0] if records else None


def job_status(
    name: str,
    declared: Sequence[Declaration],
    control: JobControl | None,
    now: int,
    newest: RunRecord | None,
    live_leases: int,
    *,
    candidates: Sequence[str] = (),
) -> JobStatus:
    """The status of job ``name`` from what was read of the store (no store call).

    ``declared`` are its live declarations (empty: a job no instance declares,
    shown from history alone, without schedule), ``control`` its fleet-wide
    control, ``now`` the store time, ``newest`` its newest history record,
    ``live_leases`` how many of its leases are live and ``candidates`` the
    instances that claim it (:func:`anarchon.fleet.roster.candidates_of`).
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
        candidates=list(candidates),
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
