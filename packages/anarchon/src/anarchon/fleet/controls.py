"""Fleet-wide pause, resume and skip (docs/fleet.md, "Pause, resume and skip").

The controls live in the store (``Backend.set_control``/``controls``); every
instance reads them once per wake-up (cached briefly) and the winner of a
claimed slot records it as ``skipped`` with reason ``paused`` or
``skip_next`` instead of running the handler. The scheduler's ``pause()``,
``resume()`` and ``skip_next()`` and the CLI's ``anarchon pause|resume|skip``
call these functions.
"""

from __future__ import annotations

import dataclasses

from anarchon.backend.base import Backend
from anarchon.errors import InvalidConfigError
from anarchon.fleet.status import store_now_ms
from anarchon.fleet.types import JobControl
from anarchon.schedules import Schedule

__all__ = [
    "SKIP_CACHE_MS",
    "SKIP_LEAD_MS",
    "SKIP_REASONS",
    "first_skippable",
    "pause_job",
    "resume_job",
    "skip_from",
    "skip_job",
    "skip_reason",
    "skip_slots",
]

SKIP_REASONS = ("paused", "skip_next")
"""The reasons a slot skipped by a control is recorded with."""


async def _current(backend: Backend, job: str) -> JobControl:
    return (await backend.controls()).get(job) or JobControl(job)


async def pause_job(backend: Backend, job: str, by: str | None = None) -> JobControl:
    """Pause ``job`` on every instance; return the stored control.

    ``paused_at`` becomes store time now (a job already paused keeps the
    moment it was first paused).
    """
    current = await _current(backend, job)
    paused_at = current.paused_at
    if not current.paused or paused_at is None:
        paused_at = await store_now_ms(backend)
    control = dataclasses.replace(current, paused=True, paused_at=paused_at, updated_by=by)
    await backend.set_control(control)
    return control


async def resume_job(backend: Backend, job: str, by: str | None = None) -> JobControl:
    """Resume ``job`` on every instance (a pending ``skip_next`` stays); return the control.

    Resuming a paused job sets ``resumed_at`` to store time now and keeps
    ``paused_at``: instances run the newest slot missed in between once, at
    slot ``resumed_at``, if the job's ``catch_up`` allows it
    (docs/fleet.md, "Pause, resume and skip"). Resuming a job that is
    not paused changes nothing but ``updated_by``.
    """
    current = await _current(backend, job)
    resumed_at = current.resumed_at
    if current.paused:
        resumed_at = await store_now_ms(backend)
    control = dataclasses.replace(current, paused=False, resumed_at=resumed_at, updated_by=by)
    await backend.set_control(control)
    return control


SKIP_LEAD_MS = 2_000
"""The claim lead assumed when the skipping side does not know it (the lease default)."""
SKIP_CACHE_MS = 1_000
"""The control cache assumed when the skipping side does not know it (the default)."""


def first_skippable(
    schedule: Schedule, now: int, lead_ms: int = SKIP_LEAD_MS, cache_ms: int = SKIP_CACHE_MS
) -> int | None:
    """The first slot after store time ``now`` that a skip stored now surely skips.

    A slot is claimed up to ``lead_ms`` before its time (at most a quarter of
    the gap to the next slot) with controls read up to ``cache_ms`` before
    that: an earlier slot may already be claimed under the old controls.
    """
    slot = schedule.next_after(now)
    for _ in range(10_000):
        if slot is None:
            return None
        following = schedule.next_after(slot)
        gap = following - slot if following is not None else lead_ms * 4
        if slot - min(lead_ms, gap // 4) - cache_ms > now:
            return slot
        slot = following
    return None


async def skip_slots(
    backend: Backend,
    job: str,
    schedule: Schedule,
    count: int = 1,
    by: str | None = None,
) -> tuple[JobControl, int]:
    """:func:`skip_job`, also returning the first slot it skips.

    The skipped slots are the ``count`` slots from :func:`first_skippable`
    of the control's stored ``updated_at`` (every instance computes the
    same): slots before it may already be claimed, so they run. A write
    that lands a slot later than planned is written again (at most 3 times).
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10_000:
        raise InvalidConfigError(f"count must be an integer from 1 to 10000, got {count!r}")
    current = await _current(backend, job)
    now = await store_now_ms(backend)
    for _ in range(3):
        first = first_skippable(schedule, now, _lead(backend))
        if current.skip_until is not None and first is not None and current.skip_until >= first:
            first = schedule.next_after(current.skip_until)
        until = first
        for _ in range(count - 1):
            until = None if until is None else schedule.next_after(until)
        if first is None or until is None:
            raise InvalidConfigError(f"job {job!r} has no slot left to skip")
        control = dataclasses.replace(current, skip_until=until, updated_by=by)
        await backend.set_control(control)
        stored = (await backend.controls()).get(job) or control
        if stored.updated_at is None or skip_from(stored, schedule, _lead(backend)) <= first:
            return stored, first
        now = stored.updated_at
    raise InvalidConfigError(f"job {job!r}: the skip kept landing after its first slot")


def _lead(backend: Backend) -> int:
    return SKIP_LEAD_MS if backend.runs is not None else 0


def skip_from(control: JobControl, schedule: Schedule, lead_ms: int = SKIP_LEAD_MS) -> int:
    """The first slot ``control``'s skip applies to: :func:`first_skippable` after ``updated_at``."""
    if control.updated_at is None:
        return -(2**62)
    first = first_skippable(schedule, control.updated_at, lead_ms)
    return 2**62 if first is None else first


async def skip_job(
    backend: Backend, job: str, schedule: Schedule, count: int = 1, by: str | None = None
) -> JobControl:
    """Skip the next ``count`` slots of ``job`` (after those already skipped); return the control.

    ``skip_until`` becomes the ``count``-th slot from the first one a skip
    stored now surely skips (:func:`first_skippable`: a slot claimed ahead
    under the old controls runs), or after the current ``skip_until`` if
    that is later.
    """
    control, _ = await skip_slots(backend, job, schedule, count, by)
    return control


def skip_reason(
    control: JobControl | None,
    slot: int,
    schedule: Schedule | None = None,
    lead_ms: int = SKIP_LEAD_MS,
) -> str | None:
    """Why ``slot`` is skipped under ``control`` (``paused``, ``skip_next``), or None to run it.

    With the job's ``schedule``, ``skip_next`` applies from :func:`skip_from`
    (the first slot no instance can have claimed when the skip was
    stored); without it, to every slot after ``updated_at``.
    """
    if control is None:
        return None
    if control.paused:
        return "paused"
    until, after = control.skip_until, control.updated_at
    if until is None or slot > until:
        return None
    if after is None:
        return "skip_next"
    if schedule is not None:
        return "skip_next" if slot >= skip_from(control, schedule, lead_ms) else None
    return "skip_next" if slot > after else None
