"""``Scheduler.run_due()``: the slots due by the clock, taken from the timetable at once (tests).

A test drives a scheduler with :class:`anarchon.testing.FakeClock` instead of
starting its background loops: each ``await scheduler.run_due()`` claims and
runs every slot at or before the clock's time, and returns when they ended
(docs/testing-your-jobs.md). Unlike the wake-up loop it does not wait for
the jitter: a slot is due at its scheduled time, so advancing the clock to
03:00 runs the 03:00 slot. ``max_late`` still applies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anarchon._scheduler.run_state import Run
from anarchon.backend.base import Backend
from anarchon.jobs import Job
from anarchon.types import RunRecord

__all__ = ["due_records", "take_due"]

_LIMIT = 100_000


def take_due(
    timetable: Any,
    jobs: Mapping[str, Job],
    now_ms: int,
    new_run: Callable[[Job, int, int], Run],
) -> list[Run]:
    """Take every slot ``<= now_ms`` out of ``timetable`` as runs (late ones are dropped).

    Slots whose fire time is later only because of jitter are included; a
    slot after ``now_ms`` that the jitter look-ahead took out is put back.
    """
    lookahead = max((job.jitter_ms for job in jobs.values()), default=0)
    runs: list[Run] = []
    put_back: dict[str, int] = {}
    for name, slot, _fire_at in timetable.due(now_ms + lookahead, _LIMIT):
        job = jobs.get(name)
        if job is None:
            continue
        if slot > now_ms:
            put_back.setdefault(name, slot)
            continue
        deadline = slot + job.max_late_ms
        if now_ms > deadline:
            continue
        runs.append(new_run(job, slot, deadline))
    for name, slot in put_back.items():
        job = jobs[name]
        timetable.add(name, job.schedule._compiled, job.jitter_ms, slot - 1, 0)
    return runs


async def due_records(
    backend: Backend, jobs: Mapping[str, Job], runs: Sequence[Run]
) -> list[RunRecord]:
    """The history records of ``runs``' slots (every attempt, no manual runs), oldest first."""
    wanted: dict[str, set[int]] = {}
    for run in runs:
        wanted.setdefault(run.job.name, set()).add(run.slot)
    records: list[RunRecord] = []
    for name, slots in wanted.items():
        known = jobs.get(name)
        budget = known.attempt_budget if known is not None else 1
        found = await backend.history(name, len(slots) * (budget + 1) + 10)
        records.extend(r for r in found if r.slot in slots and not r.manual)
    records.sort(key=lambda r: (r.slot, r.attempt, r.job))
    return records
