"""``stop()``'s drain: waiting for runs and store work, cancelling, handing over, closing.

The bound it keeps (docs/leases.md, "Stopping") is described on
:meth:`anarchon.Scheduler.stop`.
"""

from __future__ import annotations

import asyncio
import logging

from anarchon._scheduler.assembly import Parts
from anarchon._scheduler.lease_thread import LeaseThread
from anarchon._scheduler.outlived import OutlivedRun
from anarchon._scheduler.run_state import Ending, Phase, Run
from anarchon._scheduler.tasks import TaskSet
from anarchon.backend.base import Backend

__all__ = ["JOIN_S", "close_within", "drain", "drain_for_stop"]

JOIN_S = 0.05
"""``stop()`` waits at least this long for the lease thread and for the backend to close."""

_DRAIN_RELIST_S = 0.05
"""How often the wait for the runs and store work left lists them again."""


async def drain(tasks: TaskSet, parts: Parts, until: float) -> bool:
    """Wait until no run and no store work is left (True), or the loop time ``until`` (False)."""
    loop = asyncio.get_running_loop()
    while True:
        parts.results.flush()
        work = tasks.work() | parts.executor.tasks_running()
        if not work and not parts.executor.active:
            return True
        left = until - loop.time()
        if left <= 0:
            return False
        if work:
            # All of them, re-listed at most every 50 ms: re-listing after each one ended
            # walked every active run per ended run (stop() of a wave of 10,000 took 8 s).
            await asyncio.wait(work, timeout=min(left, _DRAIN_RELIST_S))
        else:
            await asyncio.sleep(min(left, 0.005))


async def drain_for_stop(
    tasks: TaskSet,
    parts: Parts,
    log: logging.Logger,
    *,
    grace_end: float,
    stop_grace_s: float,
    call_timeout_s: float,
    lease_ms: int,
) -> None:
    """Wait for the runs until ``grace_end``; then cancel and hand them over, and wait once more.

    Claims, wake-ups and backups are already stopped. Handlers still running
    at ``grace_end`` are cancelled (leased ones handed over) with every store
    task but the result and heartbeat loops; their ends get one call timeout.
    """
    if await drain(tasks, parts, grace_end):
        return
    for run in list(parts.executor.active.values()):
        if run.phase is Phase.RUNNING:
            if run.leased and run.ending is None:
                run.ending = Ending.HAND_OVER
            parts.executor.cancel(run, "stop")
    for task in tasks.work():
        if task.get_name() not in ("anarchon-results", "anarchon-heartbeats"):
            task.cancel()
    loop = asyncio.get_running_loop()
    if not await drain(tasks, parts, loop.time() + call_timeout_s) and parts.executor.alive():
        await _wait_for_live_handlers(tasks, parts, log, stop_grace_s, call_timeout_s, lease_ms)


async def _wait_for_live_handlers(
    tasks: TaskSet,
    parts: Parts,
    log: logging.Logger,
    wait_s: float,
    call_s: float,
    lease_ms: int,
) -> None:
    """The last wait: handlers that outlive their cancellation keep their lease.

    After ``wait_s`` more, a sync handler's thread that still lives goes to
    the lease thread, which renews its lease until the thread returns and then
    stores its end (:mod:`anarchon._scheduler.outlived`). Without a lease
    thread, ``stop()`` goes on waiting for it here, renewing its lease from
    this loop: a lease is never given up while its handler lives.
    """
    loop = asyncio.get_running_loop()
    for run in parts.executor.alive():
        log.warning(
            "anarchon: %s slot %d attempt %d still runs after stop() cancelled it; its lease"
            " is kept, not released, while the handler lives; stop() waits up to %g s more",
            run.job.name,
            run.slot,
            run.attempt,
            wait_s,
        )
    end = loop.time() + wait_s
    while parts.executor.alive() and loop.time() < end:
        await drain(tasks, parts, min(end, loop.time() + 0.05))
    left = parts.executor.alive()
    if not left:
        await drain(tasks, parts, loop.time() + call_s)
        return
    keeper = parts.keeper
    thread = keeper.thread if keeper is not None else None
    adopted: set[tuple[str, int]] = set()
    if thread is not None and thread.alive():
        adopted = _to_lease_thread(thread, left, log)
    elif keeper is not None:
        leased = [run for run in left if run.leased]
        for run in leased:
            log.warning(
                "anarchon: %s slot %d attempt %d still runs; with no lease thread (a backend"
                " object that cannot be cloned), stop() waits for its handler, renewing its lease",
                run.job.name,
                run.slot,
                run.attempt,
            )
        while any(run.task is not None and not run.task.done() for run in leased):
            await drain(tasks, parts, loop.time() + 0.25)
        left = parts.executor.alive()
    for run in left:
        if run.leased and run.key not in adopted:
            log.error(
                "anarchon: %s slot %d attempt %d still runs; stop() returns without releasing"
                " its lease, which expires %d ms after its last renewal",
                run.job.name,
                run.slot,
                run.attempt,
                lease_ms,
            )
        run.abandoned = True
        if run.task is not None:
            run.task.cancel()
    await drain(tasks, parts, loop.time() + call_s)


def _to_lease_thread(
    thread: LeaseThread, runs: list[Run], log: logging.Logger
) -> set[tuple[str, int]]:
    """Leave the live sync handlers' runs to the lease thread; the keys of those it took."""
    outlived: list[OutlivedRun] = []
    for run in runs:
        handler = run.handler_thread
        ctx = run.ctx
        if handler is None or ctx is None or not run.leased:
            continue
        outlived.append(
            OutlivedRun(
                job=run.job,
                slot=run.slot,
                token=run.token,
                attempt=run.attempt,
                instance_id=ctx.instance_id,
                thread=handler,
                lease_until=run.lease_until,
            )
        )
        log.warning(
            "anarchon: %s slot %d attempt %d still runs; stop() returns and the lease thread"
            " renews its lease until the handler returns, then finishes it",
            run.job.name,
            run.slot,
            run.attempt,
        )
    thread.adopt(outlived)
    return {(run.job.name, run.slot) for run in outlived}


async def close_within(backend: Backend, log: logging.Logger, seconds: float) -> None:
    """Close the backend, giving up after ``seconds`` (a dead store must not hold ``stop()``)."""
    closing = asyncio.ensure_future(backend.close())
    done, _pending = await asyncio.wait({closing}, timeout=seconds)
    if closing in done:
        closing.result()
    else:  # not cancelled: a driver may take long to cancel, too
        log.warning(
            "anarchon: closing store %s took longer than %g s; its connections are abandoned",
            backend.name,
            seconds,
        )
