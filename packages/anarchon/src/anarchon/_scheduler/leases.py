"""The lease keeper: heartbeats for the leases this instance holds, and re-checks of backups.

- Every heartbeat tick, every lease held (handler running, or ended with its
  finish not yet landed) is renewed by one ``heartbeat_many`` per chunk;
  each answer is per run: False means another instance owns the run now.
- A lease whose local end has passed by this instance's monotonic clock is
  lost, even while the store is unreachable: the handler is cancelled
  (``ctx.cancelled``) and no result is stored. The local end is the send
  time of the last confirmed heartbeat plus the lease minus a safety margin
  (:func:`safety_margin_ms`), so a cooperative handler is told to stop
  before the store's lease can expire (docs/leases.md, "The safety margin").
- A run whose handler still lives keeps its lease: it is renewed while the
  handler task runs (or its thread has not returned), however often it was
  cancelled; it is finished or released only once the handler has ended.
- A heartbeat answered False while the run's finish is in flight is the
  finish winning the race: nothing is logged, the finish's answer decides.
- A backup (a lease loser whose runner is alive) is re-checked every
  heartbeat, and just after the lease would expire; re-checks due together
  go to the claim batcher as one batch of ``create=False`` claims.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections import deque
from collections.abc import Callable, Sequence

from anarchon._scheduler.lease_thread import LeaseThread
from anarchon._scheduler.run_state import Ending, Phase, Run
from anarchon._scheduler.store_batches import StoreBatches, chunks
from anarchon._scheduler.store_retry import StorePolicy, describe_error
from anarchon._scheduler.tasks import TaskSet
from anarchon.clock import Clock
from anarchon.events import NO_EVENTS, EventBus, job_zone, log_extra, slot_iso
from anarchon.types import RunKey

__all__ = ["START_WINDOW_MIN_MS", "LeaseKeeper", "safety_margin_ms", "short_lease_ms"]


def safety_margin_ms(lease_ms: int, heartbeat_ms: int) -> int:
    """How much earlier than the store's expiry a runner considers its lease over.

    One heartbeat interval, but never more than half the slack between the
    interval and the lease, so a renewal always lands before the local end.
    """
    return max(0, min(heartbeat_ms, (lease_ms - heartbeat_ms) // 2))


START_WINDOW_MIN_MS = 3_000
"""The shortest time a slot claimed ahead stays leased past its fire time: it covers a store
outage of a few seconds around the fire time (docs/leases.md, "Slots claimed ahead hold a short lease")."""


def short_lease_ms(ahead_ms: int, lease_ms: int) -> tuple[int, int] | None:
    """``(lease, local lease)`` in ms of a slot claimed ``ahead_ms`` before its fire time.

    The claim holds the slot until a *start window* ``W = max(2 * ahead, 3 s)``
    past its fire time; the runner counts it as ended ``W / 2`` earlier (the
    safety margin of a short lease), so the renewal sent when the handler
    starts has ``max(ahead, 1.5 s)`` to land, as long as the claims of the
    slot's wave had before it. None: claimed at or after its fire time, or a
    short lease would be no shorter than the full one (a lease of a few
    seconds).
    """
    if ahead_ms <= 0:
        return None
    window = max(2 * ahead_ms, START_WINDOW_MIN_MS)
    lease = ahead_ms + window
    if lease >= lease_ms:
        return None
    return lease, lease - window // 2


_RECHECK_WINDOW_S = 0.005
"""Backup re-checks due within this window go out together."""
_EXPIRY_MARGIN_MS = 5
"""A backup re-checks this long after the runner's lease would expire."""


_WHY_TIMEOUT_S = 2.0
"""How long to wait for the store's explanation of a refused heartbeat."""

_REFUSED = {
    "other": "another instance owns the run now",
    "gone": "the store has no state for this run: restarted without persistence?",
    "ended": "the store already ended this attempt",
    "held": "the store refused the heartbeat although this attempt still holds the run",
    "unknown": "the store refused the heartbeat: another instance owns the run, or its state"
    " is gone",
}
"""The log reason of a lost lease, by ``RunStore.lease_state``."""


class LeaseKeeper:
    """Renews held leases in batches and schedules backup re-checks."""

    events: EventBus = NO_EVENTS
    """Where ``lease_lost`` goes (set by the scheduler)."""

    def __init__(
        self,
        *,
        lease_ms: int,
        heartbeat_ms: int,
        batches: StoreBatches,
        policy: StorePolicy,
        clock: Clock,
        store_now: Callable[[], int],
        active: dict[tuple[str, int], Run],
        log: logging.Logger,
        cancel: Callable[[Run, str], None],
        recheck: Callable[[Sequence[Run]], None],
        tasks: TaskSet,
    ) -> None:
        self.lease_ms = lease_ms
        self.local_lease_s = (lease_ms - safety_margin_ms(lease_ms, heartbeat_ms)) / 1000
        """How long a confirmed renewal keeps the lease on this instance's clock."""
        self.interval = heartbeat_ms / 1000
        self.batches = batches
        self.policy = policy
        self.clock = clock
        self.store_now = store_now
        self.active = active
        self.log = log
        self.cancel = cancel
        self.recheck = recheck
        self.tasks = tasks
        self._backups: list[tuple[float, int, Run]] = []
        self._order = itertools.count()
        self._beating = False
        self._next_beat = 0.0
        self._wake: asyncio.Future[None] | None = None
        self.thread: LeaseThread | None = None
        """Renews the leases from its own thread when set (heartbeats then leave this loop)."""
        self.starts: deque[Run] = deque()
        """Runs with a short lease whose handler started (the executor's): renewed at once,
        together, by this loop when there is no lease thread (the start renewal)."""

    # Backups -------------------------------------------------------------

    def add_backup(self, run: Run, lease_expires_at: int | None) -> None:
        """Watch ``run``: re-check every heartbeat and just after the lease would expire."""
        run.phase = Phase.BACKUP
        run.recheck = True
        wait_ms = self.interval * 1000
        if lease_expires_at is not None:
            left = max(lease_expires_at - self.store_now(), 0) + _EXPIRY_MARGIN_MS
            wait_ms = min(wait_ms, left)
        due = self.clock.monotonic() + wait_ms / 1000
        first = not self._backups or due < self._backups[0][0]
        heapq.heappush(self._backups, (due, next(self._order), run))
        if first:
            self._poke()

    def drop_backups(self) -> None:
        """Stop watching every backup (on stop)."""
        for _due, _n, run in self._backups:
            run.phase = Phase.ENDED
        self._backups.clear()

    def _due_backups(self, now: float) -> list[Run]:
        due: list[Run] = []
        limit = now + _RECHECK_WINDOW_S
        backups = self._backups
        while backups and backups[0][0] <= limit:
            run = heapq.heappop(backups)[2]
            if run.phase is Phase.BACKUP:
                run.phase = Phase.CLAIMING
                due.append(run)
        return due

    # The loop --------------------------------------------------------------

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def run(self) -> None:
        """Renew leases, expire lost ones locally, and hand due re-checks to the claim batcher.

        Runs apart from the handlers, so a blocking handler cannot starve it.
        """
        loop = asyncio.get_running_loop()
        planned = self.clock.monotonic()
        while True:
            now = self.clock.monotonic()
            late = now - planned
            wake = now + self.interval
            held: list[Run] = []
            for run in list(self.active.values()):
                if not run.holds_lease:
                    continue
                if now >= run.lease_until:
                    self.lose(run, self._expired_why(late))
                    continue
                if run.needs_renewal(now, self.interval):
                    held.append(run)
                wake = min(wake, run.lease_until)
            if self.thread is not None:
                held = []  # renewed by the lease thread
            elif self.starts:
                self._renew_starts()
            if held and not self._beating and now >= self._next_beat:
                self._beating = True
                self._next_beat = now + self.interval
                self.tasks.spawn(self._beat(held), "anarchon-heartbeats")
            if held and not self._beating:
                wake = min(wake, self._next_beat)
            due = self._due_backups(now)
            if due:
                self.recheck(due)
            if self._backups:
                wake = min(wake, self._backups[0][0])
            sleeper = loop.create_future()
            delay = max(0.001, wake - self.clock.monotonic())
            planned = self.clock.monotonic() + delay
            timer = loop.call_later(delay, _wake_up, sleeper)
            self._wake = sleeper
            try:
                await sleeper
            finally:
                timer.cancel()
                self._wake = None

    def poke_starts(self) -> None:
        """A handler with a short lease started: renew it now (without a lease thread)."""
        if self.thread is None:
            self._poke()

    def _renew_starts(self) -> None:
        starts = self.starts
        due = [run for run in (starts.popleft() for _ in range(len(starts))) if run.holds_lease]
        for chunk in chunks(due):
            self.tasks.spawn(self._beat_chunk(chunk), "anarchon-heartbeats")

    async def _beat(self, held: list[Run]) -> None:
        """One heartbeat tick: renew every held lease, one ``heartbeat_many`` per chunk."""
        try:
            await asyncio.gather(*(self._beat_chunk(chunk) for chunk in chunks(held)))
        finally:
            self._beating = False
            self._poke()

    async def _beat_chunk(self, runs: Sequence[Run]) -> None:
        keys = [RunKey(run.job.name, run.slot, run.token) for run in runs]
        sent = self.clock.monotonic()
        timeout = max(
            0.001, min(self.policy.call_timeout_s, max(run.lease_until for run in runs) - sent)
        )
        try:
            answers = await asyncio.wait_for(
                self.batches.heartbeat_many(keys, self.lease_ms), timeout
            )
        except asyncio.CancelledError:
            raise
        except Exception as error:
            transient = isinstance(error, asyncio.TimeoutError) or self.policy.is_transient(error)
            if transient:
                self.policy.note_outage(error)
                self._next_beat = min(self._next_beat, self.clock.monotonic() + self.interval / 4)
            else:
                self._refused(runs, error)
            return
        if self.policy.outage:
            self.policy.recovered()
        lease_until = sent + self.local_lease_s
        refused: list[Run] = []
        for run, key, ok in zip(runs, keys, answers):  # noqa: B905 - a short answer renews fewer
            if not run.holds_lease or run.token != key.token:
                continue  # ended, or a retry started its next attempt meanwhile (a new lease)
            if ok:
                run.lease_until = lease_until
                run.short = False
            elif run.phase is Phase.RUNNING:
                refused.append(run)
            # FINISHING: the finish raced this heartbeat and landed first; its answer decides.
        if refused:
            self.tasks.spawn(self._lose_refused(refused), "anarchon-heartbeats")

    def refused_by_thread(self, runs: Sequence[Run]) -> None:
        """The lease thread's renewals the store refused (called on this loop)."""
        refused = [run for run in runs if run.holds_lease and run.phase is Phase.RUNNING]
        if refused:
            self.tasks.spawn(self._lose_refused(refused), "anarchon-heartbeats")

    def thread_result(self, outcome: tuple[Sequence[Run], BaseException | None]) -> None:
        """The lease thread's renewal of ``runs`` failed with ``error`` or succeeded (None)."""
        runs, error = outcome
        if error is None:
            if self.policy.outage:
                self.policy.recovered()
        elif self.policy.is_transient(error):
            self.policy.note_outage(error)
        else:
            self._refused(runs, error)

    async def _lose_refused(self, runs: Sequence[Run]) -> None:
        """Runs whose renewal the store refused: ask the store why (``lease_state``), then lose them."""
        for run in runs:
            self.lose(run, await self._why_refused(run))

    async def still_owner(self, run: Run) -> bool:
        """``ctx.still_owner()``: whether this attempt holds a live lease in the store now.

        False without asking once the local lease has ended; a store that does
        not answer within one call timeout counts as False.
        """
        if not run.holds_lease or self.clock.monotonic() >= run.lease_until:
            return False
        store = self.batches.runs
        assert store is not None
        key = RunKey(run.job.name, run.slot, run.token)
        try:
            async with self.policy.gate:
                ok = await asyncio.wait_for(
                    store.still_owner(key, self.lease_ms), self.policy.call_timeout_s
                )
        except asyncio.CancelledError:
            raise
        except Exception:
            return False
        if run.token != key.token:
            return False  # asked for an attempt that a retry has ended meanwhile
        if not ok and run.phase is Phase.RUNNING:
            self.lose(run, "the store says this attempt no longer holds the lease")
        return ok is True and run.holds_lease

    def _expired_why(self, late_s: float) -> str:
        """What was observed when a lease is found expired on this instance's clock."""
        if late_s > self.interval:
            return (
                f"its lease was found expired on wake-up: this process or its event loop was"
                f" paused or blocked for {late_s:.1f} s"
            )
        if self.policy.outage:
            return "its lease expired while the store was unreachable"
        return "its lease expired: no renewal was confirmed in time"

    async def _why_refused(self, run: Run) -> str:
        """What the store says about a refused heartbeat (``RunStore.lease_state``)."""
        runs = self.batches.runs
        state = "unknown"
        if runs is not None:
            try:
                state = await asyncio.wait_for(
                    runs.lease_state(run.job.name, run.slot, run.token), _WHY_TIMEOUT_S
                )
            except asyncio.CancelledError:
                raise
            except Exception:  # only an explanation: the lease is lost either way
                state = "unknown"
        return _REFUSED.get(state, _REFUSED["unknown"])

    def lose(self, run: Run, why: str) -> None:
        """The lease is gone: cancel the handler; its result will not be stored."""
        if not run.holds_lease:
            return
        run.ending = Ending.LEASE_LOST
        job = run.job
        zone = job_zone(job)
        self.log.info(
            "anarchon: %s slot %s attempt %d lost its lease (%s); cancelling the handler",
            job.name,
            slot_iso(run.slot, zone),
            run.attempt,
            why,
            extra=log_extra(job.name, run.slot, run.attempt, self.events.instance_id, zone),
        )
        self.events.emit(
            "lease_lost", self.store_now(), job.name, run.slot, run.attempt, zone, reason=why
        )
        self.cancel(run, "lease_lost")

    def _refused(self, runs: Sequence[Run], error: BaseException) -> None:
        """A permanent heartbeat error: log it once; end the runs with status error."""
        self.policy.report("heartbeats", error)
        text = f"the store refused the lease's renewal: {describe_error(error)}"
        for run in runs:
            if run.holds_lease and run.ending is None:
                run.ending = Ending.STORE_ERROR
                run.store_error = text
                self.cancel(run, "store_error")


def _wake_up(sleeper: asyncio.Future[None]) -> None:
    if not sleeper.done():
        sleeper.set_result(None)
