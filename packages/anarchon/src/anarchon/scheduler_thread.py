"""The handle of ``Scheduler.start_in_thread()``: a :class:`~anarchon.SyncScheduler` over that scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING

from anarchon.sync import SyncScheduler

if TYPE_CHECKING:
    from anarchon.scheduler import Scheduler

__all__ = ["SchedulerThread"]


class SchedulerThread(SyncScheduler):
    """A scheduler running on its own event loop in a daemon thread (see ``start_in_thread``).

    Every method of :class:`~anarchon.SyncScheduler` works on it, from any
    thread: ``history()``, ``last_run()``, ``run_now()``, ``add()``,
    ``remove()`` and ``stop()`` (docs/sync.md).
    """

    def __init__(self, scheduler: Scheduler) -> None:
        super().__init__(scheduler=scheduler)
