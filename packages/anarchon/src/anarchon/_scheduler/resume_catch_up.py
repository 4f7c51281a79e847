"""The catch-up run after ``resume`` (docs/fleet.md, "Pause, resume and skip").

A job declared with ``catch_up`` (more than ``max_late``, lease backends
only) runs the newest slot ``s`` it missed while paused once after
``resume``: ``paused_at <= s < resumed_at`` and ``resumed_at - s <=
catch_up``, both times from the stored control. The run's claim identity is
the slot ``resumed_at``, the same number on every instance (it is read from
the store), so the claim tree elects one instance and every later claim
answers ``done``: no flood, no double run, and no change to the stores.

:class:`ResumeCatchUp` sees every read of the controls (``FleetSync``) and
submits that run once per ``resumed_at``, unless the job's history shows that
the paused slot ran after all; an instance started after the resume does the
same while the run's deadline lasts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence

from anarchon._scheduler.run_state import Run
from anarchon.errors import AnarchonError
from anarchon.events import job_zone, log_extra, slot_iso
from anarchon.fleet.types import JobControl
from anarchon.jobs import Job
from anarchon.types import RunRecord

__all__ = ["ResumeCatchUp", "log_catch_up", "resume_catch_up"]


def resume_catch_up(job: Job, control: JobControl) -> tuple[int, int] | None:
    """``(paused slot, deadline)`` of the catch-up run ``control``'s last resume calls for.

    None when there is none: the job is paused (again), was never resumed
    after a recorded pause, has no ``catch_up`` beyond ``max_late``, or no
    slot fell due while paused within ``catch_up`` of the resume. The
    deadline (store ms) is ``max(s + catch_up, resumed_at + max_late)``: the
    catch-up window of the paused slot, but never shorter than an ordinary
    slot's ``max_late`` after the resume.
    """
    paused_at, resumed_at = control.paused_at, control.resumed_at
    if control.paused or paused_at is None or resumed_at is None or resumed_at < paused_at:
        return None
    catch_up = job.catch_up_ms
    if catch_up <= job.max_late_ms:
        return None
    slot = job.schedule._compiled.latest_between(
        max(paused_at, resumed_at - catch_up), resumed_at - 1
    )
    if slot is None:
        return None
    return slot, max(slot + catch_up, resumed_at + job.max_late_ms)


def log_catch_up(log: logging.Logger, run: Run, instance_id: str) -> None:
    """The INFO line of a won catch-up run: which paused slot it stands for."""
    job, paused = run.job, run.catch_up_of
    zone = job_zone(job)
    log.info(
        "anarchon: %s slot %s runs as the catch-up of paused slot %s",
        job.name,
        slot_iso(run.slot, zone),
        slot_iso(paused, zone) if paused is not None else None,
        extra=log_extra(job.name, run.slot, run.attempt, instance_id, zone),
    )


_HISTORY_LIMIT = 100
"""Records read to find the paused slot's (the slot is a few periods back when it is read)."""


class ResumeCatchUp:
    """Submits the catch-up run of each resume of a declared job, once per ``resumed_at``.

    Before claiming, a history read checks that the paused slot was recorded
    ``skipped``/``paused`` (or never claimed within its ``max_late``): if it
    ran after all (an instance whose cached controls were stale ran it just
    after the pause or just before the resume), nothing is caught up. A slot
    whose record is not final yet is looked at again on the next read.
    """

    def __init__(
        self,
        *,
        jobs: Mapping[str, Job],
        scheduled: Callable[[str], bool],
        now_ms: Callable[[], int],
        history: Callable[[str, int], Awaitable[list[RunRecord]]],
        new_run: Callable[[Job, int, int], Run],
        submit: Callable[[Sequence[Run]], None],
        log: logging.Logger,
    ) -> None:
        self.jobs = jobs
        self.scheduled = scheduled
        """True once a job is prepared and in the timetable (its claims may be sent)."""
        self.now_ms = now_ms
        self.history = history
        self.new_run = new_run
        self.submit = submit
        self.log = log
        self.watching = False
        """True while a declared job that would catch up is paused, or its paused slot's
        record is not final yet: the controls are polled (see ``WakeUpLoop.watch``)."""
        self._acted: dict[str, int] = {}
        """The ``resumed_at`` already acted on, by job."""

    async def check(self, controls: Mapping[str, JobControl]) -> None:
        """Look at freshly read controls: submit the catch-up of each resume not acted on yet."""
        watching = False
        runs: list[Run] = []
        for name, control in controls.items():
            job = self.jobs.get(name)
            if job is None or job.catch_up_ms <= job.max_late_ms:
                continue
            if control.paused:
                watching = True
                continue
            resumed_at = control.resumed_at
            if resumed_at is None or self._acted.get(name) == resumed_at:
                continue
            if not self.scheduled(name):  # not prepared yet: looked at again on a later read
                continue
            try:
                found = resume_catch_up(job, control)
            except AnarchonError as error:  # stored times out of any schedule's range
                self.log.warning("anarchon: %s: no catch-up for resume: %s", name, error)
                found = None
            if found is None or self.now_ms() > found[1]:
                self._acted[name] = resumed_at
                continue
            paused_slot, deadline = found
            missed = await self._missed(name, paused_slot, paused_slot + job.max_late_ms)
            if missed is None:  # not final yet, or the read failed: on the next read
                watching = True
                continue
            self._acted[name] = resumed_at
            if not missed:
                self.log.debug(
                    "anarchon: %s: paused slot %s ran after all, no catch-up", name, paused_slot
                )
                continue
            run = self.new_run(job, resumed_at, deadline)
            run.catch_up_of = paused_slot
            runs.append(run)
        self.watching = watching
        if runs:
            self.submit(runs)

    async def _missed(self, job: str, slot: int, claimable_until: int) -> bool | None:
        """Whether ``slot`` was skipped as paused (or never claimed); None: not known yet.

        A slot without a record may still be claimed as usual until
        ``claimable_until`` (its ``max_late``): it is not known yet until then.
        A slot older than every record read is not caught up (an instance
        started long after the resume cannot tell whether it ran).
        """
        try:
            records = await self.history(job, _HISTORY_LIMIT)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.log.debug(
                "anarchon: %s: reading the history for the catch-up failed: %s", job, error
            )
            return None
        mine = [r for r in records if r.slot == slot and not r.manual]
        if not mine:
            if records and min(r.slot for r in records) > slot:
                return False  # too far back to tell: the instances running then decided
            if self.now_ms() <= claimable_until:
                return None  # not claimed yet: it may still run as usual
            return True
        if any(r.status == "running" for r in mine):
            return None  # its winner is still recording it (a skip is written after the claim)
        return all(r.status == "skipped" and r.reason == "paused" for r in mine)
