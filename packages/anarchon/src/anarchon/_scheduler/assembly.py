"""The assembly of a started scheduler's parts: :func:`build_parts` wires them to each other.

:class:`~anarchon.scheduler.Scheduler` keeps the settings and the jobs; this
module builds, for one ``start()`` (or the first ``run_due()``), the claim
batcher, the executor, the result batcher, the lease keeper and its thread,
the wake-up loop and the fleet sync, and connects their callbacks.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from anarchon._scheduler.candidates import Candidates
from anarchon._scheduler.claims import ClaimBatcher
from anarchon._scheduler.executor import RunExecutor
from anarchon._scheduler.finish_resend import RecentFinishes
from anarchon._scheduler.fleet_sync import FleetSync
from anarchon._scheduler.lease_thread import LeaseThread
from anarchon._scheduler.leases import LeaseKeeper, safety_margin_ms
from anarchon._scheduler.overlap_wait import OverlapWait, recheck_interval_ms
from anarchon._scheduler.results import ResultBatcher
from anarchon._scheduler.resume_catch_up import ResumeCatchUp
from anarchon._scheduler.retry_step import RetrySteps
from anarchon._scheduler.run_state import Run
from anarchon._scheduler.store_batches import StoreBatches
from anarchon._scheduler.store_retry import StorePolicy
from anarchon._scheduler.store_time import StoreTime
from anarchon._scheduler.tasks import TaskSet
from anarchon._scheduler.wakeup import WakeUpLoop
from anarchon.backend.base import Backend, RunStore
from anarchon.backend.registry import resolve_backend
from anarchon.clock import Clock
from anarchon.events import EventBus
from anarchon.jobs import Job

__all__ = ["LANDING_WAIT_S", "Parts", "build_parts", "default_instance_id", "new_token"]

LANDING_WAIT_S = 1.0
"""How long new claims wait at most for this instance's finishes in flight."""


_EXPIRED_BEFORE_START = (
    "the short lease of a slot claimed ahead ended before its handler could start: this"
    " process or its event loop was paused or blocked; a backup takes the slot over"
)


def default_instance_id() -> str:
    """``host:pid:random``, the instance id when none is given."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(2)}"


_TOKEN_PREFIX = secrets.token_hex(8)
_token_counter = itertools.count(1)


def new_token() -> str:
    """A claim token unique to this attempt: a random per-process prefix plus a counter.

    Uniqueness is all a token needs; this avoids a system call per claim.
    """
    return f"{_TOKEN_PREFIX}{next(_token_counter):x}"


class Parts:
    """The running parts of a started scheduler (built by ``start()``, dropped by ``stop()``)."""

    def __init__(
        self,
        policy: StorePolicy,
        claims: ClaimBatcher,
        executor: RunExecutor,
        results: ResultBatcher,
        keeper: LeaseKeeper | None,
        wakeups: WakeUpLoop,
        fleet: FleetSync,
        candidates: Candidates,
    ) -> None:
        self.policy = policy
        self.claims = claims
        self.executor = executor
        self.results = results
        self.keeper = keeper
        self.wakeups = wakeups
        self.fleet = fleet
        self.candidates = candidates


def build_parts(
    *,
    backend: Backend,
    runs: RunStore | None,
    url: str | None,
    jobs: dict[str, Job],
    timetable: Any,
    policy: StorePolicy,
    store_time: StoreTime,
    tasks: TaskSet,
    events: EventBus,
    clock: Clock,
    log: logging.Logger,
    instance_id: str,
    lease_ms: int,
    heartbeat_ms: int,
    claim_ahead_ms: int,
    fleet_refresh_ms: int,
    control_cache_ms: int,
    candidates: int | None,
    stagger_ms: int,
    call_timeout_s: float,
    on_drift: Callable[[str, dict[str, int]], None],
    still_owner: Callable[[Run], Awaitable[bool]],
    due_log: Callable[[], list[Run] | None],
) -> Parts:
    """The parts of a started scheduler, wired to each other.

    ``due_log()`` is the list ``run_due()`` notes the submitted runs in (None
    outside ``run_due()``).
    """
    batches = StoreBatches(backend, policy)
    fleet = FleetSync(
        backend=backend,
        instance_id=instance_id,
        jobs=jobs,
        policy=policy,
        clock=clock,
        log=log,
        refresh_ms=fleet_refresh_ms,
        control_cache_s=control_cache_ms / 1000,
        on_drift=on_drift,
    )
    results: ResultBatcher
    retries = RetrySteps(
        backend=backend,
        policy=policy,
        instance_id=instance_id,
        lease_ms=lease_ms,
        clock=clock,
        now_ms=store_time.now_ms,
        new_token=new_token,
        log=log,
    )
    executor = RunExecutor(
        instance_id=instance_id,
        now_ms=store_time.now_ms,
        tasks=tasks,
        log=log,
        on_ended=lambda run, outcome: results.submit(run, outcome),
        owner_check=still_owner if runs is not None else None,
        retries=retries.run,
        skip_check=fleet.skip_reason,
        max_wait_ms=claim_ahead_ms,
        registered=lambda job: jobs.get(job.name) is job,
        monotonic=clock.monotonic,
    )
    results = ResultBatcher(
        instance_id=instance_id,
        batches=batches,
        policy=policy,
        clock=clock,
        tasks=tasks,
        log=log,
        on_stored=executor.ended,
        busy=executor.launching,
        recent=None
        if runs is None
        else recent_finishes(batches, policy, clock, tasks, log, lease_ms),
    )
    keeper: LeaseKeeper | None = None
    claims: ClaimBatcher

    def backup(run: Run, lease_expires_at: int | None) -> None:
        assert keeper is not None
        keeper.add_backup(run, lease_expires_at)

    claims = ClaimBatcher(
        instance_id=instance_id,
        lease_ms=lease_ms,
        batches=batches,
        policy=policy,
        clock=clock,
        tasks=tasks,
        log=log,
        on_won=executor.start,
        on_backup=backup,
        local_lease_ms=lease_ms - safety_margin_ms(lease_ms, heartbeat_ms),
        short_leases=runs is not None,
        before_claims=lambda: results.landed(LANDING_WAIT_S),
        on_early=store_time.resync_soon,
    )
    if runs is not None and runs.overlap_wait:
        claims.waiter = OverlapWait(
            submit=claims.submit,
            store_now=store_time.now_ms,
            clock=clock,
            tasks=tasks,
            interval_ms=recheck_interval_ms(heartbeat_ms),
            call_timeout_ms=int(call_timeout_s * 1000),
            log=log,
            lead_ms=claim_ahead_ms,
            holds=executor.holds,
            recovered_at=lambda: policy.recovered_at_ms,
        )
        executor.after_end = claims.waiter.local_ended
        recent = results.recent
        if recent is not None:

            def own_overlap(job: str) -> None:
                if not executor.holds(job):  # its handler ended here: its finish was lost
                    recent.blocked_by_own(job)

            claims.own_overlap = own_overlap
    if runs is not None:
        keeper = LeaseKeeper(
            lease_ms=lease_ms,
            heartbeat_ms=heartbeat_ms,
            batches=batches,
            policy=policy,
            clock=clock,
            store_now=store_time.now_ms,
            active=executor.active,
            log=log,
            cancel=executor.cancel,
            recheck=claims.submit,
            tasks=tasks,
        )
        keeper.starts = executor.starts
        executor.on_start = keeper.poke_starts  # or the lease thread's poke, below
        executor.on_expired = lambda run: keeper.lose(run, _EXPIRED_BEFORE_START)
        keeper.thread = lease_thread(
            backend, url, keeper, executor, lease_ms, heartbeat_ms, call_timeout_s, log
        )
        if keeper.thread is not None:
            executor.on_start = keeper.thread.poke
    leased = runs is not None

    async def settle() -> None:
        # Before new claims: handlers already queued start first (the ready queue is FIFO)
        # and the finishes of runs that ended land, so an overlap=False slot is not skipped
        # only because this instance lags behind its own earlier runs.
        if executor.active:
            await asyncio.sleep(0)
            await results.landed(LANDING_WAIT_S)

    def submit(due: Sequence[Run]) -> None:
        noted = due_log()
        if noted is not None:
            noted.extend(due)
        claims.submit(due)

    wakeups = WakeUpLoop(
        timetable=timetable,
        jobs=jobs,
        store_time=store_time,
        policy=policy,
        leases=leased,
        log=log,
        new_run=lambda job, slot, deadline: Run(job, slot, new_token(), deadline, leased=leased),
        submit=submit,
        settle=settle if leased else None,
        before_claims=fleet.refresh_controls,
        lead_ms=claim_ahead_ms,
    )
    if leased:  # catch_up needs leases: claim-only backends never re-run a paused slot
        catch_up = ResumeCatchUp(
            jobs=jobs,
            scheduled=lambda name: name in timetable,
            now_ms=store_time.now_ms,
            history=backend.history,
            new_run=wakeups.new_run,
            submit=wakeups.submit,
            log=log,
        )
        fleet.on_controls = catch_up.check
        wakeups.watch = lambda: catch_up.watching
    ranking = Candidates(
        backend=backend,
        instance_id=instance_id,
        jobs=jobs,
        k=candidates,
        stagger_ms=stagger_ms,
        policy=policy,
        fingerprint_of=fleet.fingerprint_of,
        events=events,
        log=log,
    )
    ranking.on_change = wakeups.rank_changed
    wakeups.rank_of = ranking.rank_of
    wakeups.delay_of = ranking.delay_ms
    wakeups.jobs_changed = ranking.jobs_changed
    claims.events = executor.events = results.events = wakeups.events = events
    retries.events = events
    if keeper is not None:
        keeper.events = events
    return Parts(policy, claims, executor, results, keeper, wakeups, fleet, ranking)


def recent_finishes(
    batches: StoreBatches,
    policy: StorePolicy,
    clock: Clock,
    tasks: TaskSet,
    log: logging.Logger,
    lease_ms: int,
) -> RecentFinishes:
    """The finishes of the last lease, re-sent when the store answers again after an outage."""
    recent = RecentFinishes(
        lease_s=lease_ms / 1000, batches=batches, policy=policy, clock=clock, tasks=tasks, log=log
    )
    policy.on_recovered = recent.recovered
    return recent


def lease_thread(
    backend: Backend,
    url: str | None,
    keeper: LeaseKeeper,
    executor: RunExecutor,
    lease_ms: int,
    heartbeat_ms: int,
    call_timeout_s: float,
    log: logging.Logger,
) -> LeaseThread | None:
    """The lease thread, on a backend of its own; None keeps heartbeats on the scheduler's loop."""
    other = backend.clone()
    if other is None and url is not None:
        try:
            other = resolve_backend(url)
        except Exception as error:
            log.warning(
                "anarchon: heartbeats stay on the scheduler's loop: no second backend (%s)",
                error,
            )
            return None
    if other is None and backend.runs is not None:
        log.warning(
            "anarchon: heartbeats share the scheduler's event loop: this %s cannot open a second"
            " connection for the lease thread (pass a URL, or a client it can copy); a handler"
            " that blocks the loop (a sync call in an async def) stops the renewals and loses"
            " its lease, and another instance may then run the same slot",
            type(backend).__name__,
        )
        return None
    if other is None or other.runs is None:
        return None
    return LeaseThread(
        backend=other,
        owns_backend=other is not backend,
        lease_ms=lease_ms,
        heartbeat_ms=heartbeat_ms,
        local_lease_s=keeper.local_lease_s,
        call_timeout_s=call_timeout_s,
        active=executor.active,
        log=log,
        on_refused=keeper.refused_by_thread,
        on_error=keeper.thread_result,
        starts=executor.starts,
    )
