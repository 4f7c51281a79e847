"""anarchon in a Flask app (docs/flask.md).

::

    from anarchon.contrib.flask import Anarchon

    jobs = Anarchon()          # declare jobs now, configure later

    @jobs.every("cleanup", "5m")
    def cleanup(ctx): ...

    def create_app():
        app = Flask(__name__)
        app.config["ANARCHON_BACKEND_URL"] = "redis://cache:6379/0"
        jobs.init_app(app)
        return app

``flask --app myapp anarchon run`` runs the scheduler until SIGTERM with
hand-over; with ``ANARCHON_AUTOSTART = True`` it starts in the web process on
the first request instead. Reads go through the sync facade: ``jobs.scheduler.history("cleanup")``.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click
from flask import Flask
from flask.cli import AppGroup

from anarchon.contrib._serve import serve_until_signal
from anarchon.durations import Duration
from anarchon.errors import InvalidConfigError
from anarchon.job_options import JobOptions
from anarchon.jobs import Handler
from anarchon.schedules import Cron, Every
from anarchon.sync import SyncScheduler

if TYPE_CHECKING:
    from typing_extensions import Unpack

H = TypeVar("H", bound=Handler)

__all__ = ["Anarchon"]


class Anarchon:
    """The Flask extension: a :class:`~anarchon.SyncScheduler` configured from ``app.config``.

    Config keys: ``ANARCHON_BACKEND_URL`` (default: ``$ANARCHON_BACKEND_URL``),
    ``ANARCHON_INSTANCE_ID``, ``ANARCHON_AUTOSTART`` (False) and
    ``ANARCHON_OPTIONS`` (more ``Scheduler(...)`` options). Jobs declared with
    :meth:`every`/:meth:`cron` before :meth:`init_app` are added when it runs.
    """

    def __init__(self, app: Flask | None = None) -> None:
        self._pending: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._scheduler: SyncScheduler | None = None
        self._autostarted = threading.Lock()
        if app is not None:
            self.init_app(app)

    @property
    def scheduler(self) -> SyncScheduler:
        """The sync scheduler (after :meth:`init_app`)."""
        if self._scheduler is None:
            raise InvalidConfigError("Anarchon.init_app(app) has not been called yet")
        return self._scheduler

    def every(
        self, name: str, interval: Duration | Every, **options: Unpack[JobOptions]
    ) -> Callable[[H], H]:
        """A decorator: ``Scheduler.every(name, interval, **options)``."""
        return self._declare("every", name, interval, dict(options))

    def cron(
        self,
        name: str,
        expression: str | Cron,
        *,
        tz: str = "UTC",
        **options: Unpack[JobOptions],
    ) -> Callable[[H], H]:
        """A decorator: ``Scheduler.cron(name, expression, tz=tz, **options)``."""
        return self._declare("cron", name, expression, {"tz": tz, **options})

    def at(
        self, name: str, when: datetime | int, **options: Unpack[JobOptions]
    ) -> Callable[[H], H]:
        """A decorator: ``Scheduler.at(name, when, **options)`` (docs/one-off-runs.md)."""
        return self._declare("at", name, when, dict(options))

    def _declare(
        self, kind: str, name: str, schedule: Any, options: dict[str, Any]
    ) -> Callable[[H], H]:
        def decorator(handler: H) -> H:
            if self._scheduler is not None:
                getattr(self._scheduler, kind)(name, schedule, handler, **options)
            else:
                self._pending.append((kind, (name, schedule, handler), options))
            return handler

        return decorator

    def init_app(self, app: Flask) -> None:
        """Build the scheduler from ``app.config``, add the declared jobs, register the CLI."""
        if self._scheduler is not None:
            raise InvalidConfigError("this Anarchon extension is already bound to an app")
        options = app.config.get("ANARCHON_OPTIONS", {})
        if not isinstance(options, dict):
            raise InvalidConfigError("ANARCHON_OPTIONS must be a dict of Scheduler options")
        scheduler = SyncScheduler(
            app.config.get("ANARCHON_BACKEND_URL"),
            instance_id=app.config.get("ANARCHON_INSTANCE_ID"),
            **options,
        )
        for kind, args, kw in self._pending:
            getattr(scheduler, kind)(*args, **kw)
        self._pending.clear()
        self._scheduler = scheduler
        app.extensions["anarchon"] = self
        app.cli.add_command(self._commands())
        if app.config.get("ANARCHON_AUTOSTART", False):
            app.before_request(self._autostart)

    def _autostart(self) -> None:
        if self._autostarted.acquire(blocking=False):
            self.scheduler.start()
            atexit.register(self.scheduler.stop)

    def _commands(self) -> AppGroup:
        group = AppGroup("anarchon", help="The anarchon scheduler.")

        @group.command("run")
        def run() -> None:
            """Run the scheduler until SIGTERM/SIGINT; running jobs are handed over."""
            serve_until_signal(self.scheduler, click.echo)

        return group
