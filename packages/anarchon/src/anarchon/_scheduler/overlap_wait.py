"""A run ends when its handler ends: overlap answers are re-checked before a slot is skipped.

With ``overlap=False`` a slot whose job still has a live run elsewhere is
answered ``overlap``. That live run may only be waiting for its ``finish()``
to land (a slow link, a retried call): its handler is over. So a claim is
first sent with :attr:`~anarchon.RunClaim.overlap_wait` (the store writes
nothing on ``overlap``), and :class:`OverlapWait` re-claims the slot with the
same token every ``interval`` (more often when the slot's time is short:
a quarter of what is left, at least :data:`MIN_RECHECK_MS`) until the blocking run has ended (the claim is
then won, or another instance won it) or the slot's time is up: the slot's
deadline less one call timeout, or the job's next slot, whichever is first.
Only then is a last claim sent without ``overlap_wait``, which writes the
``skipped`` (overlap) state as before (see docs/leases.md,
"A run ends when its handler ends").

When the live run is this instance's own (its end not stored yet), the
store is not asked again while it lives: the slot is re-checked as soon as
that run's end is stored (:meth:`OverlapWait.local_ended`), or at its last
claim. A slow link then carries one re-check, not one per interval beside
the finish it waits for.

Right after a store outage every instance's finishes are late at once: each
instance notices that the store answers again within a probe interval of
its own, and its finishes then go out. So a slot whose time ran out during
the outage is re-checked, not written ``skipped``, until
:data:`RECOVERY_GRACE_MS` after this instance saw the store answer again
(never past the slot's deadline less one call timeout): a finish that was
only waiting out the outage lands first, and the slot runs.

Nothing here runs unless a claim was answered ``overlap``: the common case
costs nothing. Stores that do not honour ``overlap_wait``
(:attr:`~anarchon.RunStore.overlap_wait` False) get no re-checks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from anarchon._scheduler.run_state import Phase, Run
from anarchon._scheduler.tasks import TaskSet
from anarchon.clock import Clock

__all__ = ["MIN_RECHECK_MS", "RECOVERY_GRACE_MS", "OverlapWait", "recheck_interval_ms"]


MIN_RECHECK_MS = 10
"""The shortest pause between two re-checks of one slot; a slot with less time left gets its
last claim at once."""


RECOVERY_GRACE_MS = 1_000
"""How long after the store answers again a slot answered ``overlap`` is still re-checked
before it is written ``skipped``: the other instances' finishes land meanwhile (each notices
the recovery within ``store_retry.PROBE_S``)."""


def recheck_interval_ms(heartbeat_ms: int) -> int:
    """How often a slot answered ``overlap`` is claimed again: a quarter heartbeat, 100 ms to 1 s."""
    return min(max(heartbeat_ms // 4, 100), 1000)


class OverlapWait:
    """Slots answered ``overlap`` (nothing written) that are claimed again until their time is up."""

    def __init__(
        self,
        *,
        submit: Callable[[Sequence[Run]], None],
        store_now: Callable[[], int],
        clock: Clock,
        tasks: TaskSet,
        interval_ms: int,
        call_timeout_ms: int,
        log: logging.Logger,
        lead_ms: int = 0,
        holds: Callable[[str], bool] | None = None,
        recovered_at: Callable[[], int] | None = None,
    ) -> None:
        self.submit = submit
        self.recovered_at = recovered_at
        """Store time at which the last store outage ended (the store policy's), or None."""
        """Claims runs again (the claim batcher's ``submit``)."""
        self.store_now = store_now
        self.clock = clock
        self.tasks = tasks
        self.interval_ms = interval_ms
        self.call_timeout_ms = call_timeout_ms
        self.log = log
        self.lead_ms = lead_ms
        """The scheduler's ``claim_ahead``: the next slot is claimed up to this long before it."""
        self.holds = holds
        """``holds(job)``: this instance has a run of ``job`` whose end is not stored yet."""
        self._held: dict[str, list[Run]] = {}
        """Waiting runs, by job, re-checked when this instance's own run of the job ends."""
        self.waits = 0
        """How many ``overlap`` answers were re-checked (instead of written ``skipped``)."""
        self._waiting: dict[Run, tuple[int, int]] = {}
        """Each waiting run: the store time by which its last claim goes out, and of its next."""
        self._next_check = 0
        """Store time the loop wakes at (an earlier check wakes it sooner)."""
        self._wake: asyncio.Future[None] | None = None
        self._task: asyncio.Task[object] | None = None
        self._stopped = False
        self._now: list[Run] = []
        """Runs whose last claim goes out at once, sent together on the loop's next turn."""

    def __len__(self) -> int:
        return len(self._waiting)

    def end_of(self, run: Run) -> int:
        """Store time of ``run``'s last claim: its deadline less one call timeout, or the next slot.

        The next slot counts from when it is claimed: up to its lead (a
        quarter of its gap at most, as the timetable does) before it. A
        re-check won after the next slot was claimed would run beside it.
        """
        end = run.deadline_ms - self.call_timeout_ms
        schedule = run.job.schedule
        following = schedule.next_after(run.slot)
        if following is not None:
            lead = 0
            if self.lead_ms > 0:
                after = schedule.next_after(following)
                gap = (after - following) if after is not None else self.lead_ms * 4
                lead = min(self.lead_ms, gap // 4)
            end = min(end, following - lead)
        if self.recovered_at is not None:
            since = self.recovered_at()
            if since > 0:  # finishes held by an outage that just ended land first
                end = max(
                    end, min(since + RECOVERY_GRACE_MS, run.deadline_ms - self.call_timeout_ms)
                )
        return end

    def add(self, run: Run) -> None:
        """``run``'s claim was answered ``overlap`` and nothing was written: claim it again later."""
        if self._stopped:
            run.phase = Phase.ENDED
            return
        end = self.end_of(run)
        self.waits += 1
        if self.log.isEnabledFor(logging.DEBUG):
            self.log.debug(
                "anarchon: %s slot %d: an older run is still live; re-checking until %d",
                run.job.name,
                run.slot,
                end,
                extra={"job": run.job.name, "slot": run.slot},
            )
        now = self.store_now()
        if now + MIN_RECHECK_MS >= end:
            self._last(run)
            # A wave of overlap answers (thousands of jobs due together) goes
            # back to the claim batcher as one list, not one claim each.
            if not self._now:
                asyncio.get_running_loop().call_soon(self._submit_now)
            self._now.append(run)
            return
        # A slot with little time left (a job every few hundred ms) is re-checked
        # more often: a quarter of what is left, so it still sees the older run end.
        name = run.job.name
        if self.holds is not None and self.holds(name):
            check_at = end  # unless local_ended() brings it forward
            self._held.setdefault(name, []).append(run)
        else:
            check_at = now + min(self.interval_ms, max(MIN_RECHECK_MS, (end - now) // 4))
        self._waiting[run] = (end, check_at)
        if self._task is None or self._task.done():
            self._task = self.tasks.spawn(self._loop(), "anarchon-overlap-wait")
        elif check_at < self._next_check:
            self._poke()

    def local_ended(self, job: str) -> None:
        """A run of ``job`` on this instance has its end stored: re-check its held slots now."""
        held = self._held.pop(job, None) if self._held else None
        if not held:
            return
        now = self.store_now()
        for run in held:
            times = self._waiting.get(run)
            if times is not None:
                self._waiting[run] = (times[0], now)
        self._poke()

    def _submit_now(self) -> None:
        runs, self._now = self._now, []
        if runs and not self._stopped:
            self.submit(runs)

    def cancel(self) -> None:
        """Stopping: no more re-checks; the waiting slots are left to other instances."""
        self._stopped = True
        for run in [*self._waiting, *self._now]:
            run.phase = Phase.ENDED
        self._waiting.clear()
        self._held.clear()
        self._now.clear()
        if self._task is not None:
            self._task.cancel()

    @staticmethod
    def _last(run: Run) -> None:
        """The next claim of ``run`` records the skip if the overlap still holds."""
        run.wait_overlap = False

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            self._next_check = min(check_at for _end, check_at in self._waiting.values())
            self._wake = wake = loop.create_future()
            delay_s = max(0, self._next_check - self.store_now()) / 1000
            sleeper = loop.create_task(self.clock.sleep(delay_s))  # the Clock: tests move it
            try:
                await asyncio.wait((sleeper, wake), return_when=asyncio.FIRST_COMPLETED)
            finally:
                sleeper.cancel()
                self._wake = None
            if self._stopped:
                return
            now = self.store_now()
            due = [run for run, (_end, check_at) in self._waiting.items() if check_at <= now]
            for run in due:
                end, _check_at = self._waiting.pop(run)
                if now + MIN_RECHECK_MS >= end:
                    self._last(run)
            if due:
                self.submit(due)
