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

__all__ = ["SKIP_REASONS", "pause_job", "resume_job", "skip_job", "skip_reason"]

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


async def skip_job(
    backend: Backend, job: str, schedule: Schedule, count: int = 1, by: str | None = None
) -> JobControl:
    """Skip the next ``count`` slots of ``job`` (after those already skipped); return the control.

    ``skip_until`` becomes the ``count``-th slot of ``schedule`` after store
    time now, or after the current ``skip_until`` if that is later.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 10_000:
        raise InvalidConfigError(f"count must be an integer from 1 to 10000, got {count!r}")
    current = await _current(backend, job)
    after = await store_now_ms(backend)
    if current.skip_until is not None and current.skip_until > after:
        after = current.skip_until
    until: int | None = None
    for _ in range(count):
        until = schedule.next_after(after)
        if until is None:
            break
        after = until
    if until is None:
        raise InvalidConfigError(f"job {job!r} has no slot left to skip")
    control = dataclasses.replace(current, skip_until=until, updated_by=by)
    await backend.set_control(control)
    return control


def skip_reason(control: JobControl | None, slot: int) -> str | None:
    """Why ``slot`` is skipped under ``control`` (``paused``, ``skip_next``), or None to run it."""
    if control is None:
        return None
    if control.paused:
        return "paused"
    # Only slots after the control was stored: a slot that fell due just before
    # the skip but was not claimed yet (a late wake-up) still runs.
    until, after = control.skip_until, control.updated_at
    if until is not None and slot <= until and (after is None or slot > after):
        return "skip_next"
    return None
