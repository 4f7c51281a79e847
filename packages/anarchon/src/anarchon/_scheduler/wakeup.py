"""The wake-up loop over the timetable: when slots fall due, hand them all to the claim batcher.

The engine's timetable orders every job's next slot by fire time (slot +
jitter). Each wake-up takes everything due by store time, drops slots past
``max_late``, and submits the rest as one list (the claim batcher cuts it
into chunks). Slots due within a few ms of each other share one wake-up.
The store clock is re-read every :data:`~anarchon._scheduler.store_time.SYNC_INTERVAL_S`.
On lease backends a slot is taken ``lead_ms`` before its fire time
(:data:`DEFAULT_CLAIM_AHEAD_MS`) and its handler waits for the fire time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from anarchon._scheduler.run_state import Run
from anarchon._scheduler.store_retry import StorePolicy
from anarchon._scheduler.store_time import SYNC_INTERVAL_S, StoreTime
from anarchon.events import NO_EVENTS, EventBus, job_zone, slot_iso
from anarchon.jobs import Job

__all__ = [
    "DEFAULT_CLAIM_AHEAD_MS",
    "MAX_CLAIM_AHEAD_MS",
    "MAX_DUE_PER_WAKE",
    "WATCH_INTERVAL_S",
    "WakeUpLoop",
]

DEFAULT_CLAIM_AHEAD_MS = 2_000
"""How long before its fire time a slot is claimed on lease backends, by default.

A wave of thousands of slots is claimed while its time approaches, so the
handlers start at their fire time instead of one claim round after another.
2 s covers PostgreSQL answering a wave of 10,000 claims (docs/scaling.md,
"Claiming ahead"). Each job's lead is at most a quarter of the gap to its
next slot.
"""
MAX_CLAIM_AHEAD_MS = 4_000
"""The longest ``claim_ahead``: below the store's ``early`` allowance (5 s beyond the jitter)."""

MAX_DUE_PER_WAKE = 10_000
"""Slots taken from the timetable per wake-up (more wait for the next turn of the loop)."""
_MIN_SLEEP_S = 0.004


WATCH_INTERVAL_S = 1.0
"""While a job that would catch up is paused, the controls are read this often (at most),
even when no slot is due, so its ``resume`` is seen within about a second."""

_REWIND_MS = 1_000
"""A backward step of the store-time estimate larger than this re-seeds the timetable."""


class WakeUpLoop:
    """Owns the timetable: adds and removes jobs, and turns due slots into claims."""

    events: EventBus = NO_EVENTS
    """Where ``skipped`` (late) goes (set by the scheduler)."""

    def __init__(
        self,
        *,
        timetable: Any,
        jobs: dict[str, Job],
        store_time: StoreTime,
        policy: StorePolicy,
        leases: bool,
        log: logging.Logger,
        new_run: Callable[[Job, int, int], Run],
        submit: Callable[[Sequence[Run]], None],
        settle: Callable[[], Awaitable[None]] | None = None,
        before_claims: Callable[[], Awaitable[None]] | None = None,
        lead_ms: int = 0,
        watch: Callable[[], bool] | None = None,
    ) -> None:
        self.timetable = timetable
        self.jobs = jobs
        self.store_time = store_time
        self.policy = policy
        self.leases = leases
        self.log = log
        self.new_run = new_run
        self.submit = submit
        self.settle = settle
        """Awaited before taking due slots: lets this instance's earlier runs start and land."""
        self.before_claims = before_claims
        """Awaited once per wake-up with due slots (the fleet-wide controls refresh)."""
        self.lead_ms = lead_ms
        """How long before its fire time a slot is claimed (its handler starts at the fire time)."""
        self.watch = watch
        """True while ``before_claims`` should also run on wake-ups without due slots, at least
        every :data:`WATCH_INTERVAL_S` (a paused job waits for its ``resume``)."""
        self.rank_of: Callable[[Job], int | None] = lambda job: 0
        """This instance's rank among the job's candidates; None: another instance's job."""
        self.delay_of: Callable[[Job, int], int] = lambda job, rank: 0
        """How long after its slot a candidate of ``rank`` claims the job."""
        self.jobs_changed: Callable[[], None] = lambda: None
        """Called when a job is added or removed (the roster changes)."""
        self.placed: set[str] = set()
        """Jobs prepared for this instance, in the timetable or ranked out of it."""
        self._delays: dict[str, int] = {}
        self._wake: asyncio.Future[None] | None = None
        self._stopped = False

    def stop(self) -> None:
        """``stop()`` began: the loop ends at its next step, even if a store call inside it
        turned the loop's cancellation into an error of its own (logged, and carried on from)."""
        self._stopped = True
        self.poke()

    def add_job(self, job: Job) -> None:
        """Put a prepared job in the timetable if this instance is one of its candidates
        (and claim its catch-up slot, on lease backends)."""
        self.placed.add(job.name)
        self.jobs_changed()
        rank = self.rank_of(job)
        if rank is None:
            return
        now = self.store_time.now_ms()
        compiled = job.schedule._compiled
        self._put(job, now, self.delay_of(job, rank))
        if job.catch_up_ms > job.max_late_ms and self.leases:
            slot = compiled.latest_between(now - job.catch_up_ms, now - job.max_late_ms - 1)
            if slot is not None:
                self.submit([self.new_run(job, slot, slot + job.catch_up_ms)])
        self.poke()

    def _put(self, job: Job, now: int, delay_ms: int) -> None:
        """(Re)place ``job`` in the timetable: its slots from ``max_late`` ago, due ``delay_ms`` late."""
        self._delays[job.name] = delay_ms
        self.timetable.add(
            job.name,
            job.schedule._compiled,
            job.jitter_ms,
            now,
            job.max_late_ms,
            self.lead_ms,
            delay_ms=delay_ms,
        )

    def rank_changed(self, job: Job, before: int | None, after: int | None) -> None:
        """The candidates changed: take the job out, put it in (its missed slots too), or
        move its fire time to the new rank's delay."""
        if job.name not in self.placed or self.jobs.get(job.name) is not job:
            return
        if after is None:
            self.timetable.remove(job.name)
            self._delays.pop(job.name, None)
        elif before is None or job.name not in self.timetable:
            # Slots within max_late that its old candidates may have missed are claimed
            # too: they answer ``done`` where a run happened.
            self._put(job, self.store_time.now_ms(), self.delay_of(job, after))
        else:
            delay = self.delay_of(job, after)
            self._delays[job.name] = delay
            self.timetable.set_delay(job.name, delay)
        self.poke()

    def remove_job(self, name: str) -> None:
        """Take a job out of the timetable."""
        self.placed.discard(name)
        self._delays.pop(name, None)
        self.timetable.remove(name)
        self.jobs_changed()
        self.poke()

    def poke(self) -> None:
        """Wake the loop early (a job was added or removed)."""
        sleeper = self._wake
        if sleeper is not None and not sleeper.done():
            sleeper.set_result(None)

    async def sync_clock(self) -> None:
        """Re-read the store clock; an error keeps the estimate (a transient one is an outage)."""
        try:
            async with self.policy.gate:
                shift = await self.store_time.sync()
        except asyncio.CancelledError:
            raise
        except Exception as error:
            self.store_time.postpone()
            if self.policy.is_transient(error):
                self.policy.note_outage(error)
            else:
                self.policy.report("the clock read", error)
            return
        if shift < -_REWIND_MS:
            self._rewind()
        if self.policy.outage and self.store_time.read_store:
            self.policy.recovered()  # only real I/O proves the store is reachable

    def _rewind(self) -> None:
        """The estimate of store time stepped back: restart every job's slots from the new now.

        Slots the timetable passed while the estimate ran ahead were refused
        as ``early`` (or not claimed yet); they are due again on the store's
        time. A slot that did run has state, so its second claim is ``done``.
        """
        now = self.store_time.now_ms()
        for job in self.jobs.values():
            if job.name in self.timetable:
                self._put(job, now, self._delays.get(job.name, 0))

    async def run(self) -> None:
        """The loop: take due slots, submit them, sleep until the next one."""
        timetable, jobs, store_time = self.timetable, self.jobs, self.store_time
        loop = asyncio.get_running_loop()
        while not self._stopped:
            if store_time.sync_due():
                await self.sync_clock()
            if self.settle is not None:
                await self.settle()
            now = store_time.now_ms()
            due: list[Run] = []
            for name, slot, fire_at in timetable.due(now, MAX_DUE_PER_WAKE):
                job = jobs.get(name)
                if job is None:
                    continue
                deadline = slot + job.max_late_ms
                if now > deadline:
                    zone = job_zone(job)
                    self.log.debug(
                        "anarchon: %s slot %s is late, not claimed", name, slot_iso(slot, zone)
                    )
                    self.events.emit("skipped", now, name, slot, None, zone, reason="late")
                    continue
                run = self.new_run(job, slot, deadline)
                if fire_at > now:  # claimed ahead: the handler starts at fire_at
                    run.fire_at = fire_at
                due.append(run)
            watching = self.watch is not None and self.watch()
            if due:
                if self.before_claims is not None:
                    await self.before_claims()
                self.submit(due)
            elif watching and self.before_claims is not None:
                await self.before_claims()
            wake_at = timetable.next_wakeup()
            timeout = SYNC_INTERVAL_S if wake_at is None else (wake_at - store_time.now_ms()) / 1000
            # Never early, but batch: slots due within the next few ms share one wake-up.
            timeout = min(max(timeout, _MIN_SLEEP_S), SYNC_INTERVAL_S)
            if watching:
                timeout = min(timeout, WATCH_INTERVAL_S)
            if self._stopped:
                return
            sleeper = loop.create_future()
            timer = loop.call_later(timeout, _wake_up, sleeper)
            self._wake = sleeper
            try:
                await sleeper
            finally:
                timer.cancel()
                self._wake = None


def _wake_up(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)
