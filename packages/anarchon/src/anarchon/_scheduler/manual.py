"""``Scheduler.run_now()``: a job's handler run here and now, recorded as a manual run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from anarchon._scheduler.executor import RunExecutor
from anarchon._scheduler.run_state import Run
from anarchon._scheduler.store_retry import GAVE_UP, StorePolicy
from anarchon._scheduler.tasks import TaskSet
from anarchon.backend.base import Backend
from anarchon.context import RunContext
from anarchon.errors import BackendUnavailableError
from anarchon.jobs import Job
from anarchon.types import ClaimInput, RunRecord, StoredResult

__all__ = ["gave_up", "run_manually"]


def gave_up(backend: Backend) -> Exception:
    """The error of a store call that gave up because the scheduler stops."""
    return BackendUnavailableError(f"store {backend.name} unreachable while stopping")


async def run_manually(
    job: Job,
    *,
    backend: Backend,
    policy: StorePolicy,
    instance_id: str,
    token: str,
    now_ms: Callable[[], int],
    tasks: TaskSet,
    log: logging.Logger,
) -> RunRecord:
    """Record a manual claim, run the handler in this task, store its result; its record.

    A store error that is not transient is raised with its code.
    """
    name = job.name
    slot = now_ms()
    claim = ClaimInput(name, slot, token, instance_id, job.history_size, job.history_ttl_ms)
    chosen = await policy.call(lambda: backend.record_manual_run(claim))
    if chosen is GAVE_UP:
        raise gave_up(backend)
    if chosen is not None:
        slot = chosen
    run = Run(job, slot, token, slot, leased=False)
    run.attempt = 1
    run.ctx = RunContext(name, slot, instance_id, 1, token, manual=True)
    run.task = asyncio.current_task()
    executor = RunExecutor(
        instance_id=instance_id,
        now_ms=now_ms,
        tasks=tasks,
        log=log,
        on_ended=lambda _run, _outcome: None,
    )
    status, error, started, finished = await executor.invoke(run)
    result = StoredResult(slot, token, instance_id, status, started, finished, error, 1, True)
    saved = await policy.complete(
        lambda: backend.save_result(name, result, job.history_size, job.history_ttl_ms)
    )
    if not saved:
        raise gave_up(backend)
    return RunRecord(
        job=name,
        slot=slot,
        instance_id=instance_id,
        status=status,
        attempt=1,
        manual=True,
        started_at=started,
        finished_at=finished,
        duration_ms=finished - started,
        error=error,
    )
