"""Declaring jobs: ``every``, ``cron`` and ``at``, shared by ``Scheduler`` and ``SyncScheduler``.

Each is a plain call with a handler, or a decorator without one, and ends in
the class's own ``add(name, schedule, handler, **options)`` (docs/concepts.md).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, overload

from anarchon.durations import Duration
from anarchon.job_options import JobOptions
from anarchon.jobs import Handler, Job
from anarchon.schedules import Cron, Every, Once, Schedule

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["JobDeclarations"]

H = TypeVar("H", bound=Handler)


class JobDeclarations:
    """``every``/``cron``/``at`` in terms of ``add``, which the class provides."""

    def add(
        self, name: str, schedule: Schedule, handler: Handler, **options: Unpack[JobOptions]
    ) -> Job:
        """Register a job with a schedule object (the class's own registration)."""
        raise NotImplementedError

    @overload
    def every(
        self,
        name: str,
        interval: Duration | Every,
        handler: None = None,
        **options: Unpack[JobOptions],
    ) -> Callable[[H], H]: ...
    @overload
    def every(
        self, name: str, interval: Duration | Every, handler: H, **options: Unpack[JobOptions]
    ) -> H: ...

    def every(
        self,
        name: str,
        interval: Duration | Every,
        handler: H | None = None,
        **options: Unpack[JobOptions],
    ) -> H | Callable[[H], H]:
        """Register a job every ``interval`` (epoch-aligned); a decorator without ``handler``.

        ``options`` are the job options (:class:`~anarchon.job_options.JobOptions`).
        """
        schedule = interval if isinstance(interval, Every) else Every(interval)
        return self._declare(name, schedule, handler, dict(options))

    @overload
    def cron(
        self,
        name: str,
        expression: str | Cron,
        handler: None = None,
        *,
        tz: str = "UTC",
        **options: Unpack[JobOptions],
    ) -> Callable[[H], H]: ...
    @overload
    def cron(
        self,
        name: str,
        expression: str | Cron,
        handler: H,
        *,
        tz: str = "UTC",
        **options: Unpack[JobOptions],
    ) -> H: ...

    def cron(
        self,
        name: str,
        expression: str | Cron,
        handler: H | None = None,
        *,
        tz: str = "UTC",
        **options: Unpack[JobOptions],
    ) -> H | Callable[[H], H]:
        """Register a cron job (5 or 6 fields, seconds first) in zone ``tz``; a decorator without ``handler``."""
        schedule = expression if isinstance(expression, Cron) else Cron(expression, tz=tz)
        return self._declare(name, schedule, handler, dict(options))

    @overload
    def at(
        self,
        name: str,
        when: datetime | int,
        handler: None = None,
        **options: Unpack[JobOptions],
    ) -> Callable[[H], H]: ...
    @overload
    def at(
        self, name: str, when: datetime | int, handler: H, **options: Unpack[JobOptions]
    ) -> H: ...

    def at(
        self,
        name: str,
        when: datetime | int,
        handler: H | None = None,
        **options: Unpack[JobOptions],
    ) -> H | Callable[[H], H]:
        """Register a one-off run at ``when`` (an aware datetime, or epoch ms); a decorator without ``handler``.

        It runs once, on one instance of the fleet, claimed and leased like a
        slot, and is recorded in history (docs/one-off-runs.md). Every instance
        that declares it honours it; a restart after ``when`` still claims it
        within ``max_late`` (or ``catch_up`` on lease backends).
        """
        return self._declare(name, Once(when), handler, dict(options))

    def _declare(
        self, name: str, schedule: Schedule, handler: H | None, options: dict[str, Any]
    ) -> H | Callable[[H], H]:
        if handler is None:

            def decorator(fn: H) -> H:
                self.add(name, schedule, fn, **options)
                return fn

            return decorator
        self.add(name, schedule, handler, **options)
        return handler
